import Foundation
import TetherCore
import TetherCrypto
import TetherJOSE

/// The append-only event log in PostgreSQL's `events` table.
///
/// Appends run in the caller's transaction when one is given, so projections
/// written in the same transaction commit or roll back with the events. The
/// command layer batches its appends into its own round trips through
/// ``appendStatement(_:to:after:metadata:userKey:)`` and ``userStreamStatement(user:after:tail:)``:
/// its seam is the transaction it runs (``TransactionJob``), so the log has no
/// protocol of its own (one implementation, nothing outside this machine to stand in for).
public struct PostgresEventStore: Sendable {
    /// The pool appends and reads go through when no connection is given.
    public let client: PostgresClient
    /// Rewrites old payload schemas on every read.
    public let upcasters: UpcasterChain

    /// Rows inserted per statement; keeps bind parameters far below PostgreSQL's 65,535.
    static let insertBatchSize = 500

    public init(client: PostgresClient, upcasters: UpcasterChain = UpcasterChain()) {
        self.client = client
        self.upcasters = upcasters
    }

    @discardableResult
    public func append(
        _ events: [NewEvent], to stream: StreamName, expected: ExpectedVersion, metadata: EventMetadata
    ) async throws -> AppendResult {
        try await client.withTransaction { connection in
            try await append(events, to: stream, expected: expected, metadata: metadata, on: connection)
        }
    }

    /// Appends inside the transaction open on `connection`.
    ///
    /// Throws ``WrongExpectedVersion`` when the stream is not at `expected`
    /// (including when a concurrent writer won the race for the same version).
    /// When the first event's id is already stored, nothing is written and the
    /// original append's result is returned, so a retried command has one effect.
    ///
    /// Events about no known person that keep something personal are sealed with today's key of their
    /// ``ExpiringKeys/Purpose``: from `expiringKeys` when the caller fetched it in this transaction
    /// already, otherwise fetched here.
    @discardableResult
    public func append(
        _ events: [NewEvent], to stream: StreamName, expected: ExpectedVersion, metadata: EventMetadata,
        expiringKeys: [ExpiringKeys.Purpose: ExpiringKeys.Key] = [:], on connection: PostgresConnection
    ) async throws -> AppendResult {
        guard !events.isEmpty else {
            let version = try await currentVersion(of: stream, on: connection).version
            guard expected.isSatisfied(by: version) else {
                throw WrongExpectedVersion(stream: stream, expected: expected, actual: version)
            }
            return AppendResult(firstPosition: 0, lastPosition: 0, streamVersion: version, wasAlreadyAppended: false)
        }
        let current = try await currentVersion(of: stream, on: connection)
        guard expected.isSatisfied(by: current.version) else {
            // A repeated append finds the stream past its expectation; only then is it worth
            // looking for the first append's events (the common path saves that query).
            if let earlier = try await earlierAppend(of: events, on: connection) {
                return earlier
            }
            throw WrongExpectedVersion(stream: stream, expected: expected, actual: current.version)
        }
        // What an event says about its user is sealed with that user's key (PersonalDataVault).
        var keys: [UUID: [UInt8]] = [:]
        for userId in Set(events.compactMap(\.userId)) {
            keys[userId] = try await PersonalDataVault.key(for: userId, on: connection, masterKeys: client.configuration.masterKeys) ?? nil
        }
        var expiring = expiringKeys
        for purpose in Self.expiringPurposes(of: events) where expiring[purpose] == nil {
            expiring[purpose] = try await ExpiringKeys.key(purpose, on: connection, masterKeys: client.configuration.masterKeys)
        }
        try await connection.execute(simple: "SAVEPOINT tether_append")
        do {
            var positions: [(position: Int64, tx: UInt64)] = []
            positions.reserveCapacity(events.count)
            var version = current.version
            for batch in events.chunked(by: Self.insertBatchSize) {
                var insert = try Self.insert(batch, to: stream, after: version, metadata: metadata, keys: keys, expiringKeys: expiring)
                version += batch.count
                insert.append(" RETURNING position, tx")
                for row in try await connection.query(insert) {
                    positions.append((try row.decode("position"), try row.decode("tx")))
                }
            }
            // The log is read in (tx, position) order; a transaction that took its id
            // before the previous version's writer must not append after it.
            if let previousTx = current.transactionId, let ours = positions.first?.tx, ours < previousTx {
                throw WrongExpectedVersion(stream: stream, expected: expected, actual: current.version)
            }
            try await connection.execute(simple: "RELEASE SAVEPOINT tether_append")
            return AppendResult(
                firstPosition: positions.first!.position, lastPosition: positions.last!.position,
                streamVersion: version, wasAlreadyAppended: false)
        } catch let error as PostgresError where error.isUniqueViolation {
            try await connection.execute(simple: "ROLLBACK TO SAVEPOINT tether_append")
            // A concurrent retry of the same command may trip either unique index first
            // (event id, or stream and version): once it has committed, its events are visible here.
            if let earlier = try await earlierAppend(of: events, on: connection) {
                return earlier
            }
            let actual = try await currentVersion(of: stream, on: connection).version
            throw WrongExpectedVersion(stream: stream, expected: expected, actual: actual)
        } catch {
            if !connection.isBroken {
                try? await connection.execute(simple: "ROLLBACK TO SAVEPOINT tether_append")
            }
            throw error
        }
    }

    /// Appends `events` at the end of `stream`, whatever its version, in one transaction of two
    /// round trips on the connection's thread: the stream's advisory lock, its version and the
    /// user's key, then the insert and the commit (three, once, for a user with no key yet). For
    /// streams whose every writer takes that lock (an admin key's records of requests), so no
    /// version is lost to a race and the transaction order follows the version order. The events
    /// may name one user at most.
    ///
    /// - Throws: ``AppendAtEndError`` for no events, events about more than one user, or more than
    ///   one multi-row insert holds.
    public func appendAtEnd(_ events: [NewEvent], to stream: StreamName, metadata: EventMetadata) async throws {
        let userIds = Set(events.compactMap(\.userId))
        guard !events.isEmpty, userIds.count <= 1 else { throw AppendAtEndError(count: events.count, users: userIds.count) }
        try await appendAtEnd(to: stream, about: userIds.first, metadata: metadata, sealing: Self.expiringPurposes(of: events)) { _ in
            (events, ())
        }
    }

    /// The ``ExpiringKeys`` purposes whose keys `events` are sealed with.
    public static func expiringPurposes(of events: [NewEvent]) -> Set<ExpiringKeys.Purpose> {
        Set(events.lazy.filter { $0.userId == nil }.compactMap { ExpiringKeys.purpose(forUnattributed: $0.type) })
    }

    /// Like ``appendAtEnd(_:to:metadata:)``, for events decided from `reads`: statements run in the same
    /// transaction, after the locks and in the same first round trip, whose rows `decide` turns into the
    /// events (about `userId` only, or no one; none writes nothing) and the caller's result. The commit is the second round
    /// trip (the third, once, for a user with no key yet: the key is made between the two).
    ///
    /// `decide` runs on the connection, between the two round trips: it must not block on anything else.
    /// Events about no one are sealed with today's ``ExpiringKeys`` key of their purpose when it is in
    /// `sealing` (fetched in the first round trip), and are stored as erased otherwise.
    public func appendAtEnd<T: Sendable>(
        to stream: StreamName, about userId: UUID?, metadata: EventMetadata, reading reads: [PostgresQuery] = [],
        sealing purposes: Set<ExpiringKeys.Purpose> = [],
        decide: @escaping @Sendable (ArraySlice<PostgresRows>) throws -> (events: [NewEvent], result: T)
    ) async throws -> T {
        let locks = Self.lockStatements(for: stream, users: userId.map { [$0] } ?? [])
        let masterKeys = client.configuration.masterKeys
        return try await client.withTransactionJob { transaction in
            var statements = locks
            statements.append("SELECT coalesce(max(version), 0) AS version FROM events WHERE stream = \(stream.rawValue)")
            if let userId { statements.append(PersonalDataVault.keyStatement(of: userId)) }
            let userKeyIndex = statements.count - 1
            var expiringIndexes: [(purpose: ExpiringKeys.Purpose, name: String, index: Int)] = []
            for purpose in purposes.sorted(by: { $0.rawValue < $1.rawValue }) {
                let (name, keyStatements) = try ExpiringKeys.keyStatements(purpose, now: Date(), masterKeys: masterKeys)
                statements += keyStatements
                expiringIndexes.append((purpose, name, statements.count - 1))
            }
            let internalCount = statements.count
            let rows = try transaction.begin(statements + reads)
            let version: Int = try rows[locks.count][0].decode("version")
            var expiring: [ExpiringKeys.Purpose: ExpiringKeys.Key] = [:]
            for entry in expiringIndexes {
                expiring[entry.purpose] = try ExpiringKeys.key(from: rows[entry.index], named: entry.name, masterKeys: masterKeys)
            }
            let (events, result) = try decide(rows[internalCount...])
            // Nothing decided, nothing written: the transaction ends with what it read.
            if events.isEmpty {
                try transaction.commit([])
                return result
            }
            let named = Set(events.compactMap(\.userId))
            guard events.count <= Self.insertBatchSize, named.isSubset(of: userId.map { [$0] } ?? []) else {
                throw AppendAtEndError(count: events.count, users: named.count)
            }
            let key = try userId.flatMap { userId -> [UInt8]? in
                // Only an event about the user needs their key (a record about an id no user has does not make one);
                // their first such event makes it: one more round trip, once.
                guard named.contains(userId) else { return nil }
                let keyRows = rows[userKeyIndex].isEmpty
                    ? try transaction.run(try PersonalDataVault.keyStatements(for: userId, masterKeys: masterKeys)).last!
                    : rows[userKeyIndex]
                return try PersonalDataVault.key(from: keyRows, of: userId, masterKeys: masterKeys)
            }
            let userKeys = Dictionary(events.compactMap { event in event.userId.flatMap { id in key.map { (id, $0) } } }) { first, _ in first }
            try transaction.commit([
                try Self.insert(events[...], to: stream, after: version, metadata: metadata, keys: userKeys, expiringKeys: expiring),
            ])
            return result
        }
    }

    /// The transaction-scoped advisory lock that writers of `stream` queue on.
    public static func streamLockStatement(_ stream: StreamName) -> PostgresQuery {
        "SELECT pg_advisory_xact_lock(hashtextextended(\(stream.rawValue), 0))"
    }

    /// The locks a writer of `events` to `stream` takes before anything else and holds to its commit:
    /// the stream's own, then the stream lock of each user the events are about (in id order).
    ///
    /// A user's own commands hold that lock too, so every event about a user is written under it:
    /// the user's events become visible in position order, and a history read by position never
    /// passes an event that commits later. (Positions are taken at insert and seen at commit; two
    /// writers of one user's events without a common lock could commit out of position order.)
    public static func lockStatements(for stream: StreamName, events: [NewEvent]) -> [PostgresQuery] {
        lockStatements(for: stream, users: Set(events.compactMap(\.userId)))
    }

    /// ``lockStatements(for:events:)`` for events about `users`.
    static func lockStatements(for stream: StreamName, users: Set<UUID>) -> [PostgresQuery] {
        let streams = users.map(StreamName.user).filter { $0 != stream }
        return [streamLockStatement(stream)] + streams.sorted { $0.rawValue < $1.rawValue }.map(streamLockStatement)
    }

    /// The statement that appends `events` to `stream` after `version`, inside a transaction that
    /// holds the stream's lock and read it at that version; personal parts are sealed with
    /// `userKey`, or left out when the user's key was destroyed (nil). For a caller that
    /// batches it with other statements; a version taken meanwhile fails it as a unique violation.
    public func appendStatement(
        _ events: [NewEvent], to stream: StreamName, after version: Int, metadata: EventMetadata, userKey: [UInt8]?
    ) throws -> PostgresQuery {
        let keys = Dictionary(events.compactMap { event in event.userId.flatMap { id in userKey.map { (id, $0) } } }) { first, _ in first }
        return try Self.insert(events[...], to: stream, after: version, metadata: metadata, keys: keys, expiringKeys: [:])
    }

    /// One multi-row INSERT of `events` at the versions after `version`, sealed with the keys of their users
    /// (events about no one, with the `expiringKeys` of their purposes; without one, they are stored as erased).
    private static func insert(
        _ events: ArraySlice<NewEvent>, to stream: StreamName, after version: Int, metadata: EventMetadata, keys: [UUID: [UInt8]],
        expiringKeys: [ExpiringKeys.Purpose: ExpiringKeys.Key]
    ) throws -> PostgresQuery {
        var insert: PostgresQuery =
            "INSERT INTO events (stream, version, event_id, type, schema, data, metadata, user_id) VALUES "
        // A command's events share their metadata: a stored form like the last one's is not written again.
        var lastMetadata: (metadata: EventMetadata, json: PostgresJSON)?
        for (offset, event) in events.enumerated() {
            let stored: (data: Data, metadata: EventMetadata)
            if let userId = event.userId {
                // No key for a user who has one is a destroyed key: the user was erased.
                stored = try keys[userId].map { try PersonalDataVault.seal(event, metadata: metadata, key: $0) }
                    ?? PersonalDataVault.strip(event, metadata: metadata)
            } else if let purpose = ExpiringKeys.purpose(forUnattributed: event.type) {
                stored = try expiringKeys[purpose].map { try PersonalDataVault.seal(event, metadata: metadata, key: $0.bytes, expiringKey: $0.name) }
                    ?? PersonalDataVault.strip(event, metadata: metadata)
            } else {
                stored = (event.data, metadata)
            }
            let storedMetadata = lastMetadata?.metadata == stored.metadata ? lastMetadata!.json : PostgresJSON(writing: stored.metadata)
            lastMetadata = (stored.metadata, storedMetadata)
            let row: PostgresQuery = """
                (\(stream.rawValue), \(version + offset + 1), \(event.id), \(event.type), \(event.schema), \
                \(PostgresJSON(data: stored.data))::jsonb, \(storedMetadata)::jsonb, \(event.userId))
                """
            insert.append(offset == 0 ? row : ", \(row)")
        }
        return insert
    }

    /// The result of an earlier append of the same events, if their ids are stored.
    private func earlierAppend(of events: [NewEvent], on connection: PostgresConnection) async throws -> AppendResult? {
        let ids = PostgresArray(events.map(\.id))
        let rows = try await connection.query("""
            SELECT min(position) AS first, max(position) AS last, max(version) AS version, count(*) AS found
            FROM events WHERE event_id = ANY(\(ids)::uuid[])
            """)
        let found: Int = try rows[0].decode("found")
        guard found > 0 else { return nil }
        return AppendResult(
            firstPosition: try rows[0].decode("first"), lastPosition: try rows[0].decode("last"),
            streamVersion: try rows[0].decode("version"), wasAlreadyAppended: true)
    }

    private func currentVersion(
        of stream: StreamName, on connection: PostgresConnection
    ) async throws -> (version: Int, transactionId: UInt64?) {
        let rows = try await connection.query("""
            SELECT version, tx FROM events WHERE stream = \(stream.rawValue) ORDER BY version DESC LIMIT 1
            """)
        guard let row = rows.first else { return (0, nil) }
        return (try row.decode("version"), try row.decode("tx"))
    }

    public func readStream(_ stream: StreamName, after version: Int) async throws -> [RecordedEvent] {
        try await client.withConnection { try await readStream(stream, after: version, on: $0) }
    }

    /// Reads one stream on `connection` (inside the caller's transaction, if any).
    public func readStream(
        _ stream: StreamName, after version: Int, on connection: PostgresConnection
    ) async throws -> [RecordedEvent] {
        let rows = try await connection.query("""
            SELECT \(unsafeSQL: Self.columns) FROM events
            WHERE stream = \(stream.rawValue) AND version > \(version) ORDER BY version
            """)
        return try await decode(rows) { try await connection.query($0) }
    }

    /// Reads the whole log after `checkpoint` in `(tx, position)` order.
    ///
    /// Only transactions older than the oldest one still running are read
    /// (`tx < pg_snapshot_xmin(pg_current_snapshot())`): every later commit has a
    /// larger `tx`, so nothing before the returned checkpoint can still appear.
    public func readAll(after checkpoint: LogCheckpoint, limit: Int) async throws -> [RecordedEvent] {
        let rows = try await client.query("""
            SELECT \(unsafeSQL: Self.columns) FROM events
            WHERE (tx, position) > (\(checkpoint.transactionId)::xid8, \(checkpoint.position)::bigint)
              AND tx < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY tx, position
            LIMIT \(limit)
            """)
        return try await decode(rows) { try await client.query($0) }
    }

    /// A page of the log for a reader that follows it (the event feed, webhooks): events of `types`
    /// (of `userId`'s, when given) after `checkpoint` in `(tx, position)` order, and the checkpoint to
    /// read on from.
    ///
    /// Gap-safe: only transactions below ``followingHorizon()`` are read, so an event whose transaction
    /// is still open comes on a later page, never skipped. When the page is not full, every event below
    /// that horizon has been looked at, so the checkpoint moves to the last of them (matched or not)
    /// and the next page does not scan them again.
    public func follow(
        after checkpoint: LogCheckpoint, types: [String], userId: UUID?, limit: Int
    ) async throws -> (events: [RecordedEvent], next: LogCheckpoint) {
        let horizon = try await followingHorizon()
        let after: PostgresQuery = """
            (tx, position) > (\(checkpoint.transactionId)::xid8, \(checkpoint.position)::bigint) AND tx < \(horizon)::xid8
            """
        let user: PostgresQuery = userId.map { "AND user_id = \($0)" } ?? ""
        let rows = try await client.query("""
            SELECT \(unsafeSQL: Self.columns) FROM events
            WHERE \(after) AND type = ANY(\(PostgresArray(types))::text[]) \(user)
            ORDER BY tx, position LIMIT \(limit)
            """)
        let events = try await decode(rows) { try await client.query($0) }
        if let last = events.last, events.count == limit {
            return (events, LogCheckpoint(transactionId: last.transactionId, position: last.position))
        }
        let end = try await client.query("SELECT tx, position FROM events WHERE \(after) ORDER BY tx DESC, position DESC LIMIT 1")
        guard let row = end.first else { return (events, checkpoint) }
        return (events, LogCheckpoint(transactionId: try row.decode("tx"), position: try row.decode("position")))
    }

    /// Whether the log holds an event at or past `checkpoint`. A reader's checkpoint past the newest event (another
    /// database's, or made up) would wait for events that never come, and show no lag while it did.
    public func reaches(_ checkpoint: LogCheckpoint) async throws -> Bool {
        if checkpoint == .start { return true }
        return try await !client.query("""
            SELECT 1 AS found FROM events WHERE (tx, position) >= (\(checkpoint.transactionId)::xid8, \(checkpoint.position)::bigint) LIMIT 1
            """).isEmpty
    }

    /// The checkpoint after every event below ``followingHorizon()``: where a reader that wants only what
    /// happens from now on starts.
    public func followingCheckpoint() async throws -> LogCheckpoint {
        let horizon = try await followingHorizon()
        let rows = try await client.query("""
            SELECT tx, position FROM events WHERE tx < \(horizon)::xid8 ORDER BY tx DESC, position DESC LIMIT 1
            """)
        guard let row = rows.first else { return .start }
        return LogCheckpoint(transactionId: try row.decode("tx"), position: try row.decode("position"))
    }

    /// The oldest transaction that may still commit an event of this database: every event with a
    /// smaller `tx` that will ever be visible is visible now.
    ///
    /// Unlike the snapshot's `xmin`, which is the oldest writer of the whole cluster, it counts only
    /// writers of this database, so a long transaction in another database of the same server does not
    /// hold followers back. The snapshot is taken first; the writers of this database are read after
    /// it (`pg_stat_activity`, whose `backend_xid` every role may see, and `pg_prepared_xacts`): any of
    /// the snapshot's running transactions still running then shows there with its database, and any
    /// that has ended since has committed or aborted, which a later read sees.
    ///
    /// On a standby (a read replica) the writers run on the primary, where `pg_stat_activity` cannot
    /// be seen: the horizon is then the snapshot's `xmin`, the oldest transaction the primary's
    /// records say is running, in any database.
    public func followingHorizon() async throws -> UInt64 {
        let snapshot = try await client.query("""
            SELECT pg_snapshot_xmax(s)::text AS xmax, array_to_string(ARRAY(SELECT pg_snapshot_xip(s)), ',') AS running,
                   pg_snapshot_xmin(s)::text AS xmin, pg_is_in_recovery() AS standby
            FROM (SELECT pg_current_snapshot() AS s) AS q
            """)[0]
        // A snapshot taken during recovery lists no running transactions (it keeps them apart), but its xmin holds.
        if try snapshot.decode("standby", as: Bool.self) { return try snapshot.decode("xmin") }
        let xmax: UInt64 = try snapshot.decode("xmax")
        let running = try snapshot.decode("running", as: String.self).split(separator: ",").compactMap { UInt64($0) }
        guard !running.isEmpty else { return xmax }
        let writers = try await client.query("""
            SELECT backend_xid::text AS xid FROM pg_stat_activity WHERE datname = current_database() AND backend_xid IS NOT NULL
            UNION ALL SELECT transaction::text FROM pg_prepared_xacts WHERE database = current_database()
            """)
        // `backend_xid` is the 32-bit xid: a running transaction's xid8 is the one whose low 32 bits match.
        let here = Set(try writers.compactMap { UInt32(try $0.decode("xid", as: String.self)) })
        return running.filter { here.contains(UInt32(truncatingIfNeeded: $0)) }.min() ?? xmax
    }

    /// How far a reader of the whole log may go.
    public enum LogHorizon: Sendable {
        /// Only transactions older than the oldest one still running: safe while others write.
        case belowOldestRunningTransaction
        /// Everything committed. Only gap-free while no writer can commit an event the
        /// reader wants, as when `tether replay` holds the ``ProjectionGate`` exclusively.
        case everythingCommitted
    }

    /// One page of the log as ``readAll(after:limit:categories:horizon:withMetadata:on:)`` and
    /// ``readByUser(after:users:below:limit:categories:leavingSealed:leavingData:withMetadata:on:)`` read it.
    ///
    /// The statement pages through an index with nothing but its key range, so that PostgreSQL walks the
    /// index and stops at the limit: a filter the planner cannot estimate (the stream's category is an
    /// expression) made it scan and sort everything after the cursor for every page instead. The rows of
    /// other categories (and, by user, of transactions at or past the horizon) are dropped here, before
    /// they are decoded; `last` and `isFull` count them, so the next page starts after them.
    public struct LogPage: Sendable {
        /// The page's events of the asked categories, decoded and upcast.
        public var recorded: [RecordedEvent]
        /// The text of each event's `occurred_at`, at its index in `recorded`.
        public var occurredAt: [String]
        /// The events, each with the text of its `occurred_at` (made at each use: a reader of every
        /// event reads the two arrays instead, copying no event).
        public var events: [(event: RecordedEvent, occurredAt: String)] {
            zip(recorded, occurredAt).map { (event: $0, occurredAt: $1) }
        }
        /// Whether the statement returned as many rows as its limit: more may follow.
        public var isFull: Bool
        /// The key of the last row the statement returned, kept or dropped: where the next page starts.
        public var last: (userId: UUID?, checkpoint: LogCheckpoint)?
    }

    /// Reads the log after `checkpoint` on `connection`, in `(tx, position)` order, with
    /// each event's `occurred_at` as PostgreSQL prints it (projections store that text,
    /// so a rebuild writes identical timestamps).
    ///
    /// `categories` keeps only streams whose name before the first `-` is listed
    /// (`user` for `user-<id>`). Upcasters run on every event.
    public func readAll(
        after checkpoint: LogCheckpoint, limit: Int, categories: [String], horizon: LogHorizon, withMetadata: Bool = true,
        on connection: PostgresConnection
    ) async throws -> LogPage {
        let visible: PostgresQuery = switch horizon {
        case .belowOldestRunningTransaction: "AND tx < pg_snapshot_xmin(pg_current_snapshot())"
        case .everythingCommitted: ""
        }
        return try await readPage("""
            WHERE (tx, position) > (\(checkpoint.transactionId)::xid8, \(checkpoint.position)::bigint)
              \(visible)
            ORDER BY tx, position
            LIMIT \(limit)
            """, limit: limit, categories: categories, below: nil, withMetadata: withMetadata, on: connection)
    }

    /// The page `selection` (a WHERE clause on `events`, with its order and `limit`) picks, rows of other
    /// `categories` or of transactions from `horizon` on dropped, the rest decoded and upcast (their metadata
    /// left empty unless `withMetadata`).
    private func readPage(
        _ selection: PostgresQuery, limit: Int, categories: [String], below horizon: UInt64?, leavingSealed: Set<String> = [],
        leavingData: Set<String> = [], withMetadata: Bool, on connection: PostgresConnection
    ) async throws -> LogPage {
        // A reader that leaves the metadata unread does not ask for it: printing `jsonb` as text is most of
        // what PostgreSQL spends on a page, and the metadata is a tenth of it. Nor does it ask for the data
        // of the events of `leavingData`'s types: PostgreSQL gives NULL for it, and the event empty data.
        let data: PostgresQuery = leavingData.isEmpty
            ? "data" : "CASE WHEN type = ANY(\(PostgresArray(leavingData.sorted()))::text[]) THEN NULL ELSE data END AS data"
        var query: PostgresQuery = "SELECT position, tx, stream, version, event_id, type, schema, \(data), "
        query.append(withMetadata ? "metadata, user_id, occurred_at FROM events " : "user_id, occurred_at FROM events ")
        query.append(selection)
        let rows = try await connection.query(query)
        let wanted = Set(categories.map { Substring($0) })
        // Each kept row is decoded once: the stream and the transaction read to choose it go into its event.
        var events: [RecordedEvent] = [], occurredAt: [String] = []
        events.reserveCapacity(rows.count)
        occurredAt.reserveCapacity(rows.count)
        let columns = try EventColumns(rows)
        for row in rows {
            let transactionId: UInt64 = try row.decode(columns.tx)
            if let horizon, transactionId >= horizon { continue }
            let stream = StreamName(try row.decode(columns.stream))
            guard wanted.contains(stream.category) else { continue }
            events.append(try decode(
                row, columns: columns, stream: stream, transactionId: transactionId, withMetadata: withMetadata,
                dataMayBeLeft: !leavingData.isEmpty))
            // The column's text is what `occurred_at::text` prints (the same output function and settings).
            occurredAt.append(try row.decode(columns.occurredAt))
        }
        try await open(&events, leavingSealed: leavingSealed.union(leavingData)) { try await connection.query($0) }
        let last = try rows.last.map { row in
            (userId: try row.decode("user_id", as: UUID?.self),
             checkpoint: LogCheckpoint(transactionId: try row.decode("tx"), position: try row.decode("position")))
        }
        return LogPage(recorded: events, occurredAt: occurredAt, isFull: rows.count == limit, last: last)
    }

    /// Reads the log user by user, for `tether replay`'s bulk phase: events of the `categories`' streams
    /// written by transactions below `horizon` (an `xid8` no transaction still running is older than),
    /// in `(user_id, position)` order, after `cursor`'s event (from the start when nil); events without a
    /// user are left out. Like ``readAll(after:limit:categories:horizon:on:)``, with `occurred_at`'s text.
    ///
    /// `users` keeps only user ids from its lower bound (inclusive) to its upper one (exclusive), each
    /// open when nil: readers of disjoint ranges can read the log side by side. Events of `leavingData`'s
    /// types come without their data (empty), neither opened nor upcast: for a reader that takes nothing
    /// from their payload. A type with an upcaster is read whole all the same (its upcaster needs the data).
    public func readByUser(
        after cursor: (userId: UUID, position: Int64)?, users: (from: UUID?, to: UUID?) = (nil, nil), below horizon: UInt64,
        limit: Int, categories: [String], leavingSealed: Set<String> = [], leavingData: Set<String> = [], withMetadata: Bool = true,
        on connection: PostgresConnection
    ) async throws -> LogPage {
        var after: PostgresQuery = cursor.map { "AND (user_id, position) > (\($0.userId)::uuid, \($0.position)::bigint)" } ?? ""
        if let from = users.from { after.append(" AND user_id >= \(from)::uuid") }
        if let to = users.to { after.append(" AND user_id < \(to)::uuid") }
        return try await readPage("""
            WHERE user_id IS NOT NULL \(after)
            ORDER BY user_id, position
            LIMIT \(limit)
            """, limit: limit, categories: categories, below: horizon, leavingSealed: leavingSealed,
            leavingData: leavingData.filter { !upcasters.upcasts(type: $0) }, withMetadata: withMetadata, on: connection)
    }

    /// Events about one user across all streams, in position order; with `since`, only those that occurred then or later.
    public func readUser(
        _ userId: UUID, after position: Int64 = 0, since: Date? = nil, limit: Int = 1000
    ) async throws -> [RecordedEvent] {
        try await readUserParsed(userId, after: position, since: since, limit: limit).map(\.event)
    }

    /// ``readUser(_:after:since:limit:)``, each event with its payload as ``decodeUserEventsParsed(_:)`` gives it.
    public func readUserParsed(
        _ userId: UUID, after position: Int64 = 0, since: Date? = nil, limit: Int = 1000
    ) async throws -> [(event: RecordedEvent, payload: JOSEObject?)] {
        // The events and their user's key in one round trip, decoded where they arrive.
        let statements = Self.userEventsStatements(userId, after: position, since: since, limit: limit)
        return try await client.withConnection { connection in
            try await connection.run { [self] job in try decodeUserEventsParsed(try job.pipeline(statements)[...]) }
        }
    }

    /// The statements of ``readUser(_:after:since:limit:)`` (the plan setting ``userEventsPlanStatement``, the
    /// events, then their user's key), for a caller that sends them with others; decode their rows with
    /// ``decodeUserEvents(_:)``.
    ///
    /// `limitIsUsual`: the caller asks for this `limit` again and again (a page's default or largest size).
    /// It is then a literal, so that PostgreSQL plans the statement once per connection instead of at each
    /// read (a `LIMIT` parameter made it choose a plan per execution: 90 µs for a first page's 220 µs
    /// read); other sizes stay parameters, so that odd ones do not fill the connection's prepared statements.
    public static func userEventsStatements(
        _ userId: UUID, after position: Int64 = 0, since: Date? = nil, limit: Int = 1000, limitIsUsual: Bool = false
    ) -> [PostgresQuery] {
        var query: PostgresQuery = """
            SELECT \(unsafeSQL: Self.columns) FROM events WHERE user_id = \(userId) AND position > \(position)
            """
        if let since {
            query.append(" AND occurred_at >= \(since)::timestamptz")
        }
        query.append(limitIsUsual ? " ORDER BY position LIMIT \(literal: limit)" : " ORDER BY position LIMIT \(limit)")
        return [userEventsPlanStatement, query, PersonalDataVault.keysStatement(for: [userId])]
    }

    /// How many statements ``userEventsStatements(_:after:since:limit:limitIsUsual:)`` gives: a caller that
    /// sends more after them finds their rows after this many.
    public static let userEventsStatementCount = 3

    /// The event rows among the rows of ``userEventsStatements(_:after:since:limit:limitIsUsual:)``
    /// (after the plan setting's, before the key's).
    public static func userEventRows(_ rows: ArraySlice<PostgresRows>) -> PostgresRows {
        rows[rows.startIndex + 1]
    }

    /// Turns bitmap scans off until the end of the transaction (or of the pipeline's implicit one), so that a
    /// page of a user's events is one ordered range scan of `events_user_id` that stops at the page's end.
    ///
    /// The page statement is prepared, and after five executions it runs on its generic plan, which the
    /// planner costs for an average user (the log's events over its distinct users: a few events). For so
    /// few rows a bitmap scan and a sort look cheapest, and it then read and sorted all of a user's events
    /// for each page: 3,425 rows for a first page of 50 of a long-lived user, 1.4 ms of PostgreSQL's time
    /// against 0.09 ms for the range scan (`EXPLAIN ANALYZE`). The statement after this one is planned,
    /// and its generic plan made, with the setting in force; the transaction's other statements are
    /// lookups by key, which bitmap scans do not serve either.
    static let userEventsPlanStatement: PostgresQuery = "SELECT set_config('enable_bitmapscan', 'off', true)"

    /// The events of the rows of ``userEventsStatements(_:after:since:limit:)``, sealed parts opened.
    public func decodeUserEvents(_ rows: ArraySlice<PostgresRows>) throws -> [RecordedEvent] {
        try decodeUserEventsParsed(rows).map(\.event)
    }

    /// ``decodeUserEvents(_:)``, each event with its opened payload when opening it parsed it (a sealed part,
    /// no upcasting after): nil means parse the event's `data`, which holds the same payload.
    /// With `range`, only the event rows in it (a page's rows without the one past its limit).
    /// With `payloadsOnly`, an event that comes with its payload keeps its `data` as stored (sealed): the
    /// caller reads the payload, never the data, of such an event.
    public func decodeUserEventsParsed(
        _ rows: ArraySlice<PostgresRows>, in range: Range<Int>? = nil, payloadsOnly: Bool = false
    ) throws -> [(event: RecordedEvent, payload: JOSEObject?)] {
        var decoded: [(event: RecordedEvent, payload: JOSEObject?)] = []
        decoded.reserveCapacity(range?.count ?? Self.userEventRows(rows).count)
        try forEachUserEvent(rows, in: range, payloadsOnly: payloadsOnly) { decoded.append(($0, $1)) }
        return decoded
    }

    /// Calls `body` with each event of ``decodeUserEventsParsed(_:in:payloadsOnly:)`` in order, making no array
    /// of them: for a reader that turns each into something else at once (a history page's text).
    public func forEachUserEvent(
        _ rows: ArraySlice<PostgresRows>, in range: Range<Int>? = nil, payloadsOnly: Bool = false,
        _ body: (_ event: RecordedEvent, _ payload: JOSEObject?) throws -> Void
    ) throws {
        let keys = PersonalDataVault.OpeningKeys(
            try PersonalDataVault.keys(from: rows[rows.startIndex + 2], masterKeys: client.configuration.masterKeys))
        let events = Self.userEventRows(rows)
        let columns = try EventColumns(events)
        for row in events[range ?? events.indices] {
            let (event, payload) = try openedParsed(
                try decode(row, columns: columns), keys: keys, leavingSealed: [], payloadsOnly: payloadsOnly)
            try body(event, payload)
        }
    }

    private static let columns =
        "position, tx, stream, version, event_id, type, schema, data, metadata, user_id, occurred_at"

    /// The statement that reads the stream of the user `user` finds (an SQL query of at most one row whose
    /// `id` column, a uuid, is the user's id: `SELECT (lookup)::uuid AS id`, say), in version order; decode it
    /// with ``decode(_:keys:)``. The query is evaluated once (`OFFSET 0` keeps it from being inlined at
    /// every use of the id), and only its `id` is taken: its other columns cannot clash with the events'.
    ///
    /// With `known`, a user whose state the caller holds up to a version: when the query finds
    /// that user, only the events after the version are read. Otherwise only the last `tail` events are
    /// read (all of a shorter stream); the caller reads the earlier ones (``userStreamStatement(_:before:)``)
    /// when it needs them.
    public static func userStreamStatement(
        user: PostgresQuery, after known: (userId: UUID, version: Int)? = nil, tail: Int
    ) -> PostgresQuery {
        let start: PostgresQuery = "greatest(0, (SELECT max(e.version) FROM events e WHERE e.stream = 'user-' || target.id::text) - \(tail))"
        let after: PostgresQuery = known.map { "CASE WHEN target.id = \($0.userId)::uuid THEN \($0.version) ELSE \(start) END" } ?? start
        return """
            SELECT \(unsafeSQL: columns) FROM (SELECT found.id FROM (\(user)) AS found OFFSET 0) AS target
            JOIN events ON events.stream = 'user-' || target.id::text AND events.version > \(after)
            ORDER BY events.version
            """
    }

    /// The events of `userId`'s stream before `version`, in version order: what a read of its last events left out.
    /// With `start` (an SQL integer expression; NULL reads from the first), only those from its value on.
    public static func userStreamStatement(_ userId: UUID, before version: Int, from start: PostgresQuery? = nil) -> PostgresQuery {
        let bound: PostgresQuery = start.map { "AND version >= coalesce(\($0), 1)" } ?? ""
        return """
            SELECT \(unsafeSQL: columns) FROM events
            WHERE stream = \(StreamName.user(userId).rawValue) AND version < \(version) \(bound)
            ORDER BY version
            """
    }

    /// Decodes rows read with ``userStreamStatement(user:after:tail:)``, opening sealed parts with `keys`.
    ///
    /// Events of the types in `leavingSealed` keep their sealed part sealed, for a reader that reads
    /// nothing of it (their payload then has no `personal` member: the type must decode without one).
    /// (Events about no one keep theirs sealed: ``readStream(_:after:)`` and the log's other readers open them.)
    public func decode(_ rows: some Sequence<PostgresRow>, keys: [UUID: [UInt8]], leavingSealed: Set<String> = []) throws -> [RecordedEvent] {
        var columns = EventColumns.Found()
        let keys = PersonalDataVault.OpeningKeys(keys)
        return try rows.map { row in
            try opened(try decode(row, columns: columns.of(row)), keys: keys, leavingSealed: leavingSealed)
        }
    }

    /// `event` upcast, with its sealed part opened by its user's key (or, about no one, its ``ExpiringKeys``
    /// key, when `keys` holds those).
    private func opened(_ event: RecordedEvent, keys: PersonalDataVault.OpeningKeys, leavingSealed: Set<String>) throws -> RecordedEvent {
        try openedParsed(event, keys: keys, leavingSealed: leavingSealed).event
    }

    /// ``opened(_:keys:leavingSealed:)``, with the opened payload as the opening parsed it: nil when
    /// nothing was opened, or an upcaster changed the payload after.
    /// With `payloadsOnly`, an event that comes with its payload keeps its `data` as stored (see
    /// ``decodeUserEventsParsed(_:in:payloadsOnly:)``); one an upcaster changes gets its data, and no payload.
    private func openedParsed(
        _ event: RecordedEvent, keys: PersonalDataVault.OpeningKeys, leavingSealed: Set<String>, payloadsOnly: Bool = false
    ) throws -> (event: RecordedEvent, payload: JOSEObject?) {
        let key: () throws -> AESGCM.ScheduledKey?
        if leavingSealed.contains(event.type) {
            return (try upcasters.apply(to: event), nil)
        } else if let userId = event.userId {
            key = { try keys.key(of: userId) }
        } else if keys.opensEventsAboutNoOne, let name = PersonalDataVault.expiringKeyName(of: event) {
            key = { try keys.key(named: name) }
        } else {
            return (try upcasters.apply(to: event), nil)
        }
        let writingData = !payloadsOnly || upcasters.upcasts(event)
        let (opened, payload) = try PersonalDataVault.openParsed(event, key: key, writingData: writingData)
        let current = try upcasters.apply(to: opened)
        return (current, current.schema == opened.schema ? payload : nil)
    }

    /// Decodes rows, opening sealed personal data with the keys of their users, and those of events about
    /// no one with their ``ExpiringKeys`` keys (one query for each kind).
    private func decode(
        _ rows: some Sequence<PostgresRow>, query: (PostgresQuery) async throws -> PostgresRows
    ) async throws -> [RecordedEvent] {
        var columns = EventColumns.Found()
        var events = try rows.map { try decode($0, columns: columns.of($0)) }
        try await open(&events, query: query)
        return events
    }

    /// Upcasts `stored` (as their rows hold them) in place, their sealed parts opened with the keys of their
    /// users, and those of events about no one with their ``ExpiringKeys`` keys (one query for each kind).
    private func open(
        _ stored: inout [RecordedEvent], leavingSealed: Set<String> = [], query: (PostgresQuery) async throws -> PostgresRows
    ) async throws {
        let masterKeys = client.configuration.masterKeys
        // Only the keys of users with an event to open: a page of the bulk phase's sign-ins, all left sealed, asks for none.
        let opening = stored.lazy.filter { !leavingSealed.contains($0.type) }
        let users = try await PersonalDataVault.keys(for: Set(opening.compactMap(\.userId)), masterKeys: masterKeys, query: query)
        let names = Set(opening.filter { $0.userId == nil }.compactMap(PersonalDataVault.expiringKeyName))
        let expiring = names.isEmpty
            ? [:] : try ExpiringKeys.keys(from: try await query(ExpiringKeys.keysStatement(named: names)), masterKeys: masterKeys)
        let keys = PersonalDataVault.OpeningKeys(users, expiring: expiring)
        for index in stored.indices {
            // One left sealed that no upcaster changes stays as it was read, neither copied nor rebuilt.
            if leavingSealed.contains(stored[index].type), !upcasters.upcasts(stored[index]) { continue }
            stored[index] = try opened(stored[index], keys: keys, leavingSealed: leavingSealed)
        }
    }

    /// One row as stored (sealed parts still sealed, no upcasters run), its cells found at `columns`; without
    /// `withMetadata`, its metadata is left empty, unread. With `dataMayBeLeft`, a NULL data cell (an event
    /// whose data the read left out: the column is never NULL) gives empty data. `stream` and `transactionId`,
    /// when given, are the row's own, read already.
    private func decode(
        _ row: PostgresRow, columns: EventColumns, stream: StreamName? = nil, transactionId: UInt64? = nil, withMetadata: Bool = true,
        dataMayBeLeft: Bool = false
    ) throws -> RecordedEvent {
        var metadata = EventMetadata()
        if withMetadata {
            guard let column = columns.metadata else { throw PostgresError.decoding("no column \"metadata\" in the result") }
            metadata = try EventMetadata.decodeStored(try row.decode(column, as: PostgresJSON.self).data)
        }
        let event = RecordedEvent(
            position: try row.decode(columns.position), transactionId: try transactionId ?? row.decode(columns.tx),
            stream: try stream ?? StreamName(row.decode(columns.stream)), version: try row.decode(columns.version),
            id: try row.decode(columns.eventId), type: try row.decode(columns.type), schema: try row.decode(columns.schema),
            data: dataMayBeLeft
                ? try row.decode(columns.data, as: PostgresJSON?.self)?.data ?? Data() : try row.decode(columns.data, as: PostgresJSON.self).data,
            metadata: metadata,
            userId: try row.decode(columns.userId), occurredAt: try row.decode(columns.occurredAt))
        return event
    }
}

/// Where the cells of an event row are in its result: found once a result, not at every cell (eleven
/// scans of the column names a row were 3% of a history read's CPU).
struct EventColumns {
    let position, tx, stream, version, eventId, type, schema, data, userId, occurredAt: Int
    /// Nil in a result read without it (a log page read without the metadata).
    let metadata: Int?

    init(_ rows: PostgresRows) throws {
        func find(_ name: String) throws -> Int {
            guard let column = rows.column(named: name) else {
                throw PostgresError.decoding("no column \"\(name)\" in the result (columns: \(rows.columns.joined(separator: ", ")))")
            }
            return column
        }
        (position, tx, stream, version) = (try find("position"), try find("tx"), try find("stream"), try find("version"))
        (eventId, type, schema, data) = (try find("event_id"), try find("type"), try find("schema"), try find("data"))
        (userId, occurredAt) = (try find("user_id"), try find("occurred_at"))
        metadata = rows.column(named: "metadata")
    }

    /// The columns of each row's result, for rows that may come from more than one (a stream read in two
    /// parts): found again only when a row of another result comes.
    struct Found {
        /// The last result's rows (held, so that no other result takes its address meanwhile) and columns.
        private var last: (rows: PostgresRows, columns: EventColumns)?

        init() {}

        mutating func of(_ row: PostgresRow) throws -> EventColumns {
            if let last, last.rows.resultIdentity == row.rows.resultIdentity { return last.columns }
            let columns = try EventColumns(row.rows)
            last = (row.rows, columns)
            return columns
        }
    }
}

extension Array {
    fileprivate func chunked(by size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}

/// What ``PostgresEventStore/appendAtEnd(_:to:metadata:)`` cannot append in one insert.
public struct AppendAtEndError: Error, CustomStringConvertible {
    public let count: Int
    public let users: Int
    public var description: String {
        "appendAtEnd takes 1 to \(PostgresEventStore.insertBatchSize) events about one user at most; got \(count) events about \(users) users"
    }
}
