import Foundation

/// Personal data of an event, kept apart from the rest of its payload so that it
/// can be encrypted per user and made unreadable by destroying that user's key.
public struct PersonalData: Codable, Sendable, Hashable {
    public var email: String?
    public var displayName: String?
    public var photoURL: String?
    /// The password hash (scrypt, self-describing string); only on `PasswordSet`.
    public var passwordHash: String?
    /// A phone factor's number (E.164); only on `MFAFactorEnrolled`.
    public var phoneNumber: String?
    /// A TOTP factor's shared secret (base32), which checking codes needs; only on `MFAFactorEnrolled`.
    public var totpSecret: String?
    /// The hash of a one-time code sent by SMS; only on `MFACodeSent`.
    public var codeHash: String?
    /// Developer claims (a JSON object's text), only on `CustomClaimsSet`: they may say anything about the person.
    public var customClaims: String?
    /// A provider's token for the person's grant (Apple refresh token, Facebook access token); only on `ProviderTokenStored`.
    public var providerToken: String?
    /// The app installation a session is for (Parse's `X-Parse-Installation-Id`, a device's id); only on `SessionStarted`.
    public var installationId: String?

    public init(
        email: String? = nil, displayName: String? = nil, photoURL: String? = nil, passwordHash: String? = nil,
        phoneNumber: String? = nil, totpSecret: String? = nil, codeHash: String? = nil, customClaims: String? = nil,
        providerToken: String? = nil, installationId: String? = nil
    ) {
        self.providerToken = providerToken
        self.installationId = installationId
        self.email = email
        self.displayName = displayName
        self.photoURL = photoURL
        self.passwordHash = passwordHash
        self.phoneNumber = phoneNumber
        self.totpSecret = totpSecret
        self.codeHash = codeHash
        self.customClaims = customClaims
    }
}

/// Everything that can happen to a user, as stored in the `user-<id>` stream.
public enum AccountEvent: Sendable, Hashable {
    /// A user came into being (first sign-in or sign-up).
    case userRegistered(UserRegistered)
    case identityLinked(IdentityLinked)
    case identityUnlinked(IdentityUnlinked)
    case emailVerified(EmailVerified)
    case passwordSet(PasswordSet)
    case signedIn(SignedIn)
    case sessionStarted(SessionStarted)
    case sessionRefreshed(SessionRefreshed)
    case sessionEnded(SessionEnded)
    /// Every session and token issued before `validSince` stops working.
    case sessionsRevoked(SessionsRevoked)
    case userDisabled(UserStatusChanged)
    case userEnabled(UserStatusChanged)
    /// The user was erased: their key is destroyed with this event, so everything the log
    /// says about them reads as erased from now on.
    case userErased(UserStatusChanged)
    /// A second factor was added, not yet confirmed (a phone factor's code is on its way).
    case mfaFactorEnrolled(MFAFactorEnrolled)
    /// The first valid code made the factor usable.
    case mfaFactorConfirmed(MFAFactorConfirmed)
    case mfaFactorRemoved(MFAFactorRemoved)
    /// A new set of recovery codes (hashes) replaced any earlier set.
    case mfaRecoveryCodesIssued(MFARecoveryCodesIssued)
    /// A first-factor sign-in needs a second factor: the `mfaPendingCredential` names this challenge.
    case mfaChallengeIssued(MFAChallengeIssued)
    /// A one-time code went out by SMS (for a challenge, or to confirm a phone factor).
    case mfaCodeSent(MFACodeSent)
    /// The SMS sender could not take a code; nothing else changed.
    case mfaCodeDeliveryFailed(MFACodeDeliveryFailed)
    case mfaCodeAccepted(MFACodeAccepted)
    case mfaCodeRejected(MFACodeRejected)
    case mfaRecoveryCodeUsed(MFARecoveryCodeUsed)
    /// A challenge can no longer be completed (completed, too many wrong codes).
    case mfaChallengeEnded(MFAChallengeEnded)
    /// An admin (or the user) changed the profile: names and pictures set or cleared, the email's verification set.
    case profileUpdated(ProfileUpdated)
    /// The developer claims that go into the user's Firebase ID tokens were replaced.
    case customClaimsSet(CustomClaimsSet)
    /// An admin set the user's email address (a password identity moves to it in the same command).
    case emailChanged(EmailChanged)
    /// A single-use code went out by mail (password reset, verification, email change or its undo).
    case emailCodeIssued(EmailCodeIssued)
    case emailCodeUsed(EmailCodeUsed)
    case emailCodeExpired(EmailCodeExpired)
    case emailCodeRefused(EmailCodeRefused)
    case emailCodeDeliveryFailed(EmailCodeDeliveryFailed)
    /// A provider said whether it forwards mail to the address it gave (Apple's private relay).
    case providerEmailStatusChanged(ProviderEmailStatusChanged)
    /// A provider token was kept for the identity (Apple's refresh token, Facebook's access token).
    case providerTokenStored(ProviderTokenStored)
    /// An authorization code could not be redeemed; the sign-in went on without it.
    case providerCodeNotRedeemed(ProviderCodeNotRedeemed)
    /// A session's grant was checked at its provider.
    case providerGrantChecked(ProviderGrantChecked)
    /// The outbox revoked the grant at the provider.
    case providerTokenRevoked(ProviderCall)
    /// A revocation attempt failed; it is retried at `retryAt`.
    case providerRevocationFailed(ProviderCall)
    /// The outbox gave up on a revocation after retrying for its whole window.
    case providerRevocationAbandoned(ProviderCall)

    public struct UserRegistered: Codable, Sendable, Hashable {
        public var userId: UUID
        public var emailVerified: Bool
        public var personal: PersonalData
    }

    public struct IdentityLinked: Codable, Sendable, Hashable {
        public var provider: String
        public var uid: String
        public var emailVerified: Bool
        public var personal: PersonalData
    }

    public struct IdentityUnlinked: Codable, Sendable, Hashable {
        public var provider: String
        public var uid: String
        /// `user`, `admin`, `takeover` (dropped because a trusted provider proved the email), or
        /// `upgraded` (an anonymous identity, dropped when the user linked a real one).
        public var reason: String
    }

    public struct EmailVerified: Codable, Sendable, Hashable {
        /// The provider that proved the address.
        public var provider: String
        public var personal: PersonalData
    }

    public struct PasswordSet: Codable, Sendable, Hashable {
        public var personal: PersonalData
    }

    public struct SignedIn: Codable, Sendable, Hashable {
        public var provider: String
        public var sessionId: UUID
        /// `new_user`, `returning`, or `takeover`.
        public var outcome: String
    }

    public struct SessionStarted: Codable, Sendable, Hashable {
        public var sessionId: UUID
        /// SHA-256 (hex) of the refresh token; the token itself is never stored.
        public var refreshTokenHash: String
        public var authTime: Date
        public var amr: [String]
        /// RFC 7638 thumbprint of the DPoP key the session is bound to.
        public var jkt: String?
        /// The kind of secret the session holds (schema 2; schema 1 sessions are upcast as `/v1`'s).
        public var secretKind: SessionSecretKind
        /// The app installation the session is for, as sessions written before it was sealed kept it (in clear): a
        /// session now keeps it in `personal.installationId` (``installation``).
        public var installationId: String?
        /// When the session's secret stops working, for secrets that do not rotate (Parse).
        public var expiresAt: Date?
        /// The second factor proved for the session, when one was.
        public var secondFactorId: UUID?
        /// The session's developer claims (`personal.customClaims`) and app installation (`personal.installationId`),
        /// sealed like personal data.
        public var personal: PersonalData?

        /// The app installation the session is for, when the surface names one (Parse): an identifier of the person's
        /// device, sealed with their key (unreadable once they are erased), or in clear in sessions from before.
        public var installation: String? { personal?.installationId ?? installationId }
    }

    public struct SessionRefreshed: Codable, Sendable, Hashable {
        public var sessionId: UUID
        public var previousTokenHash: String
        public var refreshTokenHash: String
        public var generation: Int
    }

    public struct SessionEnded: Codable, Sendable, Hashable {
        public var sessionId: UUID
        /// `sign_out`, `revoked`, `reuse_detected`, `takeover`, `disabled`, `erased`, `replaced` (a new
        /// session of the same app installation), `password_changed`, `provider_revoked`, `session_limit`, `ended_by_admin`
        /// (this one session, by an admin).
        public var reason: String
    }

    public struct SessionsRevoked: Codable, Sendable, Hashable {
        public var validSince: Date
    }

    public struct UserStatusChanged: Codable, Sendable, Hashable {
        public var reason: String?
    }

    public struct ProfileUpdated: Codable, Sendable, Hashable {
        /// The display name and photo URL set (absent: unchanged).
        public var personal: PersonalData
        /// What was removed: `displayName`, `photoURL`.
        public var cleared: [String]
        /// The email's verification, when it was set either way.
        public var emailVerified: Bool?

        public init(personal: PersonalData, cleared: [String] = [], emailVerified: Bool? = nil) {
            self.personal = personal
            self.cleared = cleared
            self.emailVerified = emailVerified
        }
    }

    public struct EmailChanged: Codable, Sendable, Hashable {
        /// `personal.email`: the new address.
        public var personal: PersonalData
        public var emailVerified: Bool
    }

    public struct CustomClaimsSet: Codable, Sendable, Hashable {
        /// `personal.customClaims`: the claims' JSON object; `{}` clears them.
        public var personal: PersonalData
    }

    /// The stored event type name.
    public var type: String {
        switch self {
        case .userRegistered: "UserRegistered"
        case .identityLinked: "IdentityLinked"
        case .identityUnlinked: "IdentityUnlinked"
        case .emailVerified: "EmailVerified"
        case .passwordSet: "PasswordSet"
        case .signedIn: "SignedIn"
        case .sessionStarted: "SessionStarted"
        case .sessionRefreshed: "SessionRefreshed"
        case .sessionEnded: "SessionEnded"
        case .sessionsRevoked: "SessionsRevoked"
        case .userDisabled: "UserDisabled"
        case .userEnabled: "UserEnabled"
        case .userErased: "UserErased"
        case .mfaFactorEnrolled: "MFAFactorEnrolled"
        case .mfaFactorConfirmed: "MFAFactorConfirmed"
        case .mfaFactorRemoved: "MFAFactorRemoved"
        case .mfaRecoveryCodesIssued: "MFARecoveryCodesIssued"
        case .mfaChallengeIssued: "MFAChallengeIssued"
        case .mfaCodeSent: "MFACodeSent"
        case .mfaCodeDeliveryFailed: "MFACodeDeliveryFailed"
        case .mfaCodeAccepted: "MFACodeAccepted"
        case .mfaCodeRejected: "MFACodeRejected"
        case .mfaRecoveryCodeUsed: "MFARecoveryCodeUsed"
        case .mfaChallengeEnded: "MFAChallengeEnded"
        case .profileUpdated: "ProfileUpdated"
        case .customClaimsSet: "CustomClaimsSet"
        case .emailChanged: "EmailChanged"
        case .emailCodeIssued: "EmailCodeIssued"
        case .emailCodeUsed: "EmailCodeUsed"
        case .emailCodeExpired: "EmailCodeExpired"
        case .emailCodeRefused: "EmailCodeRefused"
        case .emailCodeDeliveryFailed: "EmailCodeDeliveryFailed"
        case .providerEmailStatusChanged: "ProviderEmailStatusChanged"
        case .providerTokenStored: "ProviderTokenStored"
        case .providerCodeNotRedeemed: "ProviderCodeNotRedeemed"
        case .providerGrantChecked: "ProviderGrantChecked"
        case .providerTokenRevoked: "ProviderTokenRevoked"
        case .providerRevocationFailed: "ProviderRevocationFailed"
        case .providerRevocationAbandoned: "ProviderRevocationAbandoned"
        }
    }
}

/// Turns account events into stored events and back.
public enum AccountEventCodec {
    /// Upcasters from older payload schemas of account events to today's. Replay, the command
    /// layer and history read account streams through them.
    public static let upcasters = UpcasterChain([SessionStartedSecretKind()])

    /// The payload schema each type is written with today (1 where none was given).
    static let schemas: [String: Int] = ["SessionStarted": 2]

    /// `SessionStarted` 1 → 2: sessions started before secrets had kinds were all `/v1`'s
    /// access and refresh tokens, the only kind there was.
    struct SessionStartedSecretKind: EventUpcaster {
        let eventType = "SessionStarted"
        let fromSchema = 1

        func upcast(_ data: Data, metadata: EventMetadata) throws -> Data {
            guard var payload = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { return data }
            payload["secretKind"] = SessionSecretKind.accessAndRefreshTokens.rawValue
            return try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys, .withoutEscapingSlashes])
        }
    }

    /// Sorted keys, unescaped slashes, dates to the millisecond: the bytes `JSONEncoder` wrote
    /// before, several times faster.
    private static let encoder = CompactJSONEncoder(dates: .iso8601Milliseconds)

    /// Payloads are read without `JSONDecoder`: replay and the kept states decode every event.
    private static let decoder = CompactJSONDecoder()

    /// The stored form, with a deterministic id so that retrying a command writes nothing new. The payloads
    /// of a sign-in and a refresh write themselves (EventText.swift): the same bytes, without the encoder's tree.
    public static func encode(_ event: AccountEvent, userId: UUID, id: UUID) throws -> NewEvent {
        let data: Data
        switch event {
        case .userRegistered(let payload): data = try encoder.encodeData(payload)
        case .identityLinked(let payload): data = try encoder.encodeData(payload)
        case .identityUnlinked(let payload): data = try encoder.encodeData(payload)
        case .emailVerified(let payload): data = try encoder.encodeData(payload)
        case .passwordSet(let payload): data = try encoder.encodeData(payload)
        case .signedIn(let payload): data = Data(payload.jsonText)
        case .sessionStarted(let payload): data = Data(payload.jsonText)
        case .sessionRefreshed(let payload): data = Data(payload.jsonText)
        case .sessionEnded(let payload): data = try encoder.encodeData(payload)
        case .sessionsRevoked(let payload): data = try encoder.encodeData(payload)
        case .userDisabled(let payload), .userEnabled(let payload), .userErased(let payload): data = try encoder.encodeData(payload)
        case .mfaFactorEnrolled(let payload): data = try encoder.encodeData(payload)
        case .mfaFactorConfirmed(let payload): data = try encoder.encodeData(payload)
        case .mfaFactorRemoved(let payload): data = try encoder.encodeData(payload)
        case .mfaRecoveryCodesIssued(let payload): data = try encoder.encodeData(payload)
        case .mfaChallengeIssued(let payload): data = try encoder.encodeData(payload)
        case .mfaCodeSent(let payload): data = try encoder.encodeData(payload)
        case .mfaCodeDeliveryFailed(let payload): data = try encoder.encodeData(payload)
        case .mfaCodeAccepted(let payload): data = try encoder.encodeData(payload)
        case .mfaCodeRejected(let payload): data = try encoder.encodeData(payload)
        case .mfaRecoveryCodeUsed(let payload): data = try encoder.encodeData(payload)
        case .mfaChallengeEnded(let payload): data = try encoder.encodeData(payload)
        case .profileUpdated(let payload): data = try encoder.encodeData(payload)
        case .customClaimsSet(let payload): data = try encoder.encodeData(payload)
        case .emailChanged(let payload): data = try encoder.encodeData(payload)
        case .emailCodeIssued(let payload): data = try encoder.encodeData(payload)
        case .emailCodeUsed(let payload): data = try encoder.encodeData(payload)
        case .emailCodeExpired(let payload): data = try encoder.encodeData(payload)
        case .emailCodeRefused(let payload): data = try encoder.encodeData(payload)
        case .emailCodeDeliveryFailed(let payload): data = try encoder.encodeData(payload)
        case .providerEmailStatusChanged(let payload): data = try encoder.encodeData(payload)
        case .providerTokenStored(let payload): data = try encoder.encodeData(payload)
        case .providerCodeNotRedeemed(let payload): data = try encoder.encodeData(payload)
        case .providerGrantChecked(let payload): data = try encoder.encodeData(payload)
        case .providerTokenRevoked(let payload), .providerRevocationFailed(let payload), .providerRevocationAbandoned(let payload):
            data = try encoder.encodeData(payload)
        }
        return NewEvent(id: id, type: event.type, schema: schemas[event.type] ?? 1, data: data, userId: userId)
    }

    /// Reads a stored event; nil for a type this decoder does not know (another aggregate's). A sign-in's and a
    /// refresh's payloads, and a sign-out's, are read from their text (EventText.swift) when it has the form their writers give.
    public static func decode(_ event: RecordedEvent) throws -> AccountEvent? {
        let data = event.data
        switch event.type {
        case "UserRegistered": return .userRegistered(try decoder.decode(AccountEvent.UserRegistered.self, from: data))
        case "IdentityLinked": return .identityLinked(try decoder.decode(AccountEvent.IdentityLinked.self, from: data))
        case "IdentityUnlinked": return .identityUnlinked(try decoder.decode(AccountEvent.IdentityUnlinked.self, from: data))
        case "EmailVerified": return .emailVerified(try decoder.decode(AccountEvent.EmailVerified.self, from: data))
        case "PasswordSet": return .passwordSet(try decoder.decode(AccountEvent.PasswordSet.self, from: data))
        case "SignedIn": return .signedIn(try AccountEvent.SignedIn(plainJSON: data) ?? decoder.decode(AccountEvent.SignedIn.self, from: data))
        case "SessionStarted":
            return .sessionStarted(try AccountEvent.SessionStarted(plainJSON: data) ?? decoder.decode(AccountEvent.SessionStarted.self, from: data))
        case "SessionRefreshed":
            return .sessionRefreshed(try AccountEvent.SessionRefreshed(plainJSON: data) ?? decoder.decode(AccountEvent.SessionRefreshed.self, from: data))
        case "SessionEnded": return .sessionEnded(try AccountEvent.SessionEnded(plainJSON: data) ?? decoder.decode(AccountEvent.SessionEnded.self, from: data))
        case "SessionsRevoked": return .sessionsRevoked(try decoder.decode(AccountEvent.SessionsRevoked.self, from: data))
        case "UserDisabled": return .userDisabled(try decoder.decode(AccountEvent.UserStatusChanged.self, from: data))
        case "UserEnabled": return .userEnabled(try decoder.decode(AccountEvent.UserStatusChanged.self, from: data))
        case "UserErased": return .userErased(try decoder.decode(AccountEvent.UserStatusChanged.self, from: data))
        case "MFAFactorEnrolled": return .mfaFactorEnrolled(try decoder.decode(AccountEvent.MFAFactorEnrolled.self, from: data))
        case "MFAFactorConfirmed": return .mfaFactorConfirmed(try decoder.decode(AccountEvent.MFAFactorConfirmed.self, from: data))
        case "MFAFactorRemoved": return .mfaFactorRemoved(try decoder.decode(AccountEvent.MFAFactorRemoved.self, from: data))
        case "MFARecoveryCodesIssued":
            return .mfaRecoveryCodesIssued(try decoder.decode(AccountEvent.MFARecoveryCodesIssued.self, from: data))
        case "MFAChallengeIssued": return .mfaChallengeIssued(try decoder.decode(AccountEvent.MFAChallengeIssued.self, from: data))
        case "MFACodeSent": return .mfaCodeSent(try decoder.decode(AccountEvent.MFACodeSent.self, from: data))
        case "MFACodeDeliveryFailed":
            return .mfaCodeDeliveryFailed(try decoder.decode(AccountEvent.MFACodeDeliveryFailed.self, from: data))
        case "MFACodeAccepted": return .mfaCodeAccepted(try decoder.decode(AccountEvent.MFACodeAccepted.self, from: data))
        case "MFACodeRejected": return .mfaCodeRejected(try decoder.decode(AccountEvent.MFACodeRejected.self, from: data))
        case "MFARecoveryCodeUsed": return .mfaRecoveryCodeUsed(try decoder.decode(AccountEvent.MFARecoveryCodeUsed.self, from: data))
        case "MFAChallengeEnded": return .mfaChallengeEnded(try decoder.decode(AccountEvent.MFAChallengeEnded.self, from: data))
        case "ProfileUpdated": return .profileUpdated(try decoder.decode(AccountEvent.ProfileUpdated.self, from: data))
        case "CustomClaimsSet": return .customClaimsSet(try decoder.decode(AccountEvent.CustomClaimsSet.self, from: data))
        case "EmailChanged": return .emailChanged(try decoder.decode(AccountEvent.EmailChanged.self, from: data))
        case "EmailCodeIssued": return .emailCodeIssued(try decoder.decode(AccountEvent.EmailCodeIssued.self, from: data))
        case "EmailCodeUsed": return .emailCodeUsed(try decoder.decode(AccountEvent.EmailCodeUsed.self, from: data))
        case "EmailCodeExpired": return .emailCodeExpired(try decoder.decode(AccountEvent.EmailCodeExpired.self, from: data))
        case "EmailCodeRefused": return .emailCodeRefused(try decoder.decode(AccountEvent.EmailCodeRefused.self, from: data))
        case "EmailCodeDeliveryFailed":
            return .emailCodeDeliveryFailed(try decoder.decode(AccountEvent.EmailCodeDeliveryFailed.self, from: data))
        case "ProviderEmailStatusChanged":
            return .providerEmailStatusChanged(try decoder.decode(AccountEvent.ProviderEmailStatusChanged.self, from: data))
        case "ProviderTokenStored": return .providerTokenStored(try decoder.decode(AccountEvent.ProviderTokenStored.self, from: data))
        case "ProviderCodeNotRedeemed":
            return .providerCodeNotRedeemed(try decoder.decode(AccountEvent.ProviderCodeNotRedeemed.self, from: data))
        case "ProviderGrantChecked": return .providerGrantChecked(try decoder.decode(AccountEvent.ProviderGrantChecked.self, from: data))
        case "ProviderTokenRevoked": return .providerTokenRevoked(try decoder.decode(AccountEvent.ProviderCall.self, from: data))
        case "ProviderRevocationFailed": return .providerRevocationFailed(try decoder.decode(AccountEvent.ProviderCall.self, from: data))
        case "ProviderRevocationAbandoned":
            return .providerRevocationAbandoned(try decoder.decode(AccountEvent.ProviderCall.self, from: data))
        default: return nil
        }
    }

    /// A deterministic event id from a command id and the event's index in the command.
    public static func eventID(command: UUID, index: Int) -> UUID {
        var bytes = command.uuid
        // Mix the index into the last bytes; index 0 keeps a distinct, stable id too.
        let mixed = UInt16(truncatingIfNeeded: index &+ 1) &* 0x9E37
        bytes.14 ^= UInt8(mixed >> 8)
        bytes.15 ^= UInt8(mixed & 0xff)
        bytes.13 ^= UInt8(truncatingIfNeeded: index >> 8)
        return UUID(uuid: bytes)
    }
}

/// ISO 8601 with milliseconds and `Z`, as stored in event payloads and served by the API.
public enum ISO8601Milliseconds {
    /// `2026-11-29T13:29:45.123Z`, rounded to the nearest millisecond so that
    /// formatting a parsed value gives back the same text.
    public static func format(_ date: Date) -> String {
        UTCTimestamp.format(date, separator: UInt8(ascii: "T"), fractionDigits: 3, zone: "Z")
    }

    /// Appends the text of ``format(_:)`` to `bytes`.
    public static func write(_ date: Date, to bytes: inout [UInt8]) {
        UTCTimestamp.write(date, separator: UInt8(ascii: "T"), fractionDigits: 3, zone: "Z", to: &bytes)
    }

    /// Parses with or without fractional seconds; the zone is `Z` or an offset.
    public static func parse(_ text: String) -> Date? {
        UTCTimestamp.parse(text, separators: [UInt8(ascii: "T")], zoneRequired: true)
    }

    /// ``parse(_:)`` of the UTF-8 bytes of the text.
    public static func parse(utf8: UnsafeBufferPointer<UInt8>) -> Date? {
        UTCTimestamp.parse(bytes: utf8, separators: [UInt8(ascii: "T")], zoneRequired: true)
    }
}
