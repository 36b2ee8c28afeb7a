import Foundation
import TetherCore
import TetherCrypto
import TetherPostgres

/// A command's transaction on one user as two round trips on one connection job: the first begins
/// it, takes the user's lock and reads their stream and key; the second appends the events,
/// projects them and commits. Nothing computed in between is read back.
extension AccountService {
    /// What the first round trip read about the user a command is about.
    struct LoadedUser: Sendable {
        var account: UserAccount
        /// Whether the command being run already appended its events (a seed step run again).
        var isCommandRecorded: Bool
        /// The user's data key; nil once it was destroyed (an erased user) or when there is none yet.
        var key: [UInt8]?
        /// The key as stored and opened, kept with the state the command leaves.
        var keptKey: AccountStateCache.KeptKey?
        /// Whether `personal_data_keys` has a row for the user (a destroyed key keeps its row).
        var hasKeyRow: Bool
        /// The transaction's `now()`: the `occurred_at` of the events it appends.
        var now: Date
        /// The transaction's id: the `tx` of the events it appends.
        var transactionId: UInt64
        /// When the state as loaded is to be written as the user's snapshot (``AccountSnapshot``), the transaction
        /// of the stream's last event: the load folded it from the log (not from a kept state), and decoded so many
        /// events to get there.
        var snapshotTransaction: UInt64?

        /// A user about to be registered in the transaction that read `unknown` (no one, for its query).
        static func new(_ id: UUID, in unknown: Unknown) -> LoadedUser {
            LoadedUser(
                account: UserAccount(id: id), isCommandRecorded: false, key: nil, hasKeyRow: false, now: unknown.now,
                transactionId: unknown.transactionId)
        }
    }

    /// What the first round trip read when its query found no one: the transaction's clock and id.
    struct Unknown: Sendable {
        var now: Date
        var transactionId: UInt64
    }

    /// The user a command is about, in SQL: a query of at most one row whose `id` column is the user's id.
    /// Its other columns, if any, come back in the row of the statement that locks the user, for the command
    /// to read (a refresh's session, found with its user by one lookup of the token).
    struct UserRow: Sendable {
        let query: PostgresQuery
        /// Whether the query has columns of its own for the command (``row(_:)``).
        let hasColumns: Bool

        /// The user an SQL uuid expression names (NULL for no one), such as a lookup of an identity's owner.
        static func named(_ expression: PostgresQuery) -> UserRow {
            UserRow(query: "SELECT (\(expression))::uuid AS id", hasColumns: false)
        }

        /// The user of `id`.
        static func id(_ id: UUID) -> UserRow {
            named("\(id)")
        }

        /// The user of the row `query` finds, with its other columns; no row is no one. It must find one row at
        /// most (by a unique key: more fails the command), and end where a subquery may be closed: the statements
        /// wrap it in parentheses and add `OFFSET 0` (no `OFFSET`, `;` or comment of its own).
        static func row(_ query: PostgresQuery) -> UserRow {
            UserRow(query: query, hasColumns: true)
        }
    }

    /// Statements that lock the user `user` finds (its query is evaluated anew by each, and once in each:
    /// `OFFSET 0` keeps PostgreSQL from inlining a lookup at every use of the id), read their stream (only
    /// after `known`'s version when it names that user), and read their key, the stream's version, whether
    /// `commandId` is recorded already, the transaction's id and `now()`. The first answers the user's row
    /// (none for no one), with its other columns.
    /// Without `known` (or when the query finds someone else), only the stream's last `tail` events
    /// are read: ``loaded(from:known:in:)`` reads the rest when no state it keeps is among them.
    /// Decoded by ``loaded(from:known:in:)``.
    static func loadStatements(
        user: UserRow, known: AccountStateCache.Entry? = nil, commandId: UUID, tail: Int
    ) -> [PostgresQuery] {
        [
            """
            SELECT target.*, pg_advisory_xact_lock(hashtextextended('user-' || target.id::text, 0))
            FROM (\(user.query) OFFSET 0) AS target WHERE target.id IS NOT NULL
            """,
            PostgresEventStore.userStreamStatement(user: user.query, after: known.map { ($0.account.id, $0.account.version) }, tail: tail),
            """
            SELECT target.id AS user_id, k.key, k.user_id IS NOT NULL AS has_key_row,
                   (SELECT max(version) FROM events WHERE stream = 'user-' || target.id::text) AS stream_version,
                   (SELECT tx FROM events WHERE stream = 'user-' || target.id::text AND version = \(known?.account.version ?? 0)) AS known_tx,
                   EXISTS (SELECT 1 FROM events WHERE event_id = \(AccountEventCodec.eventID(command: commandId, index: 0))) AS recorded,
                   pg_current_xact_id() AS tx, now() AS now
            FROM (SELECT (SELECT found.id FROM (\(user.query)) AS found)::uuid AS id OFFSET 0) AS target
            LEFT JOIN personal_data_keys k ON k.user_id = target.id
            """,
        ]
    }

    /// The user the rows of ``loadStatements(user:known:commandId:tail:)`` describe; nil when its query found no one.
    ///
    /// The lock is taken by the first statement, and the stream is read by a later one (a later
    /// snapshot): every writer before is complete. A stream whose last writer's transaction id is
    /// above ours (one that did not take the lock) is a lost race: the command is re-decided. So is
    /// a kept state that does not lead to the stream's version: it is forgotten and the stream read whole.
    /// The earlier events a read of the stream's last ones left out are read in `transaction` when needed.
    func loaded(
        from rows: some Collection<PostgresRows>, known: AccountStateCache.Entry?, in transaction: TransactionJob
    ) throws -> (user: LoadedUser?, unknown: Unknown) {
        let rows = Array(rows)
        let head = rows[2][0]
        let now: Date = try head.decode("now")
        let ourTransaction: UInt64 = try head.decode("tx")
        let unknown = Unknown(now: now, transactionId: ourTransaction)
        // Each statement evaluates the user's query anew: if it found someone else (or no one) when the
        // lock was taken, an identity changed hands in between, and the lock does not cover this user.
        let lockedId: UUID? = try rows[0].first?.decode("id")
        let userId: UUID? = try head.decode("user_id")
        if lockedId != userId, let changed = userId ?? lockedId {
            throw WrongExpectedVersion(stream: .user(changed), expected: .any, actual: -1)
        }
        guard let userId else { return (nil, unknown) }
        let stream = StreamName.user(userId)
        // The key a hinted state kept, when the stored key is the one it was opened from.
        let keptKey = try AccountStateCache.KeptKey.opening(
            try head.decode("key"), of: userId, kept: known?.account.id == userId ? known?.key : nil,
            masterKeys: database.configuration.masterKeys)
        let key = keptKey?.opened
        let streamVersion: Int = try head.decode("stream_version", as: Int?.self) ?? 0
        // The state the stream was read after; or, when no hint named this user (only the stream's last events
        // were read), the state kept of the user by id, when the stream goes on from it: its last event is the
        // log's at that version, by the transaction that wrote it (a log put back and written again since is
        // not), and the rows it already holds, those up to it in the stream's version order, are not decoded.
        // When that event is not among the rows read, a third round trip reads the user's snapshot and the
        // earlier events from the later of its version and the kept state's (``AccountSnapshot``): for a user
        // whose state is not kept and whose stream is longer than the tail.
        var base: AccountStateCache.Entry?
        var streamRows = Array(rows[1])
        // Whether the state folded here starts from a snapshot (or nothing) rather than a state the cache keeps.
        var isNewToTheCache = false
        if let known, known.account.id == userId {
            // The state a hint found holds the stream up to its version: when the log's event there was written
            // by another transaction than the one the state last saw, the log was put back and written again
            // since, and the command is decided again without the hint. (The empty state of an id that named
            // no user, version 0, holds no event: any stream goes on from it.)
            let knownTransaction = try head.decode("known_tx", as: UInt64?.self)
            guard known.account.version == 0 || knownTransaction == known.lastTransaction else {
                cache.forget(userId)
                throw WrongExpectedVersion(stream: stream, expected: .exact(known.account.version), actual: streamVersion)
            }
            base = known
        } else {
            // If neither leads to the rows read then, the whole stream is read (a fourth round trip, and a rare one).
            let kept = cache.entry(for: userId)
            var held = try Self.rows(heldBy: kept, in: streamRows).map { (entry: kept, rows: $0, isKept: true) }
            if held == nil, let first = try Self.firstVersion(of: streamRows), first > 1 {
                let read = try transaction.read(AccountSnapshot.readStatements(userId, before: first, keptVersion: kept?.account.version))
                let snapshot = key.flatMap { AccountSnapshot.opened(from: read[0], of: userId, key: $0) }
                streamRows = Array(read[1]) + streamRows
                held = try Self.latest(heldOf: kept, snapshot, in: streamRows)
                if held == nil, let earliest = try Self.firstVersion(of: streamRows), earliest > 1 {
                    streamRows = Array(try transaction.read([PostgresEventStore.userStreamStatement(userId, before: earliest)])[0]) + streamRows
                    held = try Self.latest(heldOf: kept, snapshot, in: streamRows)
                }
                if held == nil, !read[0].isEmpty { cache.loads.snapshotsPassedOver.add(1, ordering: .relaxed) }
            }
            if let held {
                base = held.entry
                streamRows.removeFirst(held.rows)
            }
            if held?.isKept != true {
                isNewToTheCache = true
                // A kept state the stream does not go on from (when there is one) is ahead of the log, or of a
                // log written again since (a database put back). Kept, it would refuse the state folded here
                // (``AccountStateCache/store(_:hints:)`` keeps the later version).
                if kept != nil { cache.forget(userId) }
            }
        }
        let recorded = try store.decode(streamRows, keys: key.map { [userId: $0] } ?? [:])
        let baseVersion = base?.account.version ?? 0
        guard recorded.allSatisfy({ $0.stream == stream }), recorded.first.map({ $0.version == baseVersion + 1 }) ?? true,
              (recorded.last?.version ?? baseVersion) == streamVersion
        else {
            cache.forget(userId)
            throw WrongExpectedVersion(stream: stream, expected: .exact(baseVersion), actual: streamVersion)
        }
        let lastTransaction = recorded.last?.transactionId ?? base?.lastTransaction ?? 0
        if lastTransaction > ourTransaction {
            throw WrongExpectedVersion(stream: stream, expected: .exact(streamVersion), actual: streamVersion)
        }
        let history = try recorded.compactMap { event -> (event: AccountEvent, at: Date)? in
            try AccountEventCodec.decode(event).map { ($0, event.occurredAt) }
        }
        let account = (base?.account ?? UserAccount(id: userId)).appending(history, version: streamVersion)
        cache.loads.count(!isNewToTheCache ? .kept : base == nil ? .log : .snapshot)
        if !recorded.isEmpty || isNewToTheCache {
            cache.store(.init(account: account, lastTransaction: lastTransaction, key: account.isErased ? nil : keptKey))
        }
        // A state the load folded from the log alone: a kept one may hold what a command decided with more
        // precision than its events store (their dates are stored to the millisecond).
        let isSnapshotDue = isNewToTheCache && recorded.count >= snapshotInterval
        return (LoadedUser(
            account: account, isCommandRecorded: try head.decode("recorded"), key: key, keptKey: keptKey,
            hasKeyRow: try head.decode("has_key_row"), now: now, transactionId: ourTransaction,
            snapshotTransaction: isSnapshotDue ? lastTransaction : nil), unknown)
    }

    /// The version of the first of `rows` (a stream's, in version order); nil when there are none.
    private static func firstVersion(of rows: [PostgresRow]) throws -> Int? {
        try rows.first?.decode("version", as: Int.self)
    }

    /// Of the kept state and the snapshot, the one of the later version that holds some of `stream`'s rows, with how many.
    private static func latest(
        heldOf kept: AccountStateCache.Entry?, _ snapshot: AccountStateCache.Entry?, in stream: [PostgresRow]
    ) throws -> (entry: AccountStateCache.Entry?, rows: Int, isKept: Bool)? {
        let ofKept = try rows(heldBy: kept, in: stream), ofSnapshot = try rows(heldBy: snapshot, in: stream)
        if let ofKept, ofKept >= ofSnapshot ?? 0 { return (kept, ofKept, true) }
        return ofSnapshot.map { (snapshot, $0, false) }
    }

    /// How many of `rows` (a stream's, in version order) the state `kept` holds: those up to its version, when
    /// the row at its version was written by the transaction the state last saw. Nil when it holds none of them.
    private static func rows(heldBy kept: AccountStateCache.Entry?, in rows: [PostgresRow]) throws -> Int? {
        guard let kept, let last = try rows.firstIndex(where: { try $0.decode("version", as: Int.self) == kept.account.version }),
              try rows[last].decode("tx", as: UInt64.self) == kept.lastTransaction
        else { return nil }
        return last + 1
    }

    /// The statements that append `events` to the user's stream and project them, for the commit's round trip.
    ///
    /// A user without a key row gets a new key in the same statements; a concurrent writer that made
    /// one first fails them on the key's primary key, and the command is re-decided on fresh state.
    func writeStatements(_ user: LoadedUser, _ events: [AccountEvent], _ context: CommandContext) throws -> [PostgresQuery] {
        let id = user.account.id
        var statements: [PostgresQuery] = []
        var key = user.key
        if !user.hasKeyRow {
            let made = try PersonalDataVault.newKey(for: id, masterKeys: database.configuration.masterKeys)
            statements.append("INSERT INTO personal_data_keys (user_id, key) VALUES (\(id), \(made.stored))")
            key = made.key
        }
        let newEvents = try events.enumerated().map { index, event in
            try AccountEventCodec.encode(event, userId: id, id: AccountEventCodec.eventID(command: context.commandId, index: index))
        }
        statements.append(try store.appendStatement(
            newEvents, to: .user(id), after: user.account.version, metadata: context.metadata, userKey: key))
        statements += try AccountProjection.statements(
            for: events, userId: id, at: "now()", recordingVersion: user.account.version + events.count, seal: try readModels)
        // Grants the events end (an identity unlinked, the user erased) are revoked at their providers by
        // the outbox, whose rows commit with the events.
        statements += try ProviderCallOutbox.insertStatements(
            for: user.account.grantsEnded(by: events), userId: id, masterKeys: database.configuration.masterKeys)
        return statements
    }

    /// Commits `events` on `user` in `transaction`'s last round trip; answers the user's state after them.
    ///
    /// The state is kept under `hints`, and under the refresh token of each session the events start whose
    /// token rotates: a session's first refresh finds it as its later ones do. (Without, that first refresh
    /// read the user's whole stream again: about 16 ms of CPU for a user with 1,300 events.)
    func commit(
        _ events: [AccountEvent], on user: LoadedUser, _ context: CommandContext, writingAfter: [PostgresQuery] = [],
        hints: [AccountStateCache.Hint] = [], in transaction: TransactionJob
    ) throws -> UserAccount {
        guard !events.isEmpty else { return user.account }
        let account = user.account.appending(events.map { ($0, user.now) }, version: user.account.version + events.count)
        var snapshot: [PostgresQuery] = []
        if let lastTransaction = user.snapshotTransaction, let key = user.key, !account.isErased {
            snapshot.append(try AccountSnapshot.writeStatement(user.account, lastTransaction: lastTransaction, key: key))
        }
        try transaction.commit(PostgresQuery.combiningWrites(try writeStatements(user, events, context) + snapshot + writingAfter))
        cache.loads.snapshotsWritten.add(snapshot.count, ordering: .relaxed)
        let started = events.compactMap { event -> AccountStateCache.Hint? in
            guard case .sessionStarted(let session) = event, session.secretKind.rotates else { return nil }
            return AccountStateCache.hint(refreshTokenHash: session.refreshTokenHash)
        }
        // An erased user's key is destroyed with the erasure: the state left is kept without it.
        cache.store(.init(account: account, lastTransaction: user.transactionId, key: account.isErased ? nil : user.keptKey),
                    hints: hints + started)
        return account
    }

    /// Loads, decides and commits a command on one user in two round trips, retrying a lost race.
    ///
    /// `decide` answers the events and what the caller gets; its events are committed with the state after them.
    func execute<T: Sendable>(
        _ userId: UUID, _ context: CommandContext,
        decide: @escaping @Sendable (UserAccount) throws -> (events: [AccountEvent], result: T)
    ) async throws -> (account: UserAccount, result: T) {
        try await execute(user: .id(userId), known: { cache.entry(for: userId) }, context) { account, _ in try decide(account) }
    }

    /// Like ``execute(_:_:decide:)`` for the user `user` finds; `reads` run first in the same round trip, and
    /// their rows go to `decide`, followed, for a ``UserRow/row(_:)`` query, by the user's row as locked
    /// (with its other columns); `writingAfter` runs after the
    /// events' writes, in the commit's round trip. `known` answers the kept state the user may have;
    /// `hints` name the user in the cache afterwards.
    /// With `allowingErased`, an erased user's stream takes the events too (the outbox's records of calls
    /// an erasure caused; stored without personal data, the key being gone).
    func execute<T: Sendable>(
        user: UserRow, known: @escaping @Sendable () -> AccountStateCache.Entry? = { nil }, reads: [PostgresQuery] = [],
        writingAfter: [PostgresQuery] = [], hints: [AccountStateCache.Hint] = [], allowingErased: Bool = false, _ context: CommandContext,
        decide: @escaping @Sendable (UserAccount, [PostgresRows]) throws -> (events: [AccountEvent], result: T)
    ) async throws -> (account: UserAccount, result: T) {
        try await retrying { _ in
            try await database.withTransactionJob { transaction in
                let kept = known()
                let rows = try transaction.begin(
                    reads + Self.loadStatements(user: user, known: kept, commandId: context.commandId, tail: streamTail))
                guard let loaded = try loaded(from: rows.suffix(3), known: kept, in: transaction).user,
                      loaded.account.exists || (allowingErased && loaded.account.isErased) else {
                    throw AccountError.notFound
                }
                let decision = try decide(loaded.account, Array(rows.prefix(reads.count + (user.hasColumns ? 1 : 0))))
                if loaded.isCommandRecorded { return (loaded.account, decision.result) }
                return (try commit(decision.events, on: loaded, context, writingAfter: writingAfter, hints: hints, in: transaction),
                        decision.result)
            }
        }
    }

    /// The user as their stream says now, read in one round trip (a transaction of its own, under their lock).
    /// A kept state the log no longer holds is forgotten, and the user read again from the log.
    public func read(_ userId: UUID) async throws -> UserAccount {
        try await retrying { _ in
            try await database.withTransactionJob { transaction in
                let kept = cache.entry(for: userId)
                let rows = try transaction.runAlone(
                    Self.loadStatements(user: .id(userId), known: kept, commandId: UUID.random(), tail: streamTail))
                guard let loaded = try loaded(from: rows, known: kept, in: transaction).user else {
                    throw AccountError.notFound
                }
                return loaded.account
            }
        }
    }
}
