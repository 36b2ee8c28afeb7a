import Foundation

/// A user's second factors, recovery codes and open challenges, as their events describe them.
public struct MFAState: Sendable, Hashable, Codable {
    /// A second factor (confirmed or still being enrolled).
    public struct Factor: Sendable, Hashable, Codable {
        public var id: UUID
        public var type: MFAFactorType
        public var displayName: String?
        public var phoneNumber: String?
        public var totpSecret: String?
        public var enrolledAt: Date
        public var confirmedAt: Date?
        /// The last TOTP step accepted: a code of that step or earlier is refused.
        public var lastUsedStep: Int64?
        /// The SMS code that confirms a phone factor being enrolled.
        public var codeHash: String?
        public var codeExpiresAt: Date?
        /// Wrong codes while confirming the enrolment.
        public var failedAttempts = 0

        public var isConfirmed: Bool { confirmedAt != nil }
    }

    /// A second-factor challenge opened by a first-factor sign-in.
    public struct Challenge: Sendable, Hashable, Codable {
        public var id: UUID
        public var firstFactor: String
        public var amr: [String]
        public var expiresAt: Date
        /// The DPoP key of the first step, when it had one.
        public var jkt: String?
        /// The developer claims of the custom token that began it: the session it opens carries them.
        public var developerClaims: String?
        public var attempts = 0
        public var isEnded = false
        /// The SMS code last sent for this challenge, its factor and expiry.
        public var codeHash: String?
        public var codeFactorId: UUID?
        public var codeExpiresAt: Date?
    }

    public internal(set) var factors: [UUID: Factor] = [:]
    /// Recovery code hashes, and whether each was used.
    public internal(set) var recoveryCodes: [String: Bool] = [:]
    public internal(set) var challenges: [UUID: Challenge] = [:]
    /// When wrong second-factor codes were entered (for backing off), over the last ``UserAccount/codeFailureMemory``.
    public internal(set) var failures: [Date] = []
    /// When SMS codes were sent (for the per-user send limit), over the last ``UserAccount/smsWindow``.
    public internal(set) var smsSends: [Date] = []

    /// Every factor's id, confirmed or not, in one order every run (removing them all writes the same events).
    public var factorIds: [UUID] {
        factors.keys.sorted { $0.sortsBefore($1) }
    }

    /// Confirmed factors, oldest first.
    public var confirmedFactors: [Factor] {
        factors.values.filter(\.isConfirmed).sorted { $0.enrolledAt != $1.enrolledAt ? $0.enrolledAt < $1.enrolledAt : $0.id.sortsBefore($1.id) }
    }

    /// Whether every first-factor sign-in needs a second factor.
    public var isRequired: Bool { factors.values.contains(where: \.isConfirmed) }

    /// Recovery codes not used yet.
    public var unusedRecoveryCodeCount: Int { recoveryCodes.values.filter { !$0 }.count }

    mutating func apply(_ event: AccountEvent, at date: Date) {
        switch event {
        case .mfaFactorEnrolled(let payload):
            factors[payload.factorId] = Factor(
                id: payload.factorId, type: payload.type, displayName: payload.personal.displayName,
                phoneNumber: payload.personal.phoneNumber, totpSecret: payload.personal.totpSecret, enrolledAt: date)
        case .mfaFactorConfirmed(let payload):
            factors[payload.factorId]?.confirmedAt = date
            factors[payload.factorId]?.codeHash = nil
            if let name = payload.personal?.displayName { factors[payload.factorId]?.displayName = name }
            if let step = payload.totpStep { factors[payload.factorId]?.lastUsedStep = step }
        case .mfaFactorRemoved(let payload):
            factors[payload.factorId] = nil
        case .mfaRecoveryCodesIssued(let payload):
            recoveryCodes = Dictionary(uniqueKeysWithValues: payload.codeHashes.map { ($0, false) })
        case .mfaChallengeIssued(let payload):
            // Challenges long expired decide nothing: forgotten, so that a user who signs in often does not grow the state.
            let forgotten = date.addingTimeInterval(-UserAccount.challengeMemory)
            if challenges.values.contains(where: { $0.expiresAt < forgotten }) {
                challenges = challenges.filter { $0.value.expiresAt >= forgotten }
            }
            challenges[payload.challengeId] = Challenge(
                id: payload.challengeId, firstFactor: payload.firstFactor, amr: payload.amr, expiresAt: payload.expiresAt,
                jkt: payload.jkt, developerClaims: payload.personal?.customClaims)
        case .mfaCodeSent(let payload):
            smsSends.append(date)
            smsSends.removeAll { date.timeIntervalSince($0) >= UserAccount.smsWindow }
            if let challengeId = payload.challengeId {
                challenges[challengeId]?.codeHash = payload.codeHash
                challenges[challengeId]?.codeFactorId = payload.factorId
                challenges[challengeId]?.codeExpiresAt = payload.expiresAt
            } else {
                factors[payload.factorId]?.codeHash = payload.codeHash
                factors[payload.factorId]?.codeExpiresAt = payload.expiresAt
            }
        case .mfaCodeDeliveryFailed:
            break
        case .mfaCodeAccepted(let payload):
            if let step = payload.totpStep, let factorId = payload.factorId { factors[factorId]?.lastUsedStep = step }
            challenges[payload.challengeId]?.codeHash = nil
        case .mfaCodeRejected(let payload):
            if let challengeId = payload.challengeId {
                // Only a sign-in's wrong codes make the user wait: an enrolment's (its own 5 attempts) lock nothing.
                failures.append(date)
                failures.removeAll { date.timeIntervalSince($0) >= UserAccount.codeFailureMemory }
                challenges[challengeId]?.attempts = payload.attempt
            } else if let factorId = payload.factorId {
                factors[factorId]?.failedAttempts = payload.attempt
            }
        case .mfaRecoveryCodeUsed(let payload):
            recoveryCodes[payload.codeHash] = true
        case .mfaChallengeEnded(let payload):
            challenges[payload.challengeId]?.isEnded = true
        default:
            break
        }
    }
}

/// What the service found when it checked a presented code; the decision is the domain's.
public enum MFACodeCheck: Sendable, Hashable {
    /// A TOTP code: the time step it matches within the allowed window, or nil when it matches none.
    case totp(matchingStep: Int64?)
    /// An SMS code, as the hash the stored one is compared with.
    case sms(codeHash: String)
    /// A recovery code, as its hash.
    /// A recovery code, as its hashes: the keyed one, then the unkeyed one of codes issued before keys.
    case recoveryCode(codeHashes: [String])
}

/// The events of a code check, and whether it let the user in.
public struct MFAOutcome: Sendable, Hashable {
    /// To be committed whether or not the code was accepted: wrong codes are recorded too.
    public var events: [AccountEvent]
    /// The error to answer with after committing `events`; nil when the code was accepted.
    public var failure: AccountError?
    /// Whether a first set of recovery codes was issued (shown to the user once).
    public var issuedRecoveryCodes = false
}

extension UserAccount {
    /// How recent a sign-in must be to add or remove factors or recovery codes, a password or a provider.
    public static let recentSignInWindow: TimeInterval = 5 * 60

    /// Refuses a change a stolen token must not make (`recent_login_required`) unless the caller signed in
    /// (not merely refreshed) within ``recentSignInWindow``.
    public static func requireRecentSignIn(authTime: Date, now: Date) throws(AccountError) {
        guard now.timeIntervalSince(authTime) <= recentSignInWindow else { throw .recentLoginRequired }
    }
    /// How long an `mfaPendingCredential` (its challenge) lasts.
    public static let challengeLifetime: TimeInterval = 5 * 60
    /// How long an SMS code lasts.
    public static let smsCodeLifetime: TimeInterval = 5 * 60
    /// Wrong codes that end a challenge (or a phone enrolment).
    public static let maxCodeAttempts = 5
    /// SMS codes a user may be sent in `smsWindow`.
    public static let smsPerUser = 5
    public static let smsWindow: TimeInterval = 15 * 60
    /// Second factors a user may hold, enrolments not yet confirmed included.
    public static let maxFactors = 10

    /// Room for one more enrolment: refused when the user holds ``maxFactors`` confirmed factors; otherwise
    /// the oldest enrolments never confirmed give way (`MFAFactorRemoved`, reason `superseded`), so that
    /// abandoned ones, which no route lists, cannot block enrolling for good.
    private func makingRoomForAFactor() throws(AccountError) -> [AccountEvent] {
        guard mfa.confirmedFactors.count < Self.maxFactors else {
            throw .secondFactorLimit
        }
        let pending = mfa.factors.values.filter { !$0.isConfirmed }
            .sorted { $0.enrolledAt != $1.enrolledAt ? $0.enrolledAt < $1.enrolledAt : $0.id.sortsBefore($1.id) }
        return pending.prefix(max(0, mfa.factors.count - Self.maxFactors + 1))
            .map { .mfaFactorRemoved(.init(factorId: $0.id, reason: "superseded", pending: true)) }
    }

    /// A factor's display name as a client sent it: trimmed, nil when empty, refused when longer than a
    /// user's display name may be.
    public static func factorDisplayName(_ name: String?) throws(AccountError) -> String? {
        guard let name else { return nil }
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        try checkProfile(displayName: trimmed, photoURL: nil)
        return trimmed.isEmpty ? nil : trimmed
    }

    /// A TOTP factor, confirmed later by its first valid code.
    public func enrolTOTP(
        factorId: UUID, secret: String, displayName: String?, authTime: Date, now: Date
    ) throws(AccountError) -> [AccountEvent] {
        try checkNewFactor(authTime: authTime, now: now)
        // A client may choose the secret (Parse's adapter): the same one twice would be two factors each taking
        // the same code once, so one code would pass several times.
        guard !hasConfirmedFactor(secret: secret) else { throw .totpSecretInUse }
        return try makingRoomForAFactor() + [.mfaFactorEnrolled(.init(
            factorId: factorId, type: .totp, personal: PersonalData(displayName: displayName, totpSecret: secret)))]
    }

    /// Whether a confirmed factor holds `secret` (however its case, padding or spaces are written).
    private func hasConfirmedFactor(secret: String) -> Bool {
        let key = Self.secretKey(secret)
        return mfa.confirmedFactors.contains { $0.totpSecret.map(Self.secretKey) == key }
    }

    /// A base32 secret as its bytes are meant, whatever its case, padding or spaces.
    static func secretKey(_ secret: String) -> String {
        String(secret.uppercased().filter { $0 != "=" && $0 != " " })
    }

    /// A phone factor, confirmed later by the SMS code sent now (`codeHash`).
    public func enrolPhone(
        factorId: UUID, phoneNumber: String, displayName: String?, codeHash: String, authTime: Date, now: Date
    ) throws(AccountError) -> [AccountEvent] {
        try checkNewFactor(authTime: authTime, now: now)
        let room = try makingRoomForAFactor()
        guard !mfa.confirmedFactors.contains(where: { $0.phoneNumber == phoneNumber }) else {
            throw .invalidRequest("This phone number is already a second factor of the user.")
        }
        try checkSMSAllowance(now: now)
        return room + [
            .mfaFactorEnrolled(.init(
                factorId: factorId, type: .phone, personal: PersonalData(displayName: displayName, phoneNumber: phoneNumber))),
            .mfaCodeSent(.init(challengeId: nil, factorId: factorId, codeHash: codeHash,
                               expiresAt: now.addingTimeInterval(Self.smsCodeLifetime))),
        ]
    }

    /// Confirms an enrolment with its first code; the user's first factor also gets recovery codes.
    ///
    /// - Parameter displayName: the factor's name when the client gives it now rather than at enrolment
    ///   (checked with ``factorDisplayName(_:)``).
    public func confirmFactor(
        _ factorId: UUID, type: MFAFactorType, check: MFACodeCheck, recoveryCodeHashes: [String], displayName: String? = nil, now: Date
    ) throws(AccountError) -> MFAOutcome {
        guard exists, !isDisabled else { throw isDisabled ? .userDisabled : .notFound }
        guard let factor = mfa.factors[factorId], factor.type == type, !factor.isConfirmed else { throw .mfaFactorNotFound }
        // One enrolled before anonymous users were refused a factor is not confirmed either; nor one begun before
        // factors needed a proved address, or whose address an admin has marked unproved since.
        guard !isAnonymous else { throw .anonymousSecondFactor }
        try checkProvedEmailForSecondFactor()
        // Two enrolments of one number or one secret begun side by side (a secret the client chose on one surface,
        // the server's on another): the second to be confirmed would be the same factor twice, and one code
        // would pass twice.
        if let number = factor.phoneNumber, mfa.confirmedFactors.contains(where: { $0.phoneNumber == number }) {
            throw .invalidRequest("This phone number is already a second factor of the user.")
        }
        if let secret = factor.totpSecret, hasConfirmedFactor(secret: secret) { throw .totpSecretInUse }
        var step: Int64?
        var rejection: String?
        switch check {
        case .totp(let matchingStep):
            step = matchingStep
            if matchingStep == nil { rejection = "wrong_code" }
        case .sms(let codeHash):
            if let expected = factor.codeHash, let expiry = factor.codeExpiresAt {
                if !ConstantTimeText.isEqual(expected, codeHash) { rejection = "wrong_code" }
                else if now > expiry { rejection = "expired_code" }
            } else {
                rejection = "no_code_sent"
            }
        case .recoveryCode:
            throw .invalidRequest("A factor is confirmed with its own code.")
        }
        if let rejection {
            let attempt = factor.failedAttempts + 1
            var events: [AccountEvent] = [.mfaCodeRejected(.init(
                challengeId: nil, factorId: factorId, method: type == .totp ? .totp : .sms, attempt: attempt, reason: rejection))]
            if attempt >= Self.maxCodeAttempts {
                events.append(.mfaFactorRemoved(.init(factorId: factorId, reason: "too_many_attempts", pending: true)))
                return MFAOutcome(events: events, failure: .invalidCode("Too many wrong codes: enrol the factor again."))
            }
            return MFAOutcome(events: events, failure: .invalidCode(Self.describe(rejection, remaining: Self.maxCodeAttempts - attempt, ending: "enrolment")))
        }
        var events: [AccountEvent] = [.mfaFactorConfirmed(.init(factorId: factorId, totpStep: step, displayName: displayName))]
        let isFirstFactor = !mfa.isRequired
        if isFirstFactor {
            events.append(.mfaRecoveryCodesIssued(.init(codeHashes: recoveryCodeHashes)))
        }
        return MFAOutcome(events: events, failure: nil, issuedRecoveryCodes: isFirstFactor)
    }

    /// Removes a factor (the user, with a recent sign-in, or an admin).
    public func removeFactor(_ factorId: UUID, authTime: Date?, byAdmin: Bool = false, now: Date) throws(AccountError) -> [AccountEvent] {
        try removeFactors([factorId], authTime: authTime, byAdmin: byAdmin, now: now)
    }

    /// Removes several factors in one command: all of them or, when one cannot go, none.
    public func removeFactors(_ factorIds: [UUID], authTime: Date?, byAdmin: Bool = false, now: Date) throws(AccountError) -> [AccountEvent] {
        if !byAdmin {
            try checkFactorChange(authTime: authTime ?? .distantPast, now: now)
        }
        guard factorIds.allSatisfy({ mfa.factors[$0] != nil }) else { throw .mfaFactorNotFound }
        let removed: [AccountEvent] = factorIds.map {
            .mfaFactorRemoved(.init(factorId: $0, reason: byAdmin ? "admin" : "user", pending: Self.pending(mfa.factors[$0])))
        }
        // Without a confirmed factor left, a sign-in still waiting at a challenge has nothing to answer it with
        // but a recovery code of factors that are gone: it ends, and the person signs in again without one.
        let remaining = mfa.confirmedFactors.contains { !factorIds.contains($0.id) }
        return removed + (remaining ? [] : endingOpenChallenges(reason: "factors_removed"))
    }

    /// `pending` of a factor's `MFAFactorRemoved`: true for one never confirmed, nil (left out) otherwise.
    static func pending(_ factor: MFAState.Factor?) -> Bool? {
        factor?.isConfirmed == false ? true : nil
    }

    /// A new set of recovery codes, replacing the old one (recent sign-in required).
    public func regenerateRecoveryCodes(_ codeHashes: [String], authTime: Date, now: Date) throws(AccountError) -> [AccountEvent] {
        try checkFactorChange(authTime: authTime, now: now)
        guard mfa.isRequired else { throw .invalidRequest("Recovery codes need a confirmed second factor first.") }
        return [.mfaRecoveryCodesIssued(.init(codeHashes: codeHashes))]
    }

    /// Sends an SMS code for a challenge (phone factors only).
    public func sendChallengeCode(
        challenge challengeId: UUID, factor factorId: UUID, codeHash: String, presentedJKT: String? = nil, now: Date
    ) throws(AccountError) -> [AccountEvent] {
        let challenge = try liveChallenge(challengeId, now: now)
        // Without the first step's device key, a stolen pending credential cannot even replace the code.
        if let bound = challenge.jkt, bound != presentedJKT { throw .invalidDPoPProof }
        guard let factor = mfa.factors[factorId], factor.isConfirmed else { throw .mfaFactorNotFound }
        guard factor.type == .phone else { throw .invalidRequest("Only phone factors are sent a code; use the authenticator app's code.") }
        try checkSMSAllowance(now: now)
        return [.mfaCodeSent(.init(challengeId: challengeId, factorId: factorId, codeHash: codeHash,
                                   expiresAt: now.addingTimeInterval(Self.smsCodeLifetime)))]
    }

    /// Completes (or fails) a challenge with a second-factor code or a recovery code.
    ///
    /// On success the challenge ends and `session` starts, with `amr` naming both factors.
    public func verifyChallenge(
        _ challengeId: UUID, factor factorId: UUID?, check: MFACodeCheck, session: NewSession, now: Date
    ) throws(AccountError) -> MFAOutcome {
        let challenge = try liveChallenge(challengeId, now: now)
        // A sign-in begun on a device-bound key is finished by that key, or not at all (a stolen
        // pending credential is useless without the key); this costs no attempt.
        if let bound = challenge.jkt, bound != session.jkt { throw .invalidDPoPProof }
        try checkBackoff(now: now)
        var method: MFAMethod
        var step: Int64?
        var rejection: String?
        var usedRecoveryCode: String?
        switch check {
        case .totp(let matchingStep):
            guard let factorId, let factor = mfa.factors[factorId], factor.isConfirmed, factor.type == .totp else {
                throw .mfaFactorNotFound
            }
            method = .totp
            if let matchingStep {
                if let last = factor.lastUsedStep, matchingStep <= last { rejection = "reused_code" } else { step = matchingStep }
            } else {
                rejection = "wrong_code"
            }
        case .sms(let codeHash):
            guard let factorId, let factor = mfa.factors[factorId], factor.isConfirmed, factor.type == .phone else {
                throw .mfaFactorNotFound
            }
            method = .sms
            if let expected = challenge.codeHash, challenge.codeFactorId == factorId, let expiry = challenge.codeExpiresAt {
                if !ConstantTimeText.isEqual(expected, codeHash) { rejection = "wrong_code" }
                else if now > expiry { rejection = "expired_code" }
            } else {
                rejection = "no_code_sent"
            }
        case .recoveryCode(let codeHashes):
            method = .recoveryCode
            if let match = mfa.recoveryCodes.first(where: { stored in codeHashes.contains { ConstantTimeText.isEqual(stored.key, $0) } }),
               !match.value {
                usedRecoveryCode = match.key
            } else {
                rejection = "wrong_code"
            }
        }
        if let rejection {
            let attempt = challenge.attempts + 1
            var events: [AccountEvent] = [.mfaCodeRejected(.init(
                challengeId: challengeId, factorId: factorId, method: method, attempt: attempt, reason: rejection))]
            if attempt >= Self.maxCodeAttempts {
                events.append(.mfaChallengeEnded(.init(challengeId: challengeId, reason: "too_many_attempts")))
                return MFAOutcome(events: events, failure: .invalidCode("Too many wrong codes: sign in again."))
            }
            return MFAOutcome(events: events, failure: .invalidCode(Self.describe(rejection, remaining: Self.maxCodeAttempts - attempt, ending: "challenge")))
        }
        var events: [AccountEvent] = [.mfaCodeAccepted(.init(
            challengeId: challengeId, factorId: factorId, method: method, totpStep: step, sessionId: session.id))]
        if let usedRecoveryCode {
            events.append(.mfaRecoveryCodeUsed(.init(challengeId: challengeId, codeHash: usedRecoveryCode)))
        }
        events.append(.mfaChallengeEnded(.init(challengeId: challengeId, reason: "completed")))
        var completed = session
        completed.amr = challenge.amr + [method.amr, "mfa"]
        completed.secondFactorId = factorId
        completed.developerClaims = challenge.developerClaims
        events += starting(completed, provider: challenge.firstFactor, outcome: "mfa", now: now)
        return MFAOutcome(events: events, failure: nil)
    }

    /// The challenge, if it can still be completed.
    public func liveChallenge(_ challengeId: UUID, now: Date) throws(AccountError) -> MFAState.Challenge {
        guard exists else { throw .invalidMFAPendingCredential("The pending credential names no user.") }
        guard !isDisabled else { throw .userDisabled }
        guard let challenge = mfa.challenges[challengeId] else {
            throw .invalidMFAPendingCredential("The pending credential is not one this user was given.")
        }
        guard !challenge.isEnded else {
            throw .invalidMFAPendingCredential(
                "The sign-in of this pending credential has ended (finished, too many wrong codes, or a way in or a factor removed); sign in again.")
        }
        guard now <= challenge.expiresAt else { throw .invalidMFAPendingCredential("The pending credential expired; sign in again.") }
        // A sign-in begun with a way in the user has removed since (unlinked, replaced, dropped by a takeover)
        // does not finish: removing it is how a user shuts that way. Removing it also ends such sign-ins
        // (`unlinking`), which holds when the provider is linked again; this check covers older logs.
        guard identities[challenge.firstFactor] != nil else {
            throw .invalidMFAPendingCredential("The sign-in was begun with \(challenge.firstFactor), which the user no longer has; sign in again.")
        }
        return challenge
    }

    /// Wrong second-factor codes a user may enter in a day before the second factor locks until the day's
    /// oldest one ages out (an admin can remove the factor sooner). Without it, the short backoff below
    /// would still allow about a thousand guesses a day.
    public static let maxDailyCodeFailures = 30

    /// How long after its expiry a challenge is kept: until then its pending credential is refused as expired
    /// or used up, after it as unknown.
    public static let challengeMemory: TimeInterval = 3600

    /// The span over which wrong codes count (the state forgets older ones).
    public static let codeFailureMemory: TimeInterval = 24 * 3600

    /// Repeated wrong codes make the user wait: after five in a quarter hour, 5 s doubling per further failure,
    /// up to 5 minutes; after ``maxDailyCodeFailures`` in a day, until the oldest of them is a day old.
    private func checkBackoff(now: Date) throws(AccountError) {
        let day = mfa.failures.filter { now.timeIntervalSince($0) < Self.codeFailureMemory }
        if day.count >= Self.maxDailyCodeFailures, let oldest = day.first {
            let wait = oldest.addingTimeInterval(Self.codeFailureMemory).timeIntervalSince(now)
            throw .rateLimited(retryAfterSeconds: Int(wait.rounded(.up)), "Too many wrong codes today; try again later or ask support.")
        }
        let recent = mfa.failures.filter { now.timeIntervalSince($0) < 15 * 60 }
        guard recent.count >= Self.maxCodeAttempts, let last = recent.last else { return }
        let wait = min(300, 5 * pow(2, Double(recent.count - Self.maxCodeAttempts)))
        let remaining = last.addingTimeInterval(wait).timeIntervalSince(now)
        if remaining > 0 {
            throw .rateLimited(retryAfterSeconds: Int(remaining.rounded(.up)), "Too many wrong codes; wait before trying again.")
        }
    }

    private func checkSMSAllowance(now: Date) throws(AccountError) {
        let recent = mfa.smsSends.filter { now.timeIntervalSince($0) < Self.smsWindow }
        if recent.count >= Self.smsPerUser, let oldest = recent.first {
            let wait = oldest.addingTimeInterval(Self.smsWindow).timeIntervalSince(now)
            throw .rateLimited(retryAfterSeconds: Int(wait.rounded(.up)), "Too many SMS codes for this user; wait before asking for another.")
        }
    }

    private func checkFactorChange(authTime: Date, now: Date) throws(AccountError) {
        guard exists else { throw .notFound }
        guard !isDisabled else { throw .userDisabled }
        try Self.requireRecentSignIn(authTime: authTime, now: now)
    }

    /// ``checkFactorChange(authTime:now:)`` for a new factor, which an anonymous user cannot add: a second factor
    /// guards a first one they do not have (Firebase's `UNSUPPORTED_FIRST_FACTOR`).
    private func checkNewFactor(authTime: Date, now: Date) throws(AccountError) {
        try checkFactorChange(authTime: authTime, now: now)
        guard !isAnonymous else { throw .anonymousSecondFactor }
        try checkProvedEmailForSecondFactor()
    }

    /// A second factor guards a proved address, as Firebase's (whose surface also refuses an account with no
    /// address). An account with a second factor is never taken over (``takeOver(with:session:now:)``), so a
    /// factor on an address nobody proved would let whoever signed up with someone else's address lock its owner
    /// out: their provider's sign-in would be refused, and a reset by mail would stop at the squatter's factor.
    /// An account with no address has none to squat; once it has a factor, every address it takes is proved
    /// (``checkAddress(_:verified:)``).
    func checkProvedEmailForSecondFactor() throws(AccountError) {
        guard email == nil || isEmailVerified else { throw .unprovedEmailSecondFactor }
    }

    /// Whether the account may hold `email` as its address with `verified`: one with a confirmed second factor
    /// holds a proved address or none, whoever asks (a link that brings its first address, an admin's or a client's
    /// change of address, an admin marking it unproved). A pending enrolment, which no route lists, does not count:
    /// it is not confirmed on an unproved address (``confirmFactor(_:type:check:recoveryCodeHashes:displayName:now:)``).
    public func checkAddress(_ email: String?, verified: Bool) throws(AccountError) {
        guard email == nil || verified || !mfa.isRequired else { throw .unprovedEmailWithSecondFactor }
    }

    /// A refused code's words; `ending` is what the last try ends (the `challenge` of a sign-in, or the `enrolment`).
    private static func describe(_ rejection: String, remaining: Int, ending: String) -> String {
        let reason = switch rejection {
        case "expired_code": "The code expired"
        case "reused_code": "The code was already used"
        case "no_code_sent": "No code was sent for this factor"
        default: "The code is wrong"
        }
        return "\(reason); \(remaining) more \(remaining == 1 ? "try" : "tries") before the \(ending) ends."
    }
}

/// Compares secrets (hashes in hex) in time that does not depend on where they differ.
public enum ConstantTimeText {
    /// Whether `lhs` and `rhs` are equal; their lengths are not secret.
    public static func isEqual(_ lhs: String, _ rhs: String) -> Bool {
        let left = Array(lhs.utf8)
        let right = Array(rhs.utf8)
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices {
            difference |= left[index] ^ right[index]
        }
        return difference == 0
    }
}

/// Phone numbers of phone factors.
public enum PhoneNumber {
    /// Whether `text` is an E.164 number: `+`, then 8 to 15 digits, the first not 0.
    public static func isE164(_ text: String) -> Bool {
        let digits = text.utf8.dropFirst()
        return text.hasPrefix("+") && (8...15).contains(digits.count) && digits.first != UInt8(ascii: "0")
            && digits.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    /// The number with all but its last four digits masked, as Firebase shows it: `+*******0100`.
    public static func hint(_ number: String) -> String {
        let digits = number.filter(\.isNumber)
        guard digits.count > 4 else { return "+" + String(repeating: "*", count: digits.count) }
        return "+" + String(repeating: "*", count: digits.count - 4) + digits.suffix(4)
    }
}
