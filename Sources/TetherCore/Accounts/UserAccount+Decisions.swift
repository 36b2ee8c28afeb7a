import Foundation

/// What a new session needs: chosen by the caller (ids, token hash), recorded by the events.
public struct NewSession: Sendable, Hashable {
    public var id: UUID
    /// SHA-256 (hex) of the session's secret: the refresh token, or the surface's own session token.
    public var refreshTokenHash: String
    public var amr: [String]
    public var jkt: String?
    /// The kind of secret the surface handed out for the session.
    public var secretKind: SessionSecretKind
    /// The app installation the session is for (Parse's `X-Parse-Installation-Id`): a new session
    /// of the installation ends the user's earlier ones of it.
    public var installationId: String?
    /// When a secret that does not rotate stops working (Parse session tokens); nil for rotating ones.
    public var expiresAt: Date?
    /// Developer claims for the session's tokens (a Firebase custom token's `claims`, a JSON object's text).
    public var developerClaims: String?
    /// When the person last authenticated, for a session that continues an earlier one (a reissue keeps
    /// that session's); nil: now.
    public var authTime: Date?
    /// The second factor the person proved for the session, when they proved one (Firebase's
    /// `second_factor_identifier`).
    public var secondFactorId: UUID?

    public init(
        id: UUID, refreshTokenHash: String, amr: [String], jkt: String? = nil, secretKind: SessionSecretKind = .accessAndRefreshTokens,
        installationId: String? = nil, expiresAt: Date? = nil
    ) {
        self.id = id
        self.refreshTokenHash = refreshTokenHash
        self.amr = amr
        self.jkt = jkt
        self.secretKind = secretKind
        self.installationId = installationId
        self.expiresAt = expiresAt
    }
}

/// What a session's secret is, as its `SessionStarted` event records: each surface formats its own.
public enum SessionSecretKind: String, Codable, Sendable, Hashable, CaseIterable {
    /// `/v1`: short-lived ES256 access tokens, and an opaque refresh token that rotates on every use.
    case accessAndRefreshTokens = "access_and_refresh_tokens"
    /// Parse's `r:` session token, which does not rotate.
    case parseSessionToken = "parse_session_token"
    /// Firebase: RS256 ID tokens, and a refresh token for the Secure Token API.
    case firebaseTokens = "firebase_tokens"

    /// Whether the session's secret is a refresh token that rotates on use: `/v1`'s. A Parse token is never
    /// refreshed; a Firebase refresh token stays the same for the session's life, as Firebase's does (two tabs
    /// refreshing at once, or a retry after a lost answer, must not sign the person out).
    public var rotates: Bool { self == .accessAndRefreshTokens }

    /// The surface whose sessions hold this secret: `v1`, `parse` or `firebase`.
    public var surface: String {
        switch self {
        case .accessAndRefreshTokens: "v1"
        case .parseSessionToken: "parse"
        case .firebaseTokens: "firebase"
        }
    }
}

/// The decisions of the user aggregate: each returns the events a command produces, or throws.
extension UserAccount {
    /// A new user from their first identity (sign-in of an unknown identity, or password sign-up).
    public static func register(
        id: UUID, identity: ExternalIdentity, passwordHash: String? = nil, session: NewSession?, now: Date
    ) -> [AccountEvent] {
        let personal = PersonalData(email: identity.email, displayName: identity.displayName, photoURL: identity.photoURL)
        var events: [AccountEvent] = [
            .userRegistered(.init(userId: id, emailVerified: identity.isEmailVerified && identity.email != nil, personal: personal)),
            .identityLinked(.init(provider: identity.provider, uid: identity.uid, emailVerified: identity.isEmailVerified, personal: personal)),
        ]
        if let passwordHash {
            events.append(.passwordSet(.init(personal: PersonalData(passwordHash: passwordHash))))
        }
        if let session {
            events += Self.started(session, provider: identity.provider, outcome: "new_user", now: now)
        }
        return events + UserAccount(id: id).grantEvents(of: identity)
    }

    /// A returning user signs in with an identity already linked to them.
    ///
    /// A user with a confirmed second factor gets a challenge (named by the session's id)
    /// instead of a session: the sign-in completes in ``verifyChallenge(_:factor:check:session:now:)``.
    public func signIn(with identity: ExternalIdentity, session: NewSession, now: Date) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        guard !isDisabled else { throw .userDisabled }
        // A password verified against a hash the user no longer has (reset or changed while it was being checked)
        // opens nothing: whoever reset it meant to shut the old one out.
        if let verified = identity.verifiedPasswordHash, !ConstantTimeText.isEqual(verified, passwordHash ?? "") {
            throw .invalidCredential
        }
        // Every way in asks, a developer's custom token too (where Firebase asks nothing): a leaked service
        // account key must not pass a second factor, and a custom identity is linked to any user its uid names.
        if mfa.isRequired {
            return [.mfaChallengeIssued(.init(
                challengeId: session.id, firstFactor: identity.provider, amr: session.amr,
                expiresAt: now.addingTimeInterval(Self.challengeLifetime), jkt: session.jkt,
                personal: session.developerClaims.map { PersonalData(customClaims: $0) }))]
        }
        return starting(session, provider: identity.provider, outcome: "returning", now: now) + grantEvents(of: identity)
    }

    /// A trusted provider proved the email of an account whose email is unverified: the
    /// identity is linked, the email marked verified, every unverified credential dropped
    /// and every earlier session revoked (Firebase's rule).
    public func takeOver(with identity: ExternalIdentity, session: NewSession, now: Date) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        guard !isDisabled else { throw .userDisabled }
        // An identity of the same provider that proved another address (a second Google account, say) goes with the
        // others below, which makes room for this one; one that proved this very address stays, and this one is refused.
        let address = identity.normalizedEmail ?? ""
        if let existing = identities[identity.provider], Self.vouches(existing, for: address) { throw .providerAlreadyLinked }
        // A takeover skips the second factor, so an account that has one is never taken over:
        // its owner signs in with a method it has (and the second factor), then links.
        guard !mfa.isRequired else {
            throw .accountExistsWithDifferentCredential(email: email ?? identity.email ?? "", signInMethods: signInMethods, owner: id)
        }
        let personal = PersonalData(email: identity.email, displayName: identity.displayName, photoURL: identity.photoURL)
        // An identity whose provider proved another address proves nothing about this one: it goes too.
        // A developer's uid (`custom`) is how their backend names the user, and a Firebase uid never changes: it
        // stays (a developer who made the user with an address nobody proved should prove it first).
        var events = unlinking(identitiesNotVouchingFor: address, keeping: [Self.customProvider], reason: "takeover")
        events.append(.identityLinked(.init(provider: identity.provider, uid: identity.uid, emailVerified: true, personal: personal)))
        events.append(.emailVerified(.init(provider: identity.provider, personal: PersonalData(email: identity.email))))
        for active in activeSessions {
            events.append(.sessionEnded(.init(sessionId: active.id, reason: "takeover")))
        }
        events += revoking(now: now, reason: "takeover", after: events)
        events += Self.started(session, provider: identity.provider, outcome: "takeover", now: now)
        return events + grantEvents(of: identity)
    }

    /// Unlinks, with `reason`, every identity of a provider not in `kept` that does not vouch for `address`
    /// (normalized): one vouches when its provider proved this very address. Whoever linked the others may
    /// not own the address.
    func unlinking(identitiesNotVouchingFor address: String, keeping kept: Set<String>, reason: String) -> [AccountEvent] {
        identities.values.sorted { $0.provider < $1.provider }.filter { existing in
            !kept.contains(existing.provider) && !Self.vouches(existing, for: address)
        }.flatMap { unlinking($0, reason: reason) }
    }

    /// Whether `identity`'s provider proved `address` (normalized).
    static func vouches(_ identity: Identity, for address: String) -> Bool {
        identity.isEmailVerified && identity.email.map(ExternalIdentity.normalize) == address
    }

    /// The anonymous identity, unlinked (reason `upgraded`) as a real way to sign in joins the user.
    var upgradingFromAnonymous: [AccountEvent] {
        identities[ExternalIdentity.anonymousProvider].map { unlinking($0, reason: "upgraded") } ?? []
    }

    /// `identity` unlinked with `reason`, and every sign-in still waiting at a second factor that began with
    /// it ended (`first_factor_unlinked`): removing a way in is how a user shuts it, so such a sign-in does
    /// not finish, not even after the provider is linked again with another id or the same one. Every
    /// decision that unlinks goes through here.
    func unlinking(_ identity: Identity, reason: String) -> [AccountEvent] {
        [.identityUnlinked(.init(provider: identity.provider, uid: identity.uid, reason: reason))]
            + endingOpenChallenges(reason: "first_factor_unlinked") { $0.firstFactor == identity.provider }
    }

    /// `events`, then what `next` decides on the state after them: two decisions made as one command, so
    /// that both are written or neither (a link and the new session it answers with, say).
    public func deciding(
        _ events: [AccountEvent], at now: Date, then next: (UserAccount) throws -> [AccountEvent]
    ) rethrows -> [AccountEvent] {
        events + (try next(appending(events.map { ($0, now) }, version: version)))
    }

    /// What `steps` decide one after the other, each on the state after the ones before: several decisions
    /// made as one command (a Parse `PUT` that links, sets a password and unlinks), all written or none.
    public func deciding(_ steps: [@Sendable (UserAccount) throws -> [AccountEvent]], at now: Date) throws -> [AccountEvent] {
        var state = self
        var events: [AccountEvent] = []
        for step in steps {
            let decided = try step(state)
            events += decided
            state = state.appending(decided.map { ($0, now) }, version: version)
        }
        return events
    }

    /// A first password is a new way in: a user who has another adds one only with a sign-in of the last
    /// ``recentSignInWindow`` (`authTime`, when the surface knows it), so a stolen token cannot add the thief's.
    /// An anonymous user's upgrade is its only way to keep the account, and is not held to it.
    /// A password added to a user signs in with the user's own address (a user with none yet takes the password's,
    /// as with any first identity that has one). One on another address would hold that address for a user who does
    /// not show it: its owner could then neither sign up with it, nor add a password on it, nor reset it.
    public func checkPasswordAddress(_ address: String, pointer: String? = nil) throws(AccountError) {
        try Self.checkPasswordAddress(address, accountEmail: email, pointer: pointer)
    }

    /// ``checkPasswordAddress(_:pointer:)`` for an account that will show `accountEmail` (a surface's check before
    /// the sign-in that comes with the password, so that a refused request opens no session).
    public static func checkPasswordAddress(_ address: String, accountEmail: String?, pointer: String? = nil) throws(AccountError) {
        guard let accountEmail, ExternalIdentity.normalize(accountEmail) != ExternalIdentity.normalize(address) else { return }
        throw .invalidRequest(
            "A password signs in with the account's own email address: add it on that address, or change the email first.",
            pointer: pointer)
    }

    public func checkPasswordAddition(authTime: Date?, now: Date) throws(AccountError) {
        guard let authTime, !isAnonymous else { return }
        try Self.requireRecentSignIn(authTime: authTime, now: now)
    }

    /// Links another provider's identity (the caller has checked it belongs to nobody), with the
    /// password it sets when it is a `password` identity.
    ///
    /// Linking upgrades an anonymous user in place: the same id keeps its history, and the
    /// `anonymous` identity goes in the same command.
    ///
    /// - Parameter replacing: whether another identity of the provider, already linked, gives way to this
    ///   one in the same command (Parse saves a changed `authData` entry); otherwise it is refused.

    public func link(
        _ identity: ExternalIdentity, passwordHash: String? = nil, replacing: Bool = false
    ) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        guard !isDisabled else { throw .userDisabled }
        guard identity.provider != ExternalIdentity.anonymousProvider else {
            throw .invalidRequest("An anonymous identity is not linked: sign in anonymously to make an anonymous user.")
        }
        var replaced: [AccountEvent] = []
        if let linked = identities[identity.provider] {
            guard replacing, linked.uid != identity.uid, identity.provider != "password" else {
                throw linked.uid == identity.uid ? .credentialAlreadyInUse : .providerAlreadyLinked
            }
            replaced = unlinking(linked, reason: "replaced")
        }
        guard (identity.provider == "password") == (passwordHash != nil) else {
            throw .invalidRequest("A password identity is linked with its password, and only it.")
        }
        // The account's first address comes with its first identity that has one.
        if email == nil { try checkAddress(identity.email, verified: identity.isEmailVerified) }
        let personal = PersonalData(email: identity.email, displayName: identity.displayName, photoURL: identity.photoURL)
        var events: [AccountEvent] = replaced + [
            .identityLinked(.init(provider: identity.provider, uid: identity.uid, emailVerified: identity.isEmailVerified, personal: personal)),
        ]
        if let passwordHash {
            events += settingPassword(passwordHash)
        }
        if identity.isEmailVerified, !isEmailVerified, let email, identity.normalizedEmail == ExternalIdentity.normalize(email) {
            events.append(.emailVerified(.init(provider: identity.provider, personal: PersonalData(email: email))))
        }
        return events + upgradingFromAnonymous + grantEvents(of: identity)
    }

    /// Replaces the password of a user who has one: every session ends (whoever knew the old password
    /// is signed out), and `session` opens for the caller (Parse's rule for a password change).
    public func changePassword(
        passwordHash: String, session: NewSession, continuing caller: UUID? = nil, now: Date
    ) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        guard !isDisabled else { throw .userDisabled }
        guard identities["password"] != nil else { throw .noSuchProvider("password") }
        return settingPassword(passwordHash) + (try restartingSessions(with: session, continuing: caller, now: now))
    }

    /// Every session ends and `session` opens for the caller, as after a password change: whoever held a
    /// session is signed out. Parse does this for any password a user's `PUT` sets, a first one included.
    /// Tokens issued before are void too (`validSince`), as Firebase's "major account change" has it: a
    /// backend that checks revocation (firebase-admin's `check_revoked`) refuses them, not only Tether.
    ///
    /// - Parameter caller: the session the request was made with. It must still be live here, under the user's
    ///   lock: a revocation or a sign-out that ended it meanwhile leaves nothing to continue (`invalid_token`).
    ///   And the new session keeps its sign-in time, since setting a password with a session proves no more
    ///   than the session did: a stolen session's token never makes itself a recent sign-in that way (one that
    ///   could then remove second factors).
    public func restartingSessions(with session: NewSession, continuing caller: UUID? = nil, now: Date) throws(AccountError) -> [AccountEvent] {
        var session = session
        if let caller {
            guard let proved = sessions[caller], proved.isActive else { throw .invalidToken }
            session.authTime = session.authTime ?? proved.authTime
        }
        return activeSessions.map { .sessionEnded(.init(sessionId: $0.id, reason: "password_changed")) }
            + revoking(now: now, reason: "password_changed")
            + Self.started(session, provider: "password", outcome: "password_changed", now: now)
    }

    /// Opens `session` for a user who proved a live session a moment ago (a Firebase second-factor
    /// enrolment or withdrawal answers new tokens: the SDKs replace the user's with them).
    ///
    /// - Parameter caller: the session the caller proved before the command: it must still be live here, under
    ///   the user's lock, so a token whose session a revocation or a sign-out ended meanwhile gets nothing. It
    ///   stays live, as Firebase's refresh tokens do (a client whose answer was lost keeps its old tokens). The new
    ///   session continues it: signed in no later than the caller was, so a reissue never renews the recent-sign-in
    ///   window (a session that would is refused, as a token that proves nothing more).
    public func reissue(_ session: NewSession, provider: String, continuing caller: UUID? = nil, now: Date) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        guard !isDisabled else { throw .userDisabled }
        if let caller {
            guard let live = sessions[caller], live.isActive else { throw .invalidToken }
            guard let authTime = session.authTime, authTime <= live.authTime else { throw .invalidToken }
        }
        return starting(session, provider: provider, outcome: "reissued", now: now)
    }

    /// Removes a provider; the last way to sign in may only be removed by an admin. A developer's uid (the
    /// `custom` identity, Firebase's `localId`) is never removed, by an admin neither: the developer's backend
    /// names the user by it, and Firebase's own routes have no way to remove or set it again. Nor is an anonymous
    /// user's identity (a real way in replaces it when linked).
    public func unlink(provider: String, byAdmin: Bool) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        guard let identity = identities[provider] else { throw .noSuchProvider(provider) }
        guard provider != Self.customProvider else { throw .customIdentityKept }
        guard byAdmin || identities.count > 1 else { throw .lastSignInMethod }
        // Unlinked by an admin, it would leave a user who is no longer anonymous, keeps the anonymous client's
        // sessions and is never swept: the opposite of shutting that client out.
        guard provider != ExternalIdentity.anonymousProvider else { throw .anonymousIdentityKept }
        return unlinking(identity, reason: byAdmin ? "admin" : "user")
    }

    /// Rotates a session's refresh token; presenting an old one ends the session (reuse detection).
    ///
    /// - Parameter kind: the kind of secret the surface refreshes: a session holding another kind (a Parse
    ///   token, or another surface's refresh token) is refused, so no surface refreshes another's session.
    public func refresh(
        session id: UUID, presentedHash: String, newHash: String, presentedJKT: String?,
        kind: SessionSecretKind = .accessAndRefreshTokens
    ) throws(AccountError) -> [AccountEvent] {
        guard let session = sessions[id], session.isActive, !isDisabled, session.secretKind == kind, kind.rotates else {
            throw .invalidToken
        }
        if let bound = session.jkt, bound != presentedJKT {
            throw .invalidDPoPProof
        }
        guard session.refreshTokenHash == presentedHash else {
            throw .refreshTokenReused
        }
        return [.sessionRefreshed(.init(sessionId: id, previousTokenHash: presentedHash, refreshTokenHash: newHash, generation: session.generation + 1))]
    }

    /// The events that end a session after an old refresh token came back.
    public func endAfterReuse(session id: UUID) -> [AccountEvent] {
        guard sessions[id]?.isActive == true else { return [] }
        return [.sessionEnded(.init(sessionId: id, reason: "reuse_detected"))]
    }

    /// Ends one session (sign-out).
    public func signOut(session id: UUID) throws(AccountError) -> [AccountEvent] {
        try endSession(id, by: .session(id))
    }

    /// Who ends one session with ``endSession(_:by:)``.
    public enum SessionEnder: Sendable, Hashable {
        /// The user, from a live session of theirs: another device's, or the caller's own (a sign-out).
        case session(UUID)
        /// An admin (a lost phone reported to support): the session's end says so.
        case admin
    }

    /// Ends one of the user's live sessions. A session that is none of the user's, or that has ended, is
    /// ``AccountError/sessionNotFound``; a caller's session that is not live, ``AccountError/invalidToken``; a user
    /// that does not exist (or is erased) for an admin, ``AccountError/notFound``.
    public func endSession(_ id: UUID, by ender: SessionEnder) throws(AccountError) -> [AccountEvent] {
        switch ender {
        case .session(let caller): guard sessions[caller]?.isActive == true else { throw .invalidToken }
        case .admin: guard exists else { throw .notFound }
        }
        guard sessions[id]?.isActive == true else { throw .sessionNotFound }
        return [.sessionEnded(.init(sessionId: id, reason: ender == .admin ? "ended_by_admin" : "sign_out"))]
    }

    /// Ends every session and voids every token issued so far.
    public func revokeAllSessions(now: Date) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        return revoking(now: now, reason: "revoked")
    }

    /// Every token issued before `now` void and every sign-in still waiting at a second factor ended (but those
    /// `earlier` events of the same decision end already). `validSince` never moves back: a lower time (an
    /// admin's) would make tokens revoked before look valid again to a backend that checks it, while Tether
    /// itself still refuses them. Every decision that revokes goes through here.
    func revoking(now: Date, reason: String, after earlier: [AccountEvent] = []) -> [AccountEvent] {
        let ended = Set(earlier.compactMap { event -> UUID? in
            if case .mfaChallengeEnded(let payload) = event { payload.challengeId } else { nil }
        })
        return [.sessionsRevoked(.init(validSince: max(now, validSince ?? now)))] + endingOpenChallenges(reason: reason) { !ended.contains($0.id) }
    }

    /// Ends second-factor challenges still open, so a pending credential issued before
    /// a revocation or a disable cannot complete a sign-in afterwards.
    func endingOpenChallenges(reason: String, where chosen: (MFAState.Challenge) -> Bool = { _ in true }) -> [AccountEvent] {
        mfa.challenges.values.filter { !$0.isEnded && chosen($0) }.sorted { $0.id.sortsBefore($1.id) }
            .map { .mfaChallengeEnded(.init(challengeId: $0.id, reason: reason)) }
    }

    /// Disables (or enables) the account; disabling also ends its sessions.
    public func setDisabled(_ disabled: Bool, reason: String?, now: Date) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        guard disabled != isDisabled else { return [] }
        if disabled {
            return [.userDisabled(.init(reason: reason))] + revoking(now: now, reason: "disabled")
        }
        return [.userEnabled(.init(reason: reason))]
    }

    /// The user erases themselves with their live session `sessionId` (``erase(reason:)`` then).
    ///
    /// - Parameter authTime: the session's sign-in, which must be within ``recentSignInWindow`` (an erasure cannot
    ///   be undone, so a stolen token must not do it); nil where the surface asks no recent sign-in (Parse). An
    ///   anonymous user is not held to it: it cannot sign in again, so the rule would leave it no way to go.
    public func eraseByOwner(session sessionId: UUID, authTime: Date?, reason: String, now: Date) throws(AccountError) -> [AccountEvent] {
        guard exists, sessions[sessionId]?.isActive == true else { throw .invalidToken }
        if let authTime, !isAnonymous { try Self.requireRecentSignIn(authTime: authTime, now: now) }
        return try erase(reason: reason)
    }

    /// Erases the user (an admin action): sessions end, and the caller destroys the user's key
    /// in the same transaction, so personal data in every earlier event becomes unreadable.
    public func erase(reason: String?) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        var events: [AccountEvent] = activeSessions.map { .sessionEnded(.init(sessionId: $0.id, reason: "erased")) }
        events.append(.userErased(.init(reason: reason)))
        return events
    }

    /// Live sessions one user may hold; the next sign-in ends the oldest (`session_limit`). Sessions that
    /// never expire by themselves (Firebase refresh tokens, Parse `r:` tokens) would otherwise pile up
    /// with every sign-in on a new device or a cleared app, and with them the user's state and rows.
    public static let maxLiveSessions = 100

    /// The events that open `session` on this account: a session for an app installation replaces
    /// the user's earlier sessions of that installation (Parse's rule), which end first; past
    /// ``maxLiveSessions``, the oldest sessions end too.
    func starting(_ session: NewSession, provider: String, outcome: String, now: Date) -> [AccountEvent] {
        // Past the limit by one as a rule: the others are counted and the oldest found, with no list of them
        // made (at 2.4 KB, a list of a hundred made malloc consolidate its free chunks first) and none sorted.
        var replaced: [SessionAge] = [], others = 0, oldest: SessionAge?
        forEachLiveSession(splittingOff: session.installationId) { age, isOfInstallation in
            if isOfInstallation {
                replaced.append(age)
            } else {
                others += 1
                if oldest.map({ age < $0 }) ?? true { oldest = age }
            }
        }
        var events: [AccountEvent] = replaced.sorted().map { .sessionEnded(.init(sessionId: $0.id, reason: "replaced")) }
        let excess = others + 1 - Self.maxLiveSessions
        let ending = excess <= 0 ? [] : excess == 1 ? [oldest!] : Array(liveSessionAges(splittingOff: session.installationId).others.sorted().prefix(excess))
        events += ending.map { .sessionEnded(.init(sessionId: $0.id, reason: "session_limit")) }
        return events + Self.started(session, provider: provider, outcome: outcome, now: now)
    }

    /// The events that open `session`, on an account with no session it could replace.
    static func started(_ session: NewSession, provider: String, outcome: String, now: Date) -> [AccountEvent] {
        [
            .signedIn(.init(provider: provider, sessionId: session.id, outcome: outcome)),
            .sessionStarted(.init(
                sessionId: session.id, refreshTokenHash: session.refreshTokenHash, authTime: session.authTime ?? now,
                amr: session.amr, jkt: session.jkt, secretKind: session.secretKind,
                installationId: nil, expiresAt: session.expiresAt, secondFactorId: session.secondFactorId,
                personal: session.developerClaims == nil && session.installationId == nil
                    ? nil : PersonalData(customClaims: session.developerClaims, installationId: session.installationId))),
        ]
    }
}
