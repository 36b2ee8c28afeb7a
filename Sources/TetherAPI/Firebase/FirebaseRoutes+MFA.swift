import Foundation
import TetherCore
import TetherHTTP

/// The v2 second-factor routes (`/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:*` and
/// `mfaSignIn:*`) for phone and TOTP factors, over the same factors as `/v1/users/me/mfa` (SEMANTICS §2,
/// WIRE-FACTS §6e).
extension FirebaseRoutes {
    static let identityPlatform = "/identitytoolkit.googleapis.com/v2"

    func registerMFA(on router: inout Router) {
        let routes: [(String, @Sendable (FirebaseRequest) async throws -> JSONValue)] = [
            ("accounts/mfaEnrollment:start", startEnrollment),
            ("accounts/mfaEnrollment:finalize", finalizeEnrollment),
            ("accounts/mfaEnrollment:withdraw", withdrawEnrollment),
            ("accounts/mfaSignIn:start", startSignIn),
            ("accounts/mfaSignIn:finalize", finalizeSignIn),
            ("accounts:revokeToken", revokeToken),
        ]
        for (path, handler) in routes {
            router.post("\(Self.identityPlatform)/\(path)") { request in try await answer(request, admin: false, handler) }
        }
    }

    /// A nested object of the body (`phoneEnrollmentInfo`, `totpVerificationInfo`, …), if present.
    private func nested(_ body: FirebaseBody, _ name: String) throws(FirebaseError) -> FirebaseBody? {
        switch body.members[name] {
        case nil, .null?: return nil
        case .object(let members)?: return FirebaseBody(members: members)
        default: throw FirebaseError("INVALID_ARGUMENT", "\(name) must be an object.")
        }
    }

    /// The factor a request names; `missing` is the code for a request that names none (the SDKs map
    /// `MISSING_MFA_ENROLLMENT_ID` and `MISSING_SESSION_INFO` to errors of their own), and one that is no id
    /// of ours is `MFA_ENROLLMENT_NOT_FOUND`.
    private func factorId(_ text: String?, missing: String) throws(FirebaseError) -> UUID {
        guard let text, !text.isEmpty else { throw FirebaseError(missing) }
        guard let id = UUID(text: text) else { throw FirebaseError("MFA_ENROLLMENT_NOT_FOUND") }
        return id
    }

    /// `mfaEnrollment:start`: a phone factor texts its code (`phoneSessionInfo.sessionInfo` names it); a TOTP
    /// factor answers its secret (`totpSessionInfo`). Needs a sign-in of the last 5 minutes and a verified email.
    func startEnrollment(_ request: FirebaseRequest) async throws -> JSONValue {
        let (account, claims) = try await authenticate(idToken: try request.body.string("idToken"))
        // A second factor guards a first one: an anonymous user has none to guard.
        guard !account.isAnonymous else { throw FirebaseError("UNSUPPORTED_FIRST_FACTOR") }
        // As Firebase: a second factor guards a proved address, so that whoever signed up with someone else's
        // cannot lock its owner out with a factor of theirs.
        guard account.isEmailVerified else {
            throw FirebaseError("UNVERIFIED_EMAIL", "Need to verify email first before enrolling second factors.")
        }
        let context = context(request, user: account.id)
        if let phone = try nested(request.body, "phoneEnrollmentInfo") {
            guard let number = try phone.string("phoneNumber"), !number.isEmpty else { throw FirebaseError("INVALID_PHONE_NUMBER") }
            if account.mfa.confirmedFactors.contains(where: { $0.phoneNumber == number }) { throw FirebaseError("SECOND_FACTOR_EXISTS") }
            guard let sms = sms else { throw FirebaseError("OPERATION_NOT_ALLOWED", "This server sends no SMS.") }
            let factorId = try await accounts.enrolPhone(
                userId: account.id, authTime: claims.authTime, phoneNumber: number, displayName: nil, sms: sms, context: context)
            return .object(["phoneSessionInfo": .object(["sessionInfo": .string(factorId.lowercasedText)])])
        }
        guard try nested(request.body, "totpEnrollmentInfo") != nil else {
            throw FirebaseError("INVALID_ARGUMENT", "Send phoneEnrollmentInfo or totpEnrollmentInfo.")
        }
        let enrolment = try await accounts.enrolTOTP(userId: account.id, authTime: claims.authTime, displayName: nil, context: context)
        return .object(["totpSessionInfo": .object([
            "sharedSecretKey": .string(enrolment.secret), "verificationCodeLength": 6, "hashingAlgorithm": "SHA1", "periodSec": 30,
            "sessionInfo": .string(enrolment.factorId.lowercasedText),
            "finalizeEnrollmentTime": .string(ISO8601Milliseconds.format(Date().addingTimeInterval(600))),
        ])])
    }

    /// `mfaEnrollment:finalize`: the first code confirms the factor, named by the request's `displayName` (the
    /// SDKs name a factor only here); the answer is new tokens, which the SDKs put in place of the user's.
    func finalizeEnrollment(_ request: FirebaseRequest) async throws -> JSONValue {
        let (account, claims) = try await authenticate(idToken: try request.body.string("idToken"))
        let displayName: String?
        do { displayName = try UserAccount.factorDisplayName(try request.body.string("displayName")) } catch { throw FirebaseError(converting: error) }
        let (type, info) = try nested(request.body, "phoneVerificationInfo").map { (MFAFactorType.phone, $0) }
            ?? nested(request.body, "totpVerificationInfo").map { (MFAFactorType.totp, $0) }
            ?? { throw FirebaseError("INVALID_ARGUMENT", "Send phoneVerificationInfo or totpVerificationInfo.") }()
        let factorId = try factorId(try info.string("sessionInfo"), missing: "MISSING_SESSION_INFO")
        guard let code = try info.string(type == .phone ? "code" : "verificationCode"), !code.isEmpty else {
            throw FirebaseError("MISSING_CODE")
        }
        // The code just proved the new factor: the tokens say so, as Firebase's do.
        let context = context(request, user: account.id)
        let reissue = Reissue(claims: claims, proved: (factorId, type), base: newSession(provider: Self.tetherProvider(claims)), now: context.now)
        let confirmed = try await accounts.confirmFactor(
            userId: account.id, factorId: factorId, type: type, code: code, displayName: displayName, context: context, followUp: reissue.decide)
        return try await reissue.answer(confirmed.account, self)
    }

    /// `mfaEnrollment:withdraw`: removes a factor (needs a recent sign-in); new tokens again.
    func withdrawEnrollment(_ request: FirebaseRequest) async throws -> JSONValue {
        let (account, claims) = try await authenticate(idToken: try request.body.string("idToken"))
        let factorId = try factorId(try request.body.string("mfaEnrollmentId"), missing: "MISSING_MFA_ENROLLMENT_ID")
        let context = context(request, user: account.id)
        let reissue = Reissue(claims: claims, proved: nil, base: newSession(provider: Self.tetherProvider(claims)), now: context.now)
        let changed = try await accounts.removeFactors(
            userId: account.id, factorIds: [factorId], authTime: claims.authTime, context: context, followUp: reissue.decide)
        return try await reissue.answer(changed, self)
    }

    /// The Tether provider of the sign-in method an ID token names.
    static func tetherProvider(_ claims: FirebaseIDTokenClaims) -> String {
        FirebaseProviders.tetherName(claims.signInProvider) ?? claims.signInProvider
    }

    /// Runs a step of a pending sign-in. One begun on `/v1` with a device key (DPoP) is finished only with that
    /// key, which this surface never has: its credential is no good here (`INVALID_MFA_PENDING_CREDENTIAL`), and
    /// the refusal costs no attempt.
    private func unbound<T>(_ step: () async throws -> T) async throws -> T {
        do {
            return try await step()
        } catch let error as AccountError where error.reason == .invalidDPoPProof {
            throw FirebaseError("INVALID_MFA_PENDING_CREDENTIAL", "This sign-in was begun with a device key: finish it where it began.")
        }
    }

    /// `mfaSignIn:start` (phone only): texts the code of the pending sign-in.
    func startSignIn(_ request: FirebaseRequest) async throws -> JSONValue {
        guard let credential = try request.body.string("mfaPendingCredential"), !credential.isEmpty else {
            throw FirebaseError("MISSING_MFA_PENDING_CREDENTIAL")
        }
        let pending = try await commands.pendingCredentials.read(credential)
        let factorId = try factorId(try request.body.string("mfaEnrollmentId"), missing: "MISSING_MFA_ENROLLMENT_ID")
        _ = try await unbound {
            try await accounts.sendChallengeCode(
                userId: pending.userId, challengeId: pending.challengeId, factorId: factorId, presentedJKT: nil, sms: sms,
                context: context(request, user: pending.userId))
        }
        return .object(["phoneResponseInfo": .object(["sessionInfo": .string(factorId.lowercasedText)])])
    }

    /// `mfaSignIn:finalize`: the phone code (`phoneVerificationInfo`) or a TOTP code (`mfaEnrollmentId` and
    /// `totpVerificationInfo`) completes the sign-in; the answer is its tokens.
    func finalizeSignIn(_ request: FirebaseRequest) async throws -> JSONValue {
        guard let credential = try request.body.string("mfaPendingCredential"), !credential.isEmpty else {
            throw FirebaseError("MISSING_MFA_PENDING_CREDENTIAL")
        }
        let pending = try await commands.pendingCredentials.read(credential)
        let factorId: UUID
        let code: String?
        if let phone = try nested(request.body, "phoneVerificationInfo") {
            factorId = try self.factorId(try phone.string("sessionInfo"), missing: "MISSING_SESSION_INFO")
            code = try phone.string("code")
        } else if let totp = try nested(request.body, "totpVerificationInfo") {
            factorId = try self.factorId(try request.body.string("mfaEnrollmentId"), missing: "MISSING_MFA_ENROLLMENT_ID")
            code = try totp.string("verificationCode")
        } else {
            throw FirebaseError("INVALID_ARGUMENT", "Send phoneVerificationInfo, or mfaEnrollmentId and totpVerificationInfo.")
        }
        guard let code, !code.isEmpty else { throw FirebaseError("MISSING_CODE") }
        let (session, refreshToken) = newSession(provider: "mfa")
        let (started, account) = try await unbound {
            try await accounts.verifyChallenge(
                userId: pending.userId, challengeId: pending.challengeId, factorId: factorId, code: code, recoveryCode: nil, session: session,
                context: context(request, user: pending.userId))
        }
        var completed = session
        completed.amr = started.amr
        completed.secondFactorId = started.secondFactorId
        completed.developerClaims = started.developerClaims
        return .object(try await tokens(account, session: completed, refreshToken: refreshToken, signInProvider: Self.signInProvider(amr: started.amr)))
    }
}
