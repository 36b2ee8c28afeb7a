import Foundation
import TetherCore
import TetherPostgres

/// Who sent a command and how to recognise its retries.
public struct CommandContext: Sendable {
    /// The command's id; its events' ids are derived from it, so a command re-run after a lost race
    /// (the same id) writes its events once. Requests get a random one (retries are recognised by
    /// their stored answer); seeds derive theirs from the seed step.
    public var commandId: UUID
    /// Recorded on every event.
    public var metadata: EventMetadata
    public var now: Date

    public init(commandId: UUID = UUID.random(), metadata: EventMetadata = EventMetadata(), now: Date = Date()) {
        self.commandId = commandId
        var metadata = metadata
        metadata.commandId = commandId
        self.metadata = metadata
        self.now = now
    }

    /// The same command dated now, never earlier than it was: what a command writes after slow work (a password's
    /// hash, hundreds of milliseconds) is dated when it is written. A revocation dated at the request's start
    /// would come before the tokens a session was given while the hash ran, and a backend comparing `iat` with
    /// `validSince` (firebase-admin's check_revoked) would take them.
    public var asOfNow: CommandContext {
        var dated = self
        dated.now = max(now, Date())
        return dated
    }
}

/// The outcome of a successful first-factor sign-in.
public struct SignInOutcome: Sendable {
    public var userId: UUID
    public var isNewUser: Bool
    /// `new_user`, `returning`, `takeover` or `mfa_required`.
    public var outcome: String
    /// When the user has a second factor: the challenge to complete instead of a session.
    public var challenge: MFAState.Challenge?
    /// The user's confirmed factors, offered for the challenge.
    public var factors: [MFAState.Factor] = []
    /// The user's state after the sign-in (what the answer shows, with no read back).
    public var account: UserAccount?
}

/// What the sign-in limits add to a sign-in's transaction: statements for its first round trip and
/// the verdict on their rows (which throws to refuse), and writes to commit with it (giving a
/// password attempt's place back).
public struct SignInCheck: Sendable {
    public var statements: [PostgresQuery]
    public var verdict: @Sendable ([PostgresRows]) throws -> Void
    public var writes: [PostgresQuery]

    public init(
        statements: [PostgresQuery] = [], writes: [PostgresQuery] = [], verdict: @escaping @Sendable ([PostgresRows]) throws -> Void = { _ in }
    ) {
        self.statements = statements
        self.writes = writes
        self.verdict = verdict
    }
}

/// Runs account commands: loads the user's stream, decides, appends and projects in one transaction.
///
/// Races are settled by the database: a conflicting append (stream version) or a
/// projection constraint (a credential already linked elsewhere) rolls the whole
/// command back; sign-in then retries on fresh state, link reports the conflict.
public struct AccountService: Sendable {
    /// More of a command, decided on the user's state after its first decision (``UserAccount/deciding(_:at:then:)``).
    public typealias FollowUp = @Sendable (UserAccount) throws -> [AccountEvent]

    public let database: PostgresClient
    public let store: PostgresEventStore
    public let emailPolicy: TetherConfiguration.EmailPolicy
    /// Users' states between commands, so that a command decodes only the events since (``AccountStateCache``).
    let cache: AccountStateCache
    /// The keyed hashes of recovery codes.
    let recoveryHasher = RecoveryCodeHasher()
    /// What keys the hashes that name a code's address in `code_sends` (the sign-in limits' key).
    let limitsKey = LoadedHashKey(SignInLimits.hashKeyName)
    /// How often a command is re-decided after losing a race.
    static let maxAttempts = 6
    /// How many of a stream's last events a command reads when no hint named its user: enough to reach the
    /// state kept of the user by id after a few commands of another instance, few enough that a user of
    /// thousands of events costs PostgreSQL no more than one of a few (tests set it lower).
    var streamTail = 64
    /// How many events a load that folds its user's state from the log decodes, at least, before it writes that
    /// state as the user's snapshot (``AccountSnapshot``). A user of 100 sessions has a snapshot of about 32 KB,
    /// which costs about as much to write as 64 events to decode; loads then decode 32 on average (tests set it lower).
    var snapshotInterval = 64

    /// - Parameter stateCacheBytes: about the most memory users' kept states take (`TETHER_STATE_CACHE_MB`).
    public init(
        database: PostgresClient, emailPolicy: TetherConfiguration.EmailPolicy,
        stateCacheBytes: Int = AccountStateCache.defaultByteBudget
    ) {
        self.cache = AccountStateCache(byteBudget: stateCacheBytes)
        self.database = database
        self.store = PostgresEventStore(client: database, upcasters: AccountEventCodec.upcasters)
        self.emailPolicy = emailPolicy
    }

    // MARK: Commands

    /// Signs in (or signs up) with a verified identity; opens `session`.
    ///
    /// One transaction. A returning user costs two round trips: the first takes the email's lock,
    /// finds the identity's owner, takes their lock and reads their stream; the second appends,
    /// projects and commits. A new user costs the same; taking over an unverified email account, three.
    /// `check`, when given, runs in the first round trip too, on rows it asks for (the sign-in limits).
    public func signIn(
        _ identity: ExternalIdentity, session: NewSession, context: CommandContext, check: SignInCheck? = nil
    ) async throws -> SignInOutcome {
        try await retrying { attempt in
            try await database.withTransactionJob { transaction in
                // A kept state found by the identity says it was linked when last seen: the sign-in is then a
                // returning one, which needs neither the email's lock nor its owner. If the identity has gone
                // since, the command is re-decided without the hint. Otherwise the email lock comes before the
                // identity lookup: a first sign-in racing this one may be registering the identity, and only
                // after its commit is the lookup true.
                let hint = AccountStateCache.hint(provider: identity.provider, uid: identity.uid)
                let kept = attempt == 1 ? cache.entry(forHint: hint) : nil
                let lockedEmail = kept == nil ? emailPolicy.exclusiveEmail(of: identity) : nil
                var reads = check?.statements ?? []
                let checks = reads.count
                if let lockedEmail {
                    reads.append(Self.lockEmail(lockedEmail))
                    reads.append(try Self.userWithEmail(lockedEmail, seal: readModels))
                }
                let owner = try AccountProjection.identityOwner(provider: identity.provider, uid: identity.uid, seal: readModels)
                let rows = try transaction.begin(
                    reads + Self.loadStatements(user: .named(owner), known: kept, commandId: context.commandId, tail: streamTail))
                try check?.verdict(Array(rows.prefix(checks)))
                let (loaded, unknown) = try loaded(from: rows.suffix(3), known: kept, in: transaction)
                if loaded == nil, let kept {
                    throw WrongExpectedVersion(stream: .user(kept.account.id), expected: .any, actual: -1)
                }
                // Only an unknown identity with a taken address needs the address's owner: a third round trip.
                var emailOwner: LoadedUser?
                if loaded == nil, lockedEmail != nil, let ownerId: UUID = try rows[checks + 1].first?.decode("id") {
                    let ownerKept = cache.entry(for: ownerId)
                    emailOwner = try self.loaded(
                        from: transaction.run(
                            Self.loadStatements(user: .id(ownerId), known: ownerKept, commandId: context.commandId, tail: streamTail)),
                        known: ownerKept, in: transaction).user
                }
                switch try SignInRoute.route(identity, owner: loaded?.account, emailOwner: emailOwner?.account) {
                case .returning:
                    guard let loaded else { throw AccountError.notFound }
                    if loaded.isCommandRecorded {
                        try transaction.commit(check?.writes ?? [])
                        return SignInOutcome(userId: loaded.account.id, isNewUser: false, outcome: "returning", account: loaded.account)
                    }
                    let account = try commit(
                        try loaded.account.signIn(with: identity, session: session, now: context.now), on: loaded, context,
                        writingAfter: check?.writes ?? [], hints: [hint], in: transaction)
                    if let challenge = account.mfa.challenges[session.id] {
                        return SignInOutcome(
                            userId: account.id, isNewUser: false, outcome: "mfa_required", challenge: challenge,
                            factors: account.mfa.confirmedFactors, account: account)
                    }
                    return SignInOutcome(userId: account.id, isNewUser: false, outcome: "returning", account: account)
                case .takeOver:
                    guard let owner = emailOwner else { throw AccountError.notFound }
                    let account = try commit(
                        try owner.account.takeOver(with: identity, session: session, now: context.now), on: owner, context,
                        writingAfter: check?.writes ?? [], hints: [hint], in: transaction)
                    return SignInOutcome(userId: account.id, isNewUser: false, outcome: "takeover", account: account)
                case .register:
                    break
                }
                let userId = AccountEventCodec.eventID(command: context.commandId, index: 10_000 + attempt)
                let account = try commit(
                    UserAccount.register(id: userId, identity: identity, session: session, now: context.now),
                    on: .new(userId, in: unknown), context, writingAfter: check?.writes ?? [], hints: [hint], in: transaction)
                return SignInOutcome(userId: userId, isNewUser: true, outcome: "new_user", account: account)
            }
        }
    }

    /// Creates a password user; the email must be free (under either policy, a password account owns its email).
    ///
    /// One transaction of two round trips: the email's lock and its owners, then the writes and the commit.
    @discardableResult
    public func signUp(
        email: String, passwordHash: String, displayName: String?, session: NewSession, context: CommandContext
    ) async throws -> UserAccount {
        let normalized = ExternalIdentity.normalize(email)
        let identity = ExternalIdentity(provider: "password", uid: normalized, email: email, isEmailVerified: false, displayName: displayName)
        return try await retrying { _ in
            try await database.withTransactionJob { transaction in
                let rows = try transaction.begin([
                    Self.lockEmail(normalized),
                    try Self.userWithEmail(normalized, seal: readModels),
                    try AccountProjection.identityOwner(provider: "password", uid: normalized, seal: readModels),
                    "SELECT now() AS now, pg_current_xact_id() AS tx",
                ])
                guard rows[1].isEmpty, rows[2].isEmpty else { throw AccountError.emailAlreadyInUse }
                let userId = AccountEventCodec.eventID(command: context.commandId, index: 10_000)
                let events = UserAccount.register(id: userId, identity: identity, passwordHash: passwordHash, session: session, now: context.now)
                let unknown = Unknown(now: try rows[3][0].decode("now"), transactionId: try rows[3][0].decode("tx"))
                return try commit(events, on: .new(userId, in: unknown), context, in: transaction)
            }
        }
    }

    /// An identity to link to a signed-in user (``link(_:to:context:preceding:followUp:)``).
    public struct Link: Sendable {
        public var identity: ExternalIdentity
        /// The password's stored form, for a `password` identity.
        public var passwordHash: String?
        /// Whether another identity of the provider, already linked, gives way to this one (Parse saves a
        /// changed `authData` entry); otherwise it is refused.
        public var replacing: Bool
        /// When the caller signed in, for a password (``UserAccount/checkPasswordAddition(authTime:now:)``).
        public var authTime: Date?

        public init(_ identity: ExternalIdentity, passwordHash: String? = nil, replacing: Bool = false, authTime: Date? = nil) {
            self.identity = identity
            self.passwordHash = passwordHash
            self.replacing = replacing
            self.authTime = authTime
        }
    }

    /// Links a verified identity to a signed-in user (with its password, for a `password` identity):
    /// one transaction of two round trips. A password identity's email must be free under either policy.
    ///
    /// - Parameter followUp: what else the command decides on the user after the link (a profile change, the
    ///   new session a surface answers with), written in the same transaction.
    @discardableResult
    public func link(
        _ identity: ExternalIdentity, passwordHash: String? = nil, replacing: Bool = false, to userId: UUID, context: CommandContext,
        followUp: FollowUp? = nil
    ) async throws -> UserAccount {
        try await link([Link(identity, passwordHash: passwordHash, replacing: replacing)], to: userId, context: context, followUp: followUp)
    }

    /// Links several verified identities to a signed-in user in one command, between what the command decides
    /// before them and after them (a Parse `PUT` that removes factors, links providers and a password, and
    /// unlinks others): all of it is written, or none. One transaction of two round trips.
    ///
    /// Nobody may hold any of the identities, and the email each one claims (a password's always, another's
    /// under one account per email) must be free or the user's; the emails are locked in order, so two
    /// commands about the same addresses never wait on each other.
    @discardableResult
    public func link(
        _ links: [Link], to userId: UUID, context: CommandContext, preceding: FollowUp? = nil, followUp: FollowUp? = nil
    ) async throws -> UserAccount {
        let seal = try await database.readModelSeal()
        let lockedEmails = Set(links.compactMap { link in
            link.passwordHash != nil ? link.identity.normalizedEmail : emailPolicy.exclusiveEmail(of: link.identity)
        }).sorted()
        // The emails' locks come first, as a sign-in takes them: a link racing this one for the same identity
        // commits before the lookups below begin, so its identity is found (credential_already_in_use), not only
        // the address it gave its user (which answered email_already_in_use).
        var reads = lockedEmails.map(Self.lockEmail)
        reads += try links.map { try AccountProjection.identityOwner(provider: $0.identity.provider, uid: $0.identity.uid, seal: seal) }
        reads += try lockedEmails.map { try Self.userWithEmail($0, seal: seal) }
        return try await mappingConstraints {
            try await execute(user: .id(userId), known: { cache.entry(for: userId) }, reads: reads, context) { account, rows in
                // A password identity is its email: another account holding it means the email is taken, and the
                // caller's own means a password is linked already (it was answered "another account uses this email
                // address"). Any other identity linked already, even to the caller, is in use (SEMANTICS §1).
                for (link, owners) in zip(links, rows.dropFirst(lockedEmails.count)) where !owners.isEmpty {
                    guard link.passwordHash != nil else { throw AccountError.credentialAlreadyInUse }
                    let owner: UUID? = try owners.first?.decode("user_id")
                    throw owner == userId ? AccountError.providerAlreadyLinked : AccountError.emailAlreadyInUse
                }
                for holders in rows.suffix(lockedEmails.count) {
                    if let owner: UUID = try holders.first?.decode("id"), owner != userId { throw AccountError.emailAlreadyInUse }
                }
                let steps: [FollowUp] = [preceding].compactMap { $0 }
                    + links.map { link in
                        { state in
                            if link.passwordHash != nil { try state.checkPasswordAddition(authTime: link.authTime, now: context.now) }
                            return try state.link(link.identity, passwordHash: link.passwordHash, replacing: link.replacing)
                        }
                    }
                    + [followUp].compactMap { $0 }
                return (try account.deciding(steps, at: context.now), ())
            }.account
        }
    }

    /// Removes a provider from a user.
    @discardableResult
    public func unlink(provider: String, from userId: UUID, byAdmin: Bool = false, context: CommandContext) async throws -> UserAccount {
        try await change(userId, context) { try $0.unlink(provider: provider, byAdmin: byAdmin) }
    }

    /// Ends one session.
    @discardableResult
    public func signOut(userId: UUID, sessionId: UUID, context: CommandContext) async throws -> UserAccount {
        try await endSession(sessionId, of: userId, by: .session(sessionId), context: context)
    }

    /// Ends one of the user's sessions, from a live session of theirs or by an admin (``UserAccount/endSession(_:by:)``).
    @discardableResult
    public func endSession(
        _ sessionId: UUID, of userId: UUID, by ender: UserAccount.SessionEnder, context: CommandContext
    ) async throws -> UserAccount {
        try await change(userId, context) { try $0.endSession(sessionId, by: ender) }
    }

    /// Ends every session of the user and voids every earlier token.
    @discardableResult
    public func revokeAllSessions(userId: UUID, context: CommandContext) async throws -> UserAccount {
        try await change(userId, context) { try $0.revokeAllSessions(now: context.now) }
    }

    /// Disables or enables a user (an admin action).
    @discardableResult
    public func setDisabled(_ disabled: Bool, userId: UUID, reason: String?, context: CommandContext) async throws -> UserAccount {
        try await change(userId, context) { try $0.setDisabled(disabled, reason: reason, now: context.now) }
    }

    /// Erases a user (an admin action): their sessions end, a `UserErased` event is appended and their
    /// key is destroyed in the same transaction, so every event about them reads as erased from then on.
    ///
    /// - Parameters:
    ///   - condition: decided on the user's state inside the command; when it does not hold, nothing is
    ///     written and ``ConditionNoLongerHolds`` is thrown (a sweep's user who came back meanwhile).
    ///   - recording: statements that commit with the erasure (a provider's request it answers).
    ///   - claim: the `Idempotency-Key` claim of the request that erases (``IdempotentRequests/scope(of:principal:key:)``),
    ///     which stays so that its retry gets its answer; every other answer kept for the user goes.
    @discardableResult
    public func erase(
        userId: UUID, reason: String?, recording: [PostgresQuery] = [], claim: String? = nil, context: CommandContext,
        when condition: @escaping @Sendable (UserAccount) -> Bool = { _ in true }
    ) async throws -> UserAccount {
        try await erasing(userId, recording: recording, claim: claim, context: context) { account in
            guard condition(account) else { throw ConditionNoLongerHolds() }
            return try account.erase(reason: reason)
        }
    }

    /// A user erases themselves with the session `sessionId` (`DELETE /v1/users/me`, Parse's `user.delete()`,
    /// Firebase's `accounts:delete`), as ``UserAccount/eraseByOwner(session:authTime:reason:now:)`` decides under the
    /// user's lock: a session ended while the request was checked, or another erasure of the user just before,
    /// leaves it nothing to erase (``AccountError/invalidToken``, the caller's token being void).
    public func eraseByOwner(
        userId: UUID, sessionId: UUID, authTime: Date?, reason: String, claim: String? = nil, context: CommandContext
    ) async throws {
        do {
            try await erasing(userId, claim: claim, context: context) {
                try $0.eraseByOwner(session: sessionId, authTime: authTime, reason: reason, now: context.now)
            }
        } catch let error as AccountError where error.reason == .notFound {
            throw AccountError.invalidToken
        }
    }

    /// The erasure `decide` makes, with what goes with it in the same transaction.
    private func erasing(
        _ userId: UUID, recording: [PostgresQuery] = [], claim: String?, context: CommandContext,
        _ decide: @escaping @Sendable (UserAccount) throws -> [AccountEvent]
    ) async throws -> UserAccount {
        // The short-lived send counts name the user beside a hash of their number or address: the user's name goes,
        // and a place of an address or number keeps counting for it until it leaves the window (within the hour),
        // so that erasing one's own account does not start an inbox's or a phone's allowance again. The answers kept
        // for their retries hold what they were told: they go with them.
        let afterwards: [PostgresQuery] = [
            PersonalDataVault.destroyKeyStatement(of: userId), AccountSnapshot.deleteStatement(of: userId),
            "DELETE FROM code_sends WHERE user_id = \(userId) AND address_hash IS NULL",
            "UPDATE code_sends SET user_id = NULL WHERE user_id = \(userId)",
            "DELETE FROM idempotent_responses WHERE user_id = \(userId) AND scope IS DISTINCT FROM \(claim)",
        ]
        return try await execute(user: .id(userId), known: { cache.entry(for: userId) }, writingAfter: afterwards + recording, context) { account, _ in
            (try decide(account), ())
        }.account
    }

    /// A conditional command found its condition false on the user's current state, and wrote nothing.
    public struct ConditionNoLongerHolds: Error, Sendable {}

    /// The user of the session a refresh token (by its hash, current or superseded) was issued for, with the
    /// session's id as `session_id`.
    static func refreshTokensUser(_ tokenHash: String) -> UserRow {
        .row("""
            SELECT s.user_id AS id, s.id AS session_id FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id
            WHERE r.token_hash = \(tokenHash)
            """)
    }

    /// Rotates a refresh token: answers the session's user and id, or ends the session on reuse.
    public func refresh(
        presentedHash: String, newHash: String, presentedJKT: String?, kind: SessionSecretKind = .accessAndRefreshTokens,
        context: CommandContext
    ) async throws -> (userId: UUID, sessionId: UUID, amr: [String], authTime: Date, jkt: String?, account: UserAccount) {
        // One transaction of two round trips: the token's session and user are looked up in the first, together.
        let (account, outcome): (UserAccount, (sessionId: UUID, isReuse: Bool))
        do {
            (account, outcome) = try await execute(
                user: Self.refreshTokensUser(presentedHash),
                known: { [cache] in cache.entry(forHint: AccountStateCache.hint(refreshTokenHash: presentedHash)) },
                hints: [AccountStateCache.hint(refreshTokenHash: newHash)], context
            ) { account, rows in
                guard let sessionId: UUID = try rows[0].first?.decode("session_id") else { throw AccountError.invalidToken }
                do {
                    let events = try account.refresh(
                        session: sessionId, presentedHash: presentedHash, newHash: newHash, presentedJKT: presentedJKT, kind: kind)
                    return (events, (sessionId, false))
                } catch let error as AccountError where error == .refreshTokenReused {
                    // A used token came back: someone holds a copy. The whole session ends (recorded), then it is refused.
                    return (account.endAfterReuse(session: sessionId), (sessionId, true))
                }
            }
        } catch let error as AccountError where error == .notFound {
            throw AccountError.invalidToken
        }
        if outcome.isReuse { throw AccountError.refreshTokenReused }
        let sessionId = outcome.sessionId
        let userId = account.id
        guard let session = account.sessions[sessionId] else { throw AccountError.invalidToken }
        return (userId, sessionId, session.amr, session.authTime, session.jkt, account)
    }

    /// The live session whose secret hashes to `secretHash` and is of `kind`, with its user's state; nothing is
    /// written (a Firebase refresh token is not rotated). `not_found` for a secret of an erased user and
    /// `user_disabled` for one of a disabled user (whose sessions ended with the change), as Firebase tells
    /// them apart; `invalid_token` for an unknown, ended or other-kind secret.
    public func liveSession(secretHash: String, kind: SessionSecretKind) async throws -> (account: UserAccount, session: UserAccount.Session) {
        let rows = try await database.query("""
            SELECT s.id, s.user_id FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id
            WHERE r.token_hash = \(secretHash) AND s.secret_kind = \(kind.rawValue)
            """)
        guard let row = rows.first else { throw AccountError.invalidToken }
        let account = try await read(try row.decode("user_id"))
        guard account.exists else { throw AccountError.notFound }
        guard !account.isDisabled else { throw AccountError.userDisabled }
        guard let session = account.sessions[try row.decode("id")], session.isActive else { throw AccountError.invalidToken }
        await SessionActivity.noteUse(of: session.id, in: database)
        return (account, session)
    }

    /// Whether a session may still be used by a token issued at `issuedAt`.
    ///
    /// `iat` has whole seconds and `valid_since` milliseconds, so a token is compared by the
    /// end of its second; revoke-all also ends every session, which catches the rest.
    public func isSessionActive(userId: UUID, sessionId: UUID, issuedAt: Date) async throws -> Bool {
        let rows = try await database.query("""
            SELECT 1 FROM sessions s JOIN users u ON u.id = s.user_id
            WHERE s.id = \(sessionId) AND s.user_id = \(userId) AND s.ended_at IS NULL AND NOT u.disabled
              AND (u.valid_since IS NULL OR u.valid_since <= \(ISO8601Milliseconds.format(issuedAt.addingTimeInterval(0.999)))::timestamptz)
            """)
        return !rows.isEmpty
    }

    // MARK: Mechanics

    /// Loads, decides and commits a command on one user, retrying on a version conflict.
    @discardableResult
    func change(
        _ userId: UUID, _ context: CommandContext, decide: @escaping @Sendable (UserAccount) throws -> [AccountEvent]
    ) async throws -> UserAccount {
        try await execute(userId, context) { (try decide($0), ()) }.account
    }

    /// The oldest user holding the email (column `id`).
    static func userWithEmail(_ normalized: String, seal: ReadModelSeal) throws -> PostgresQuery {
        "SELECT id FROM users WHERE email_normalized = \(try seal.seal(normalized)) ORDER BY created_at LIMIT 1"
    }

    /// Serialises commands about one email address for the rest of the transaction (taken before any user's lock).
    static func lockEmail(_ normalized: String) -> PostgresQuery {
        "SELECT pg_advisory_xact_lock(hashtextextended(\("email:" + normalized), 0))"
    }

    /// The read models' seal, which every command loads before its transaction (``retrying(_:)``).
    var readModels: ReadModelSeal {
        get throws { try database.loadedReadModelSeal() }
    }

    /// Re-runs `body` when it lost a race that fresh state resolves. Loads the read models' seal
    /// first, so that the statements stated inside the transaction can seal (``readModels``).
    func retrying<T>(_ body: (Int) async throws -> T) async throws -> T {
        _ = try await database.readModelSeal()
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await body(attempt)
            } catch is WrongExpectedVersion where attempt < Self.maxAttempts {
                continue
            } catch let error as PostgresError where (error.isUniqueViolation || error.isTransient) && attempt < Self.maxAttempts {
                continue
            }
        }
    }

    /// Turns the projection's unique constraints into the domain errors they stand for.
    private func mappingConstraints<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresError where error.isUniqueViolation {
            switch error.constraint {
            case "identities_provider_uid_key": throw AccountError.credentialAlreadyInUse
            case "identities_user_provider_key": throw AccountError.providerAlreadyLinked
            default: throw error
            }
        }
    }
}
