import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres
import TetherProviders

/// A TOTP factor being enrolled: what the user's authenticator app needs.
public struct TOTPEnrolment: Sendable {
    public var factorId: UUID
    /// The shared secret, base32 without padding.
    public var secret: String
    /// `otpauth://totp/…` for a QR code.
    public var otpauthURI: String
}

/// A confirmed factor, and the recovery codes shown once when it is the user's first.
public struct ConfirmedFactor: Sendable {
    public var factor: MFAState.Factor
    public var recoveryCodes: [String]?
    /// The user after the command.
    public var account: UserAccount
}

/// Second factors: enrolment, removal, recovery codes, and the challenge of a sign-in.
///
/// Codes are checked here (TOTP needs the secret and the clock) and judged by the
/// domain (reuse, expiry, attempts). A wrong code's events are committed before the
/// error is answered, so the attempt counts even though the request fails.
extension AccountService {
    /// Starts a TOTP enrolment; the first valid code confirms it.
    public func enrolTOTP(userId: UUID, authTime: Date, displayName: String?, context: CommandContext) async throws -> TOTPEnrolment {
        let factorId = AccountEventCodec.eventID(command: context.commandId, index: 30_000)
        let secret = Base32.encode(TOTP.generateSecret())
        let account = try await change(userId, context) {
            try $0.enrolTOTP(factorId: factorId, secret: secret, displayName: displayName, authTime: authTime, now: context.now)
        }
        // The stored secret wins: a command re-run with the same id returns the first one.
        let storedSecret = account.mfa.factors[factorId]?.totpSecret ?? secret
        let totp = try TOTP(secret: try Base32.decode(storedSecret))
        // The label's account part may not hold ':' (the issuer separator); such an email gives way to the user id.
        let accountName = account.email.flatMap { $0.contains(":") || $0.isEmpty ? nil : $0 } ?? userId.lowercasedText
        let uri = try OTPAuthURI(totp: totp, issuer: "Tether", accountName: accountName)
        return TOTPEnrolment(factorId: factorId, secret: storedSecret, otpauthURI: uri.stringValue)
    }

    /// Starts a phone enrolment: the code goes by SMS before anything is recorded, so a failed send changes nothing.
    public func enrolPhone(
        userId: UUID, authTime: Date, phoneNumber: String, displayName: String?, sms: any SMSSender, context: CommandContext
    ) async throws -> UUID {
        guard PhoneNumber.isE164(phoneNumber) else { throw AccountError.invalidPhoneNumber }
        let factorId = AccountEventCodec.eventID(command: context.commandId, index: 30_000)
        let code = Self.newSMSCode()
        let codeHash = Self.codeHash(code, for: factorId)
        let decide: @Sendable (UserAccount) throws -> [AccountEvent] = {
            try $0.enrolPhone(factorId: factorId, phoneNumber: phoneNumber, displayName: displayName, codeHash: codeHash,
                              authTime: authTime, now: context.now)
        }
        // Decide once on current state, so that a refused enrolment sends nothing.
        _ = try decide(try await read(userId))
        try await deliver(code, to: phoneNumber, factorId: factorId, challengeId: nil, userId: userId, sms: sms,
                          countsForTheNumber: true, context: context)
        try await change(userId, context, decide: decide)
        return factorId
    }

    /// A TOTP secret a client chose (Parse's `authData.mfa.secret`): base32 of at least 20 bytes, each refusal told apart.
    public static func checkClientSecret(_ secret: String) throws(AccountError) {
        guard let bytes = try? Base32.decode(secret) else {
            throw AccountError.invalidRequest(
                "A TOTP secret is base32 (RFC 4648: upper-case A-Z and 2-7, a length base32 can have, padding optional).")
        }
        guard bytes.count >= 20 else { throw AccountError.invalidRequest("A TOTP secret is at least 20 bytes (32 base32 characters).") }
    }

    /// Enrols and confirms a TOTP factor whose secret the client chose, with its first code, in one
    /// command (Parse's `{"mfa": {"secret", "token"}}`): a wrong code writes nothing.
    public func enrolConfirmedTOTP(
        userId: UUID, authTime: Date, secret: String, code: String, context: CommandContext
    ) async throws -> ConfirmedFactor {
        try Self.checkClientSecret(secret)
        let factorId = AccountEventCodec.eventID(command: context.commandId, index: 30_000)
        let recoveryCodes = (0..<10).map { _ in Self.newRecoveryCode() }
        let recoveryHashes = try await hashes(of: recoveryCodes)
        let account = try await committingOutcome(userId, context) { account in
            let enrolment = try account.enrolTOTP(factorId: factorId, secret: secret, displayName: nil, authTime: authTime, now: context.now)
            let enrolled = account.appending(enrolment.map { ($0, context.now) }, version: account.version)
            guard let factor = enrolled.mfa.factors[factorId] else { throw AccountError.mfaFactorNotFound }
            let outcome = try enrolled.confirmFactor(
                factorId, type: .totp, check: try Self.check(code, factor: factor, challengeId: nil, now: context.now),
                recoveryCodeHashes: recoveryHashes, now: context.now)
            // A wrong first code leaves no half-enrolled factor behind.
            var combined = outcome
            combined.events = outcome.failure == nil ? enrolment + outcome.events : []
            return combined
        }
        guard let factor = account.mfa.factors[factorId] else { throw AccountError.mfaFactorNotFound }
        let issued = account.mfa.recoveryCodes[recoveryHashes[0]] != nil
        return ConfirmedFactor(factor: factor, recoveryCodes: issued ? recoveryCodes : nil, account: account)
    }

    /// Confirms an enrolment with its first code; `displayName` names the factor when the client names it
    /// only now (Firebase's `mfaEnrollment:finalize`).
    ///
    /// - Parameter followUp: what else the command decides once the code is accepted (the new session Firebase
    ///   answers with), written in the same transaction; a wrong code records its attempt and nothing more.
    @discardableResult
    public func confirmFactor(
        userId: UUID, factorId: UUID, type: MFAFactorType, code: String, displayName: String? = nil, context: CommandContext,
        followUp: FollowUp? = nil
    ) async throws -> ConfirmedFactor {
        let recoveryCodes = (0..<10).map { _ in Self.newRecoveryCode() }
        let recoveryHashes = try await hashes(of: recoveryCodes)
        let account = try await committingOutcome(userId, context) { account in
            guard let factor = account.mfa.factors[factorId], factor.type == type, !factor.isConfirmed else {
                throw AccountError.mfaFactorNotFound
            }
            var outcome = try account.confirmFactor(
                factorId, type: type, check: try Self.check(code, factor: factor, challengeId: nil, now: context.now),
                recoveryCodeHashes: recoveryHashes, displayName: displayName, now: context.now)
            if outcome.failure == nil, let followUp {
                outcome.events = try account.deciding(outcome.events, at: context.now, then: followUp)
            }
            return outcome
        }
        guard let factor = account.mfa.factors[factorId] else { throw AccountError.mfaFactorNotFound }
        // These codes were issued if the user now holds them (only a first factor gets codes).
        let issued = account.mfa.recoveryCodes[recoveryHashes[0]] != nil
        return ConfirmedFactor(factor: factor, recoveryCodes: issued ? recoveryCodes : nil, account: account)
    }

    /// Removes several factors in one command (``UserAccount/removeFactors(_:authTime:byAdmin:now:)``); answers the
    /// user after it.
    ///
    /// - Parameter followUp: what else the command decides after the removal (the new session Firebase answers
    ///   with), written in the same transaction.
    @discardableResult
    public func removeFactors(
        userId: UUID, factorIds: [UUID], authTime: Date?, byAdmin: Bool = false, context: CommandContext, followUp: FollowUp? = nil
    ) async throws -> UserAccount {
        try await change(userId, context) { account in
            let removed = try account.removeFactors(factorIds, authTime: authTime, byAdmin: byAdmin, now: context.now)
            guard let followUp else { return removed }
            return try account.deciding(removed, at: context.now, then: followUp)
        }
    }

    /// Replaces the recovery codes; the new ones are returned once.
    public func regenerateRecoveryCodes(userId: UUID, authTime: Date, context: CommandContext) async throws -> [String] {
        let codes = (0..<10).map { _ in Self.newRecoveryCode() }
        let hashes = try await hashes(of: codes)
        try await change(userId, context) {
            try $0.regenerateRecoveryCodes(hashes, authTime: authTime, now: context.now)
        }
        return codes
    }

    /// Sends the SMS code of a challenge to a phone factor.
    public func sendChallengeCode(
        userId: UUID, challengeId: UUID, factorId: UUID, presentedJKT: String?, sms: (any SMSSender)?, context: CommandContext
    ) async throws -> MFAState.Factor {
        let code = Self.newSMSCode()
        let codeHash = Self.codeHash(code, for: challengeId)
        let decide: @Sendable (UserAccount) throws -> [AccountEvent] = {
            try $0.sendChallengeCode(
                challenge: challengeId, factor: factorId, codeHash: codeHash, presentedJKT: presentedJKT, now: context.now)
        }
        let account = try await read(userId)
        _ = try decide(account)
        guard let factor = account.mfa.factors[factorId], let phoneNumber = factor.phoneNumber else { throw AccountError.mfaFactorNotFound }
        // Checked after the factor: a TOTP factor named here is the client's mistake, not a missing sender.
        guard let sms else { throw Self.noSMSSender }
        try await deliver(code, to: phoneNumber, factorId: factorId, challengeId: challengeId, userId: userId, sms: sms,
                          countsForTheNumber: false, context: context)
        try await change(userId, context, decide: decide)
        return factor
    }

    /// Completes a challenge with a factor's code or a recovery code, opening `session`.
    public func verifyChallenge(
        userId: UUID, challengeId: UUID, factorId: UUID?, code: String?, recoveryCode: String?, session: NewSession,
        context: CommandContext
    ) async throws -> (session: UserAccount.Session, account: UserAccount) {
        let presentedRecovery: [String]? = if let recoveryCode { try await recoveryHasher.candidates(recoveryCode, on: database) } else { nil }
        let account = try await committingOutcome(userId, context) { account in
            let check: MFACodeCheck
            if let presentedRecovery {
                check = .recoveryCode(codeHashes: presentedRecovery)
            } else if let factorId, let code {
                guard let factor = account.mfa.factors[factorId], factor.isConfirmed else { throw AccountError.mfaFactorNotFound }
                check = try Self.check(code, factor: factor, challengeId: challengeId, now: context.now)
            } else {
                throw AccountError.invalidRequest("Send factorId and code, or recoveryCode.")
            }
            return try account.verifyChallenge(challengeId, factor: recoveryCode == nil ? factorId : nil, check: check,
                                               session: session, now: context.now)
        }
        guard let started = account.sessions[session.id] else { throw AccountError.invalidToken }
        return (started, account)
    }

    // MARK: Mechanics

    /// Decides, commits the outcome's events, then throws its failure (a wrong code is recorded, then refused).
    private func committingOutcome(
        _ userId: UUID, _ context: CommandContext, decide: @escaping @Sendable (UserAccount) throws -> MFAOutcome
    ) async throws -> UserAccount {
        let result = try await execute(userId, context) { account in
            let outcome = try decide(account)
            return (outcome.events, outcome.failure)
        }
        if let failure = result.result { throw failure }
        return result.account
    }

    /// Hands a code to the SMS sender; a failure is recorded and answered 503 `sms_unavailable`.
    private func deliver(
        _ code: String, to phoneNumber: String, factorId: UUID, challengeId: UUID?, userId: UUID, sms: any SMSSender,
        countsForTheNumber: Bool, context: CommandContext
    ) async throws {
        try await checkAllowance(of: phoneNumber, userId: userId, countsForTheNumber: countsForTheNumber, now: context.now)
        do {
            try await sms.send(SMSMessage(phoneNumber: phoneNumber, body: "Your Tether code is \(code). It expires in 5 minutes.", code: code))
        } catch {
            var failed = context
            failed.commandId = AccountEventCodec.eventID(command: context.commandId, index: 40_000)
            _ = try? await change(userId, failed) { _ in
                // The problem code only: an error's text may carry the webhook's URL and whatever secret is in it.
                [.mfaCodeDeliveryFailed(.init(challengeId: challengeId, factorId: factorId,
                                              reason: (error as? any ProblemConvertible)?.problem.code ?? "send_failed"))]
            }
            if let convertible = error as? any ProblemConvertible, convertible.problem.code == "sms_unavailable" {
                throw error
            }
            throw Self.smsUnavailable
        }
    }

    /// Codes sent to one user, whatever the number, and enrolment codes sent to one number, whoever
    /// asked, are limited (`UserAccount.smsPerUser` per `smsWindow`). Sign-in codes to a confirmed
    /// factor do not count for the number: otherwise a stranger enrolling someone's number could use
    /// up their sign-in codes.
    private func checkAllowance(of phoneNumber: String, userId: UUID, countsForTheNumber: Bool, now: Date) async throws {
        try await reserveSend(
            .sms, to: countsForTheNumber ? [phoneNumber] : [], userId: userId, perAddress: UserAccount.smsPerUser, perUser: UserAccount.smsPerUser,
            window: UserAccount.smsWindow, now: now, refusal: "Too many SMS codes; wait before asking for another.")
    }

    /// 503 `sms_unavailable` of a server with no SMS sender configured.
    static var noSMSSender: Problem {
        WebhookDeliveryError.Channel.sms.unavailable("This server has no SMS sender.")
    }

    /// 503 `sms_unavailable`: the code could not be sent; nothing about the factor or challenge changed.
    static var smsUnavailable: Problem {
        WebhookDeliveryError.Channel.sms.unavailable("The SMS code could not be sent; nothing changed, so retry shortly.")
    }

    private static func check(_ code: String, factor: MFAState.Factor, challengeId: UUID?, now: Date) throws -> MFACodeCheck {
        let digits = code.trimmingCharacters(in: .whitespaces)
        guard (6...8).contains(digits.count), digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else {
            throw AccountError.invalidRequest("code must be the 6 digits the authenticator app or SMS shows.")
        }
        switch factor.type {
        case .totp:
            guard let secret = factor.totpSecret else { throw AccountError.mfaFactorNotFound }
            let totp = try TOTP(secret: try Base32.decode(secret))
            return .totp(matchingStep: totp.matchingStep(for: digits, at: now, window: 1).map { Int64($0) })
        case .phone:
            return .sms(codeHash: codeHash(digits, for: challengeId ?? factor.id))
        }
    }

    /// Six random digits.
    static func newSMSCode() -> String {
        let value = SecureRandom.bytes(count: 4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % 1_000_000
        return String(format: "%06u", value)
    }

    /// SHA-256 of a code bound to what it was sent for, so a code of one challenge means nothing for another.
    static func codeHash(_ code: String, for scope: UUID) -> String {
        DigestAlgorithm.sha256.hash(Array("\(scope.lowercasedText):\(code)".utf8)).hexString
    }

    /// `xxxxx-xxxxx`: ten base32 characters (50 random bits), easy to read out and type.
    static func newRecoveryCode() -> String {
        let text = Base32.encode(SecureRandom.bytes(count: 7)).prefix(10).lowercased()
        return String(text.prefix(5)) + "-" + String(text.suffix(5))
    }

    /// The stored forms of new recovery codes (keyed: ``RecoveryCodeHasher``).
    private func hashes(of codes: [String]) async throws -> [String] {
        var hashes: [String] = []
        for code in codes { hashes.append(try await recoveryHasher.hash(code, on: database)) }
        return hashes
    }
}
