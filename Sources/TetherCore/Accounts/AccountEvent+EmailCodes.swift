import Foundation

/// What a code mailed to a person lets them do; each code has exactly one.
public enum EmailCodePurpose: String, Codable, Sendable, Hashable, CaseIterable {
    /// Set a new password (and prove the address).
    case passwordReset = "password_reset"
    /// Prove the account's current address.
    case verifyEmail = "verify_email"
    /// Move the account to the new address the code was mailed to.
    case changeEmail = "change_email"
    /// Put back the address an email change replaced (mailed to that old address).
    case undoEmailChange = "undo_email_change"
}

extension AccountEvent {
    /// A code was made for one purpose and one address of the user, and is on its way to that address.
    public struct EmailCodeIssued: Codable, Sendable, Hashable {
        public var codeId: UUID
        public var purpose: EmailCodePurpose
        public var expiresAt: Date
        /// For an undo code: whether the address it puts back was verified.
        public var restoresVerified: Bool?
        /// `email`: the address the code is bound to and mailed to; `codeHash`: the code's hash.
        /// Both sealed with the user's key: the address is personal, and the hash is the code's only trace.
        public var personal: PersonalData

        public init(codeId: UUID, purpose: EmailCodePurpose, email: String, codeHash: String, expiresAt: Date, restoresVerified: Bool? = nil) {
            self.codeId = codeId
            self.purpose = purpose
            self.expiresAt = expiresAt
            self.restoresVerified = restoresVerified
            self.personal = PersonalData(email: email, codeHash: codeHash)
        }
    }

    /// The code did what it was for; it cannot be used again.
    public struct EmailCodeUsed: Codable, Sendable, Hashable {
        public var codeId: UUID
        public var purpose: EmailCodePurpose
    }

    /// The code can no longer be used: presented after its expiry, or (`reason` `superseded`) withdrawn
    /// because a later use of another code made it stale (an undo withdraws every pending change and undo).
    public struct EmailCodeExpired: Codable, Sendable, Hashable {
        public var codeId: UUID
        public var purpose: EmailCodePurpose
        /// Nil: it expired; `superseded`: withdrawn.
        public var reason: String?

        public init(codeId: UUID, purpose: EmailCodePurpose, reason: String? = nil) {
            self.codeId = codeId
            self.purpose = purpose
            self.reason = reason
        }
    }

    /// A code of the user was presented and refused; nothing else changed.
    public struct EmailCodeRefused: Codable, Sendable, Hashable {
        /// The code presented (nil only in events of earlier builds, which recorded codes that matched none).
        public var codeId: UUID?
        /// What the code was presented for.
        public var presentedFor: EmailCodePurpose
        /// `used`, `expired`, `wrong_purpose`, `email_changed` (the account's address is no longer the one the
        /// code was sent to), `other_user` (a signed-in caller presented someone else's code).
        public var reason: String
        /// The signed-in user who presented someone else's code (`other_user`; absent in events of earlier builds).
        public var presentedBy: UUID?

        public init(codeId: UUID?, presentedFor: EmailCodePurpose, reason: String, presentedBy: UUID? = nil) {
            self.codeId = codeId
            self.presentedFor = presentedFor
            self.reason = reason
            self.presentedBy = presentedBy
        }

        /// What ``EmailCode/refusedFor`` keeps of it: the reason, and for someone else's code who presented it.
        var refusalKey: String { presentedBy.map { "\(reason):\($0.lowercasedText)" } ?? reason }
    }

    /// The mail carrying a code could not be handed to the mail webhook.
    public struct EmailCodeDeliveryFailed: Codable, Sendable, Hashable {
        public var codeId: UUID
        /// The delivery problem's code, never its text (which may name the webhook).
        public var reason: String

        public init(codeId: UUID, reason: String) {
            self.codeId = codeId
            self.reason = reason
        }
    }
}

/// A code mailed to the user, as their events describe it.
public struct EmailCode: Sendable, Hashable, Codable {
    public var id: UUID
    public var purpose: EmailCodePurpose
    /// The address it was mailed to and is bound to; nil once the user was erased.
    public var email: String?
    public var codeHash: String?
    public var issuedAt: Date
    public var expiresAt: Date
    public var restoresVerified: Bool
    /// Used, or found expired: it cannot do anything any more.
    public var isSpent = false
    public var isUsed = false
    /// The reasons it was refused for that are recorded already (`EmailCodeRefused`), each presenter of someone
    /// else's code apart: the same refusal again is answered, not recorded again, so a code kept by anyone cannot
    /// grow its user's log past a few events (and one more for each account a stolen code is tried from).
    public var refusedFor: Set<String> = []
}

extension UserAccount {
    /// How long codes last unless configured otherwise.
    public static let defaultPasswordResetCodeLifetime: TimeInterval = 60 * 60
    public static let defaultEmailVerificationCodeLifetime: TimeInterval = 3 * 24 * 60 * 60
    /// How long the old address may undo an email change.
    public static let emailChangeUndoLifetime: TimeInterval = 3 * 24 * 60 * 60

    /// A code for `purpose` bound to `email`. Refused for a user who cannot use it: a disabled one,
    /// one whose address is already verified (verification), one without an address (verification, reset).
    ///
    /// - Parameter allowingVerifiedAddress: whether a verification code may be issued for an address that is
    ///   verified already: an admin's link (Firebase's `generate_email_verification_link`) is handed out
    ///   whatever the address's state, and using it changes nothing then.
    public func issueEmailCode(
        _ purpose: EmailCodePurpose, codeId: UUID, codeHash: String, email: String, expiresAt: Date, restoresVerified: Bool? = nil,
        allowingVerifiedAddress: Bool = false
    ) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        guard !isDisabled else { throw .userDisabled }
        switch purpose {
        case .verifyEmail, .passwordReset:
            guard let current = self.email, ExternalIdentity.normalize(current) == ExternalIdentity.normalize(email) else {
                throw .invalidRequest("The account has no email address to send a code to.")
            }
            if purpose == .verifyEmail, isEmailVerified, !allowingVerifiedAddress { throw .emailAlreadyVerified }
        case .changeEmail:
            try checkEmailChange()
            if let current = self.email, ExternalIdentity.normalize(current) == ExternalIdentity.normalize(email) {
                throw .invalidRequest("That is already the account's email address.")
            }
        case .undoEmailChange:
            break
        }
        // Only the newest reset link works, as Parse keeps one reset token: an older mail that leaked cannot reset.
        // Only the newest change works too: the address the user corrected a typo to, never the mistyped one
        // (whose holder would otherwise take the account by confirming it).
        let superseded = purpose == .passwordReset || purpose == .changeEmail ? withdrawing([purpose]) : []
        return superseded + [.emailCodeIssued(.init(
            codeId: codeId, purpose: purpose, email: email, codeHash: codeHash, expiresAt: expiresAt, restoresVerified: restoresVerified))]
    }

    /// The user's unspent code whose hash is `codeHash`, and whether it can be used now for one of
    /// `purposes`: the events to record either way, and the refusal to answer with when it cannot.
    public func checkEmailCode(
        _ codeHash: String, for purposes: Set<EmailCodePurpose>, presentedFor: EmailCodePurpose, now: Date
    ) -> (code: EmailCode?, refusal: (events: [AccountEvent], error: AccountError)?) {
        func refuse(_ code: EmailCode, _ reason: String, _ error: AccountError) -> (EmailCode?, ([AccountEvent], AccountError)?) {
            (nil, (code.refusal(reason, presentedFor: presentedFor), error))
        }
        guard exists else { return (nil, ([], .invalidCode(AccountError.unknownEmailCodeDetail))) }
        // A code that matches none says nothing about this account's codes, and is not recorded: anyone who
        // knows a user's id could otherwise fill their history with made-up codes.
        guard let code = emailCodes.values.first(where: { $0.codeHash == codeHash }) else {
            return (nil, ([], .invalidCode(AccountError.unknownEmailCodeDetail)))
        }
        if code.isUsed { return refuse(code, "used", .invalidCode("This code was already used.")) }
        guard purposes.contains(code.purpose) else {
            return refuse(code, "wrong_purpose", .invalidCode("This code is not for this; use the link of the mail that brought it."))
        }
        if code.isSpent {
            // Spent before its time: it was withdrawn, and saying it expired would puzzle whoever has a mail minutes old.
            if now < code.expiresAt { return refuse(code, "withdrawn", AccountError.withdrawnCode) }
            return refuse(code, "expired", AccountError.expiredCode)
        }
        if now >= code.expiresAt { return (nil, ([.emailCodeExpired(.init(codeId: code.id, purpose: code.purpose))], .expiredCode)) }
        guard !isDisabled else { return (nil, ([], .userDisabled)) }
        // An email change asked for before every session was ended (a password reset, "sign out everywhere")
        // may be someone else's: whoever ended the sessions asks again if it was theirs.
        if code.purpose == .changeEmail, let validSince, code.issuedAt < validSince {
            return refuse(code, "sessions_revoked", .invalidCode("This email change was asked for before every session was ended; ask for it again."))
        }
        // A reset or verification proves the address the code went to: if the account moved since, it proves nothing.
        if code.purpose == .passwordReset || code.purpose == .verifyEmail {
            guard let current = email, let bound = code.email, ExternalIdentity.normalize(current) == ExternalIdentity.normalize(bound) else {
                return refuse(code, "email_changed", .invalidCode("The account's email address changed since this code was sent."))
            }
        }
        return (code, nil)
    }

    /// A change confirmed ends every session, and an anonymous user has no sign-in to come back with: it would keep an
    /// address it cannot use, and stay anonymous (for `tether sweep anonymous`). It adds one by an upgrade.
    public func checkEmailChange() throws(AccountError) {
        guard !isAnonymous else { throw .anonymousEmailChange }
    }

    /// A reset code sets `passwordHash`: the address is proved, so it is marked verified, and when it was
    /// not verified before, every credential that does not vouch for it goes (the takeover rule of a
    /// trusted provider, for the same reason: whoever set them may not own the address). Every session ends.
    public func resetPassword(with code: EmailCode, passwordHash: String, now: Date) throws(AccountError) -> [AccountEvent] {
        guard let email else { throw .invalidRequest("The account has no email address.") }
        var events: [AccountEvent] = [.emailCodeUsed(.init(codeId: code.id, purpose: code.purpose))]
        if !isEmailVerified {
            // Only an identity that proved this very address vouches for it; second factors enrolled before
            // the address was proved may be a squatter's, and go too.
            events += unlinking(
                identitiesNotVouchingFor: ExternalIdentity.normalize(email),
                keeping: ["password", ExternalIdentity.anonymousProvider, UserAccount.customProvider],
                reason: "password_reset")
            for factor in mfa.factors.values.sorted(by: { $0.id.sortsBefore($1.id) }) {
                events.append(.mfaFactorRemoved(.init(factorId: factor.id, reason: "password_reset", pending: Self.pending(factor))))
            }
            events.append(.emailVerified(.init(provider: "email", personal: PersonalData(email: email))))
        }
        if identities["password"] == nil {
            events.append(.identityLinked(.init(
                provider: "password", uid: ExternalIdentity.normalize(email), emailVerified: true, personal: PersonalData(email: email))))
        }
        events += upgradingFromAnonymous
        events += settingPassword(passwordHash, except: code.id)
        return events + revoking(now: now, reason: "revoked", after: events)
    }

    /// A verification, email-change or undo code does what it was made for. A change ends every session, on
    /// every surface, as Firebase's `validSince` moves with a confirmed `verifyBeforeUpdateEmail`: whoever held
    /// a session of the account under its old address signs in again under the new one.
    public func confirmEmail(with code: EmailCode, now: Date) throws(AccountError) -> [AccountEvent] {
        let used = AccountEvent.emailCodeUsed(.init(codeId: code.id, purpose: code.purpose))
        guard let bound = code.email else { throw .invalidCode(AccountError.unknownEmailCodeDetail) }
        switch code.purpose {
        case .verifyEmail:
            return [used] + (isEmailVerified ? [] : [.emailVerified(.init(provider: "email", personal: PersonalData(email: bound)))])
        case .changeEmail:
            try checkEmailChange()
            // Other pending changes would move the account again: they are withdrawn.
            let changed = [used] + withdrawing([.changeEmail], except: code.id) + (try changeEmail(to: bound, verified: true))
            return changed + revoking(now: now, reason: "revoked", after: changed)
        case .undoEmailChange:
            // Someone else may have moved the account away: it goes back, everyone is signed out, and every other
            // pending change or undo (one mailed to an address the intruder holds, say) is withdrawn. What was
            // added since the change goes too (``takingBack(since:)``): the intruder's ways in and factors.
            // What goes is decided first, and the address moves back on the state after it: a password taken back is
            // not moved to the old address first.
            let back = takingBack(since: askedForChange(undoneBy: code))
            let undone = [used] + withdrawing([.changeEmail, .undoEmailChange], except: code.id) + back
                + (try appending(back.map { ($0, now) }, version: version).changeEmail(to: bound, verified: code.restoresVerified))
            return undone + revoking(now: now, reason: "revoked", after: undone)
        case .passwordReset:
            throw .invalidCode("This code is not for this; use the link of the mail that brought it.")
        }
    }
}

extension UserAccount {
    /// When the change `undo` undoes was asked for: its change code's issue (the undo code is issued by the command
    /// that confirmed it). Whoever moved the account away could act from there, with the session that asked.
    func askedForChange(undoneBy undo: EmailCode) -> Date {
        emailCodes.values.filter { $0.purpose == .changeEmail && $0.isUsed && $0.issuedAt <= undo.issuedAt }.map(\.issuedAt).max()
            ?? undo.issuedAt
    }

    /// What an undone email change takes back: the identities linked, the second factors enrolled and a password
    /// set (reset or changed) after the change was asked for (`since`). Whoever moved the account away could link
    /// their own ways in while the confirmation was on its way, and reset the password through the new address
    /// after; left, they would sign in again after the owner took the address back, past a reset too, since the
    /// address stays proved. The owner signs in as before the change, or resets the password through their own
    /// address (which links it again).
    func takingBack(since asked: Date) -> [AccountEvent] {
        let kept: Set<String> = [Self.customProvider, ExternalIdentity.anonymousProvider]
        let added = identities.values.filter { identity in
            guard !kept.contains(identity.provider) else { return false }
            // The change itself moved the password to the new address: it counts from when it was set.
            if identity.provider == "password" { return (passwordSetAt ?? identity.linkedAt) > asked }
            return identity.linkedAt > asked
        }
        let enrolled = mfa.factors.values.filter { $0.enrolledAt > asked }.sorted { $0.id.sortsBefore($1.id) }
        return added.sorted { $0.provider < $1.provider }.flatMap { unlinking($0, reason: "email_change_undone") }
            + enrolled.map { .mfaFactorRemoved(.init(factorId: $0.id, reason: "email_change_undone", pending: Self.pending($0))) }
    }

    /// A new password: every reset code still pending is withdrawn first, so that a link mailed before the
    /// change cannot set another password after it (Parse drops its `_perishable_token` on any password change).
    func settingPassword(_ passwordHash: String, except code: UUID? = nil) -> [AccountEvent] {
        withdrawing([.passwordReset], except: code) + [.passwordSet(.init(personal: PersonalData(passwordHash: passwordHash)))]
    }

    /// Withdraws the unspent codes of `purposes` but `except`.
    func withdrawing(_ purposes: Set<EmailCodePurpose>, except: UUID? = nil) -> [AccountEvent] {
        emailCodes.values.filter { !$0.isSpent && $0.id != except && purposes.contains($0.purpose) }
            .sorted { $0.issuedAt != $1.issuedAt ? $0.issuedAt < $1.issuedAt : $0.id.sortsBefore($1.id) }
            .map { .emailCodeExpired(.init(codeId: $0.id, purpose: $0.purpose, reason: "superseded")) }
    }
}

extension EmailCode {
    /// The event that records its refusal for `reason` (presented by the signed-in `caller` when it is someone
    /// else's code): none when the same refusal is recorded already.
    public func refusal(_ reason: String, presentedFor: EmailCodePurpose, by caller: UUID? = nil) -> [AccountEvent] {
        let refused = AccountEvent.EmailCodeRefused(codeId: id, presentedFor: presentedFor, reason: reason, presentedBy: caller)
        return refusedFor.contains(refused.refusalKey) ? [] : [.emailCodeRefused(refused)]
    }

    mutating func apply(_ event: AccountEvent) {
        switch event {
        case .emailCodeUsed:
            isUsed = true
            isSpent = true
        case .emailCodeExpired:
            isSpent = true
        case .emailCodeRefused(let payload):
            refusedFor.insert(payload.refusalKey)
        default:
            break
        }
    }
}
