import Foundation

/// The kinds of second factor.
public enum MFAFactorType: String, Codable, Sendable, Hashable {
    /// A TOTP authenticator app (RFC 6238).
    case totp
    /// One-time codes by SMS to a phone number.
    case phone
}

/// How a second factor was proved, as recorded and as named in `amr` (RFC 8176).
public enum MFAMethod: String, Codable, Sendable, Hashable {
    case totp
    case sms
    case recoveryCode = "recovery_code"

    /// The RFC 8176 authentication method reference (`rcv` is Tether's own, for a recovery code).
    public var amr: String {
        switch self {
        case .totp: "otp"
        case .sms: "sms"
        case .recoveryCode: "rcv"
        }
    }
}

extension AccountEvent {
    public struct MFAFactorEnrolled: Codable, Sendable, Hashable {
        public var factorId: UUID
        public var type: MFAFactorType
        /// Display name, phone number or TOTP secret.
        public var personal: PersonalData
    }

    public struct MFAFactorConfirmed: Codable, Sendable, Hashable {
        public var factorId: UUID
        /// The TOTP time step of the confirming code, which cannot be used again.
        public var totpStep: Int64?
        /// The factor's display name when it is given at confirmation (Firebase's clients name a factor only
        /// then), replacing the one of the enrolment; nil when none was given.
        public var personal: PersonalData?

        public init(factorId: UUID, totpStep: Int64?, displayName: String? = nil) {
            self.factorId = factorId
            self.totpStep = totpStep
            self.personal = displayName.map { PersonalData(displayName: $0) }
        }
    }

    public struct MFAFactorRemoved: Codable, Sendable, Hashable {
        public var factorId: UUID
        /// `user`, `admin`, `password_reset`, or for an enrolment that was never confirmed `too_many_attempts` or
        /// `superseded` (it gave way to a newer enrolment when the user held the most factors).
        public var reason: String
        /// True for an enrolment that was never confirmed (no `MFAFactorConfirmed` came before): no factor the user
        /// could sign in with went, so backends are not told of one. Absent otherwise, and in events written before it.
        public var pending: Bool? = nil
    }

    public struct MFARecoveryCodesIssued: Codable, Sendable, Hashable {
        /// SHA-256 (hex) of each code; the codes themselves are shown once and never stored.
        public var codeHashes: [String]
    }

    public struct MFAChallengeIssued: Codable, Sendable, Hashable {
        public var challengeId: UUID
        /// The provider of the first factor.
        public var firstFactor: String
        /// The first factor's `amr`, completed by the second.
        public var amr: [String]
        public var expiresAt: Date
        /// The DPoP key the first step was bound to; the second step must be signed by it too.
        public var jkt: String?
        /// The developer claims of a custom token's sign-in (`personal.customClaims`), sealed like personal data:
        /// the session the second factor opens carries them.
        public var personal: PersonalData? = nil
    }

    public struct MFACodeSent: Codable, Sendable, Hashable {
        /// Nil when the code confirms a phone factor being enrolled.
        public var challengeId: UUID?
        public var factorId: UUID
        public var expiresAt: Date
        /// The code's hash (`codeHash`), kept with the personal data: sealed with the user's key, since
        /// six digits are found from their hash in a moment by anyone who can read the log.
        public var personal: PersonalData

        /// The hash of the code sent, if it can still be read.
        public var codeHash: String? { personal.codeHash }

        init(challengeId: UUID?, factorId: UUID, codeHash: String, expiresAt: Date) {
            self.challengeId = challengeId
            self.factorId = factorId
            self.expiresAt = expiresAt
            self.personal = PersonalData(codeHash: codeHash)
        }
    }

    public struct MFACodeDeliveryFailed: Codable, Sendable, Hashable {
        public var challengeId: UUID?
        public var factorId: UUID
        public var reason: String

        public init(challengeId: UUID?, factorId: UUID, reason: String) {
            self.challengeId = challengeId
            self.factorId = factorId
            self.reason = reason
        }
    }

    public struct MFACodeAccepted: Codable, Sendable, Hashable {
        public var challengeId: UUID
        public var factorId: UUID?
        public var method: MFAMethod
        public var totpStep: Int64?
        /// The session the completed sign-in opened.
        public var sessionId: UUID
    }

    public struct MFACodeRejected: Codable, Sendable, Hashable {
        /// Nil for a wrong code while confirming an enrolment.
        public var challengeId: UUID?
        public var factorId: UUID?
        public var method: MFAMethod
        /// Which wrong code of the challenge (or enrolment) this was, from 1.
        public var attempt: Int
        /// `wrong_code`, `expired_code`, `reused_code` or `no_code_sent`.
        public var reason: String
    }

    public struct MFARecoveryCodeUsed: Codable, Sendable, Hashable {
        public var challengeId: UUID
        public var codeHash: String
    }

    public struct MFAChallengeEnded: Codable, Sendable, Hashable {
        public var challengeId: UUID
        /// `completed`, `too_many_attempts`, or, for a sign-in that cannot finish any more, why: `factors_removed`,
        /// `revoked`, `password_changed`, `takeover`, `disabled` or `first_factor_unlinked` (the way in it began
        /// with was removed).
        public var reason: String
    }
}
