import Foundation
import Synchronization
import TetherCore

/// Rebuilds a projection's read models from the event log while the server keeps
/// serving: `tether replay`.
///
/// A run
///
/// 1. takes a session advisory lock (one replay per database at a time) and drops
///    shadow tables an interrupted earlier run left behind;
/// 2. builds empty copies of the live tables in the schema `tether_replay`
///    (``ShadowTables``) and checks they are built exactly like the live ones;
/// 3. puts that schema first on its search path and applies the log through the
///    projection's own `apply`, in batches of one transaction each, with the gap-safe
///    reader (only transactions older than the oldest one running), until a batch
///    comes back short: the copies are then a few events behind the live tables;
/// 4. replace: in one short transaction, closes the ``ProjectionGate`` (waits for the
///    commands in flight, holds new ones at `BEGIN`), locks the live tables, applies
///    the events committed since step 3, drops the live tables, moves the copies into
///    their place and records the run. Nothing can commit a projected event between
///    the final read and the swap, so nothing is lost.
///    verify: closes the gate only long enough to export a snapshot, then, in a
///    `REPEATABLE READ` transaction on that snapshot, applies the last events and
///    compares the copies with the live tables row by row, while writers go on.
///
/// Locks in step 4 wait with a short `lock_timeout`; a timeout or a deadlock PostgreSQL
/// detected rolls the attempt back (the live tables untouched), the run catches up
/// outside the gate and tries again, so the swap never makes a request fail. The first
/// lock, taken before the gate, is the exception: the live tables in the mode a vacuum
/// holds, waited for longer than `deadlock_timeout`, so that PostgreSQL cancels an
/// autovacuum in the way; nothing a command or reader holds conflicts with it.
///
/// Cancelling the task (SIGINT in `tether replay`) stops between batches, drops the
/// copies and throws `CancellationError`; the live tables are only ever changed by
/// the swap transaction, which commits whole or not at all. A process killed outright
/// leaves its copies behind for the next run to drop.
///
/// The run uses connections of `database`, which must act as the role that owns the
/// tables (the one `tether migrate` uses), never `tether_service`: only the owner may
/// drop and move them.
public struct ProjectionReplay: Sendable {
    /// What a run does once the copies have caught up.
    public enum Mode: String, Sendable {
        /// Swap the copies in as the live tables.
        case replace = "replay"
        /// Compare the copies with the live tables; change nothing.
        case verify
    }

    /// Batch size and lock waits.
    public struct Configuration: Sendable {
        /// Events per rebuild transaction.
        public var batchSize: Int
        /// How long the swap waits for the commands in flight before it lets them go and retries.
        public var gateTimeout: Duration
        /// How long the swap waits for readers of the live tables before it retries.
        public var tableLockTimeout: Duration
        /// Swap attempts before the run gives up (live tables untouched).
        public var maxSwapAttempts: Int
        /// How long the rebuild waits for a transaction that holds back the gap-safe
        /// reader before it leaves the backlog to the swap.
        public var horizonWait: Duration
        /// How long the swap (and `--verify`'s snapshot), before taking the gate, waits for a vacuum of a live
        /// table to give way; at least twice `deadlock_timeout`, after which PostgreSQL cancels an autovacuum.
        public var vacuumWait: Duration

        /// Whether a projection with ``Projection/BulkRows`` is first loaded in bulk (its final rows
        /// computed user by user and written with `COPY`, keys built after); off, every event goes
        /// through the projection's statements.
        public var bulkLoad: Bool
        /// How many readers load the bulk phase side by side, each a range of user ids on a connection
        /// of its own (at most the pool's size).
        public var bulkReaders: Int

        public init(
            batchSize: Int = 2000, gateTimeout: Duration = .seconds(1), tableLockTimeout: Duration = .milliseconds(200),
            maxSwapAttempts: Int = 50, horizonWait: Duration = .seconds(30), bulkLoad: Bool = true, bulkReaders: Int = 2,
            vacuumWait: Duration = .seconds(5)
        ) {
            self.vacuumWait = vacuumWait
            self.bulkLoad = bulkLoad
            self.bulkReaders = max(1, bulkReaders)
            self.batchSize = max(1, batchSize)
            self.gateTimeout = gateTimeout
            self.tableLockTimeout = tableLockTimeout
            self.maxSwapAttempts = max(1, maxSwapAttempts)
            self.horizonWait = horizonWait
        }
    }

    /// Advisory lock key of a running replay (migrations use 1, the gate 2).
    static let runLockKey: Int64 = 0x7465_7468_6572_0003

    public let projection: Projection
    /// A pool acting as the tables' owner; a run leases at most three connections (its own, one to read
    /// ahead or for the second bulk reader, and `--verify`'s gate). With fewer, a read-ahead waits for one.
    public let database: PostgresClient
    public let configuration: Configuration

    public init(projection: Projection, database: PostgresClient, configuration: Configuration = Configuration()) {
        self.projection = projection
        self.database = database
        self.configuration = configuration
    }

    /// Runs the rebuilds migrations asked for (`read_model_rebuilds`), each a full `.replace` whose swap
    /// deletes its request; answers their outcomes. `database` acts as the tables' owner, with the master keys.
    public static func runPendingRebuilds(
        on database: PostgresClient, progress: @escaping @Sendable (ReplayProgress) -> Void = { _ in }
    ) async throws -> [ReplayOutcome] {
        guard let pending = try RebuildPending(try await database.query(RebuildPending.statement)) else { return [] }
        let projections = try pending.projections.map { name in
            guard let projection = Projection.named(name) else {
                throw ReplayError("a migration asked to rebuild the read models \(name), which this build does not know")
            }
            return projection
        }
        // Under one hold of the run lock, as a tether replay of them all.
        var outcomes: [ReplayOutcome] = []
        try await run(projections, .replace, on: database, progress: progress) { outcomes.append($0) }
        return outcomes
    }

    /// Rebuilds the projection and swaps it in (`.replace`) or compares it (`.verify`).
    ///
    /// `progress` is called after every batch and at each phase change.
    public func run(
        _ mode: Mode, progress: @escaping @Sendable (ReplayProgress) -> Void = { _ in }
    ) async throws -> ReplayOutcome {
        var outcome: ReplayOutcome?
        try await Self.run([projection], mode, on: database, configuration: configuration, progress: progress) { outcome = $0 }
        return outcome!
    }

    /// Rebuilds or compares `projections` one after the other under one hold of the run lock, so that no
    /// migration (nor another replay) starts between two of them; `finished` is told of each as it ends.
    public static func run(
        _ projections: [Projection], _ mode: Mode, on database: PostgresClient, configuration: Configuration = Configuration(),
        progress: @escaping @Sendable (ReplayProgress) -> Void = { _ in }, finished: (ReplayOutcome) async throws -> Void
    ) async throws {
        try await database.withConnection { main in
            let locked: Bool = try await main.query("SELECT pg_try_advisory_lock(\(Self.runLockKey)) AS locked")[0].decode("locked")
            guard locked else {
                throw ReplayError(
                    "another tether replay, or tether migrate applying migrations, is running on this database; try again when it has finished")
            }
            do {
                for projection in projections {
                    let replay = ProjectionReplay(projection: projection, database: database, configuration: configuration)
                    try await finished(try await replay.runHoldingLock(mode, on: main, progress: progress))
                }
                try await main.query("SELECT pg_advisory_unlock(\(Self.runLockKey))")
            } catch {
                if !main.isBroken {
                    // The swap transaction drops the schema itself; anything else leaves copies to remove.
                    _ = try? await ShadowTables.dropLeftovers(on: main)
                    _ = try? await main.query("SELECT pg_advisory_unlock(\(Self.runLockKey))")
                }
                throw error
            }
        }
    }

    private func runHoldingLock(
        _ mode: Mode, on main: PostgresConnection, progress: @escaping @Sendable (ReplayProgress) -> Void
    ) async throws -> ReplayOutcome {
        try await ShadowTables.dropLeftovers(on: main)
        let shadow = try await ShadowTables.locate(projection.tables, on: main)
        let bulk = configuration.bulkLoad ? projection.bulkRows : nil
        try await shadow.create(deferringKeys: bulk != nil, on: main)
        let total: Int = try await main.query("""
            SELECT count(*) AS total FROM events WHERE split_part(stream, '-', 1) = ANY(\(PostgresArray(projection.categories))::text[])
            """)[0].decode("total")
        var run = RunState(projection: projection.name, total: total, seal: try await ReadModelSeal.load(on: database, whileRebuildPending: true), report: progress)
        run.report(.rebuilding)
        if let bulk {
            try await shadow.verifyShapes(includingKeys: false, on: main)
            // Before the copies go first on the search path: the keys' definitions name the live tables as they are printed there.
            try await load(bulk, into: shadow, &run, on: main)
            run.report(.buildingKeys)
            try await buildKeys(of: shadow, forSwap: mode == .replace, on: main)
            run.bulk = (run.applied, run.clock.now - run.started)
            run.report(.rebuilding)
        }
        try await shadow.verifyShapes(on: main)
        return try await ShadowTables.withSearchPath(shadow.searchPath, on: main) {
            try Task.checkCancellation()
            try await catchUp(&run, on: main)
            switch mode {
            case .replace:
                try await swap(&run, shadow: shadow, on: main)
                return run.outcome(mode, drift: [])
            case .verify:
                let drift = try await compare(&run, shadow: shadow, on: main)
                let outcome = run.outcome(mode, drift: drift)
                try await ProjectionReplayRecord.insert(outcome, on: main)
                try await ShadowTables.dropLeftovers(on: main)
                return outcome
            }
        }
    }

    // MARK: Loading in bulk

    /// The bulk phase: every event written by a transaction older than the oldest one running when
    /// it starts (so none can still appear behind it), read user by user, each user's final rows
    /// computed in memory and written with `COPY`. The user ids are split into ranges, one per reader
    /// (``Configuration/bulkReaders``, the first on `connection`, the others on connections of their
    /// own): while one reader waits for PostgreSQL, another decodes and folds, and each writes its own
    /// rows. Leaves the run's checkpoint at the phase's horizon, where the catch-up goes on in log order.
    private func load(
        _ bulk: Projection.BulkRows, into shadow: ShadowTables, _ run: inout RunState, on connection: PostgresConnection
    ) async throws {
        var copies: [(table: String, statement: String)] = []
        for table in projection.tables.reversed() { // listed in an order safe for deleting rows: filled in the other
            let columns = try await shadow.columns(of: table, on: connection)
            guard let written = bulk.columns[table], Set(written) == Set(columns), written.count == columns.count else {
                throw ReplayError(
                    "the bulk rows of \(table) are (\((bulk.columns[table] ?? []).joined(separator: ", "))) but the table has "
                        + "(\(columns.joined(separator: ", "))); the projection's BulkRows must write every column")
            }
            let list = written.map(ShadowTables.quote).joined(separator: ", ")
            copies.append((table, "COPY \(shadow.shadow(table)) (\(list)) FROM STDIN"))
        }
        if let upcast = bulk.leavingData.sorted().first(where: projection.upcasters.upcasts(type:)) {
            throw ReplayError("the bulk rows leave the data of \(upcast) events unread, but they have an upcaster; read their data")
        }
        let horizon = try await bulkHorizon(on: connection)
        let readers = max(1, min(configuration.bulkReaders, database.configuration.maxConnections, 256))
        // Random (version 4) user ids spread evenly over the first byte.
        let bounds: [UUID?] = (0...readers).map { index in
            index == 0 || index == readers ? nil : UUID(uuid: (UInt8(index * 256 / readers), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        }
        let reader = BulkReader(
            bulk: bulk, copies: copies, horizon: horizon, batchSize: configuration.batchSize, categories: projection.categories,
            readsMetadata: projection.readsMetadata, store: PostgresEventStore(client: database, upcasters: projection.upcasters), progress: run)
        try await sideBySide(readers, on: connection) { index, connection in
            try await reader.load((from: bounds[index], to: bounds[index + 1]), on: connection)
        }
        run.applied += reader.applied.withLock { $0 }
        run.report(nil)
        run.checkpoint = LogCheckpoint(transactionId: horizon - 1, position: .max)
    }

    /// After the bulk phase: each copy's keys and indexes built, and its statistics gathered (for the planner
    /// from the first query on, as an incrementally filled table gathers them), on connections side by side
    /// like the bulk readers, the largest copies first; then the foreign keys, which need every copy's keys.
    ///
    /// Copies that are compared and dropped (not `forSwap`: `--verify`) get no statistics: no plan of theirs
    /// outlives the run, the comparison reads them whole, and the catch-up's statements find their rows by
    /// key (`ANALYZE` was a tenth of PostgreSQL's work in a replay of a log of sign-ins).
    private func buildKeys(of shadow: ShadowTables, forSwap: Bool, on main: PostgresConnection) async throws {
        let tables = try await main.query("""
            SELECT t AS name FROM unnest(\(PostgresArray(shadow.tables))::text[]) AS t
            ORDER BY pg_relation_size(format('%I.%I', \(ShadowTables.schema)::text, t)::regclass) DESC, t
            """).map { try $0.decode("name", as: String.self) }
        let waiting = WorkList(tables)
        let workers = max(1, min(configuration.bulkReaders, database.configuration.maxConnections, tables.count))
        try await sideBySide(workers, on: main) { _, connection in
            while let table = waiting.next() {
                try Task.checkCancellation()
                try await shadow.addKeys(of: table, on: connection)
                if forSwap { try await connection.execute(simple: "ANALYZE \(shadow.shadow(table))") }
            }
        }
        try await shadow.addForeignKeys(on: main)
    }

    /// Runs `work` for `count` workers, each in a child task (so the first to fail cancels the others):
    /// the first on `main`, the others on connections of their own from the run's pool.
    private func sideBySide(
        _ count: Int, on main: PostgresConnection, _ work: @escaping @Sendable (_ index: Int, PostgresConnection) async throws -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask { [database] in
                    if index == 0 { return try await work(index, main) }
                    try await database.withConnection { try await work(index, $0) }
                }
            }
            while try await group.next() != nil {}
        }
    }

    /// Where the bulk phase stops: below the oldest transaction still running (anywhere in the cluster),
    /// waited for (up to `horizonWait`, at most two seconds) until it lies past every event committed
    /// when the run began, so that the bulk phase loads the whole log of that moment when it can.
    private func bulkHorizon(on connection: PostgresConnection) async throws -> UInt64 {
        let newest: UInt64? = try await connection.query("SELECT tx FROM events ORDER BY tx DESC LIMIT 1").first?.decode("tx")
        let clock = ContinuousClock()
        let deadline = clock.now + min(configuration.horizonWait, .seconds(2))
        while true {
            let horizon: UInt64 = try await connection.query("SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon")[0].decode("horizon")
            if horizon > newest ?? 0 || clock.now >= deadline { return horizon }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    // MARK: Applying the log

    /// Applies batches, each in a transaction of its own, until at most one batch of
    /// committed events is left for the swap to apply under the gate.
    ///
    /// Two things can keep the rebuild from getting there:
    /// - the gap-safe reader stops at the oldest transaction still running anywhere in
    ///   the cluster, so a short batch may only mean that some transaction is slow to
    ///   finish while events wait behind it: the run waits for the horizon to move (up
    ///   to `horizonWait`);
    /// - writers may append faster than one connection replays: once the backlog has
    ///   stopped shrinking for a second, chasing it is pointless, and the swap applies
    ///   it while the gate holds the writers back.
    private func catchUp(_ run: inout RunState, on connection: PostgresConnection) async throws {
        var waitingSince: ContinuousClock.Instant?
        var lastMeasure: (at: ContinuousClock.Instant, backlog: Int)?
        // While a full batch is applied, the next one is read, decoded and stated on another connection (and core).
        var prefetched: Task<Batch, any Error>?
        defer { prefetched?.cancel() }
        while true {
            try Task.checkCancellation()
            let prepared: Batch
            if let prefetched {
                prepared = try await prefetched.value
            } else {
                prepared = try prepare(try await read(after: run.checkpoint, horizon: .belowOldestRunningTransaction, on: connection), run.seal)
            }
            prefetched = nil
            if prepared.page.isFull, let after = prepared.page.last?.checkpoint {
                prefetched = Task { [database, seal = run.seal] in
                    try prepare(try await database.withConnection { other in
                        try await read(after: after, horizon: .belowOldestRunningTransaction, on: other)
                    }, seal)
                }
            }
            var batch = run
            try await connection.withTransaction { connection in
                try await apply(prepared, to: &batch, on: connection)
            }
            run = batch
            let isFull = prepared.page.isFull
            if isFull, run.applied < run.initialTotal { continue } // the log as it was at the start
            let now = ContinuousClock.now
            if isFull {
                waitingSince = nil
                guard lastMeasure.map({ now - $0.at >= .seconds(1) }) ?? true else { continue }
            }
            let backlog = try await backlog(after: run.checkpoint, on: connection)
            if backlog <= configuration.batchSize { return }
            if isFull {
                if let last = lastMeasure, backlog >= last.backlog { return }
                lastMeasure = (now, backlog)
                continue
            }
            let started = waitingSince ?? now
            if now - started >= configuration.horizonWait { return }
            waitingSince = started
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// How many committed rows of the log lie after `checkpoint`, of every stream: what the reader still
    /// pages through (it reads every row and keeps the projection's). Counting only the projection's own
    /// events, a projection whose events are rare (admin keys among a log of sign-ins) looked caught up
    /// with the whole log still to page through, and the swap then paged through it holding the gate.
    private func backlog(after checkpoint: LogCheckpoint, on connection: PostgresConnection) async throws -> Int {
        try await connection.query("""
            SELECT count(*) AS backlog FROM events
            WHERE (tx, position) > (\(checkpoint.transactionId)::xid8, \(checkpoint.position)::bigint)
            """)[0].decode("backlog")
    }

    /// Applies every event committed after the run's checkpoint, in the caller's
    /// transaction (which excludes the writers, so the read has no gaps).
    private func applyCommitted(_ run: inout RunState, on connection: PostgresConnection) async throws {
        repeat {
            try Task.checkCancellation()
        } while try await applyBatch(&run, horizon: .everythingCommitted, on: connection)
    }

    /// Reads and applies up to one batch; returns whether the batch was full (more may follow).
    private func applyBatch(
        _ run: inout RunState, horizon: PostgresEventStore.LogHorizon, on connection: PostgresConnection
    ) async throws -> Bool {
        let page = try await read(after: run.checkpoint, horizon: horizon, on: connection)
        try await apply(try prepare(page, run.seal), to: &run, on: connection)
        return page.isFull
    }

    /// Up to one batch of the log after `checkpoint`, the projection's events decoded and upcast.
    private func read(
        after checkpoint: LogCheckpoint, horizon: PostgresEventStore.LogHorizon, on connection: PostgresConnection
    ) async throws -> PostgresEventStore.LogPage {
        try await PostgresEventStore(client: database, upcasters: projection.upcasters).readAll(
            after: checkpoint, limit: configuration.batchSize, categories: projection.categories, horizon: horizon,
            withMetadata: projection.readsMetadata, on: connection)
    }

    /// A page of the log with the statements that apply its events (nil: the projection applies them one by one).
    private typealias Batch = (page: PostgresEventStore.LogPage, statements: [PostgresQuery]?)

    /// `page` with the statements that apply its events, stated where the caller runs (the read-ahead's task).
    private func prepare(_ page: PostgresEventStore.LogPage, _ seal: ReadModelSeal) throws -> Batch {
        (page, try projection.statements?(page.events, seal))
    }

    /// Applies a batch in the caller's transaction and moves the run's checkpoint past its events.
    private func apply(_ batch: Batch, to run: inout RunState, on connection: PostgresConnection) async throws {
        if let statements = batch.statements {
            // The batch's statements in one pipelined round trip, in log order: what one by one would do.
            if !statements.isEmpty {
                _ = try await connection.run { job in try job.pipeline(statements) }
            }
        } else {
            for (event, occurredAt) in batch.page.events {
                try await projection.apply(event, occurredAt, connection, run.seal)
            }
        }
        // Past the page's last row, kept or not: rows of other categories are not read again.
        if let last = batch.page.last {
            run.checkpoint = last.checkpoint
            run.applied += batch.page.recorded.count
            run.report(nil)
        }
    }

    // MARK: Swap and compare

    private func swap(_ run: inout RunState, shadow: ShadowTables, on main: PostgresConnection) async throws {
        run.report(.swapping)
        try await retryingLocks(&run, on: main) { (run: inout RunState) in
            var attempt = run
            try await main.withTransaction { connection in
                // Before the gate, with locks no command waits for: the copies' autovacuum switches (only this
                // run touches the copies), then the live tables, once any vacuum of them has given way.
                try await shadow.restoreAutovacuum(on: connection)
                try await waitOutVacuums(of: shadow, on: connection)
                try await setLockTimeout(configuration.gateTimeout, on: connection)
                try await ProjectionGate.closeExclusively(on: connection)
                try await setLockTimeout(configuration.tableLockTimeout, on: connection)
                try await shadow.lockLiveTables("ACCESS EXCLUSIVE", on: connection)
                try await applyCommitted(&attempt, on: connection)
                try await shadow.swap(on: connection)
                try await ProjectionReplayRecord.insert(attempt.outcome(.replace, drift: []), on: connection)
                // A rebuild a migration asked for (027_sealed_read_models.sql) is done with this swap.
                try await connection.query("DELETE FROM read_model_rebuilds WHERE projection = \(projection.name)")
            }
            run = attempt
        }
    }

    private func compare(_ run: inout RunState, shadow: ShadowTables, on main: PostgresConnection) async throws -> [RowDrift] {
        run.report(.verifying)
        return try await database.withConnection { gate in
            var drift: [RowDrift] = []
            try await retryingLocks(&run, on: main) { (run: inout RunState) in
                var attempt = run
                // Hold the gate just long enough to export a snapshot in which every
                // command has either committed whole or not started.
                try await gate.execute(simple: "BEGIN")
                do {
                    try await waitOutVacuums(of: shadow, on: gate)
                    try await setLockTimeout(configuration.gateTimeout, on: gate)
                    try await ProjectionGate.closeExclusively(on: gate)
                    try await setLockTimeout(configuration.tableLockTimeout, on: gate)
                    try await shadow.lockLiveTables("SHARE", on: gate)
                    let snapshot: String = try await gate.query("SELECT pg_export_snapshot() AS id")[0].decode("id")
                    try await main.execute(simple: "BEGIN ISOLATION LEVEL REPEATABLE READ")
                    do {
                        try await main.query("SET TRANSACTION SNAPSHOT \(unsafeSQL: ShadowTables.literal(snapshot))")
                        try await gate.execute(simple: "COMMIT")
                        try await applyCommitted(&attempt, on: main)
                        drift = try await shadow.drift(on: main)
                        drift += try await shadow.danglingReferences(projection.references, on: main)
                        try await main.execute(simple: "COMMIT")
                    } catch {
                        if !main.isBroken { _ = try? await main.execute(simple: "ROLLBACK") }
                        throw error
                    }
                } catch {
                    if !gate.isBroken { _ = try? await gate.execute(simple: "ROLLBACK") }
                    throw error
                }
                run = attempt
            }
            return drift
        }
    }

    /// Runs `attempt` until it gets its locks: a lock timeout or a deadlock rolls it back,
    /// and the run catches up outside the gate before trying again.
    private func retryingLocks(
        _ run: inout RunState, on main: PostgresConnection, isolation: isolated (any Actor)? = #isolation,
        _ attempt: (inout RunState) async throws -> Void
    ) async throws {
        var attempts = 0
        while true {
            try Task.checkCancellation()
            attempts += 1
            do {
                try await attempt(&run)
                return
            } catch let error as PostgresError where error.isLockNotAvailable || error.isTransient {
                guard attempts < configuration.maxSwapAttempts else {
                    throw ReplayError(
                        "gave up after \(attempts) attempts to take the locks for the swap (\(error.message)); "
                            + "the live tables are untouched")
                }
                try await Task.sleep(for: .milliseconds(min(1000, 25 * attempts)))
                try await catchUp(&run, on: main)
            }
        }
    }

    /// Takes the live tables in `SHARE UPDATE EXCLUSIVE` mode for the rest of the transaction, before the gate:
    /// the mode a (auto)vacuum holds, which the swap's and the compare's table locks wait for, and which no
    /// command's or reader's lock conflicts with, so nothing waits while this does. It waits longer than
    /// `deadlock_timeout`, after which PostgreSQL cancels an autovacuum in its way: one of the live tables
    /// (after a swap, every one of them is new to autovacuum) otherwise outlasted the swap's 200 ms waits
    /// through all 50 attempts. Held, it keeps any new one off the tables until the swap is done.
    private func waitOutVacuums(of shadow: ShadowTables, on connection: PostgresConnection) async throws {
        try await connection.query("""
            SELECT set_config('lock_timeout', greatest(\(Self.milliseconds(configuration.vacuumWait)), 2 * setting::bigint)::text, true)
            FROM pg_settings WHERE name = 'deadlock_timeout'
            """)
        try await shadow.lockLiveTables("SHARE UPDATE EXCLUSIVE", on: connection)
    }

    private func setLockTimeout(_ timeout: Duration, on connection: PostgresConnection) async throws {
        try await connection.execute(simple: "SET LOCAL lock_timeout = \(Self.milliseconds(timeout))")
    }

    /// `duration` in whole milliseconds, at least 1 (`lock_timeout = 0` would wait for ever).
    private static func milliseconds(_ duration: Duration) -> Int64 {
        max(1, duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }
}

/// Items taken one at a time, in order, by workers side by side.
private final class WorkList<Item: Sendable>: Sendable {
    private let items: Mutex<ArraySlice<Item>>

    init(_ items: [Item]) {
        self.items = Mutex(items[...])
    }

    /// The next item no worker has taken, if any is left.
    func next() -> Item? {
        items.withLock { $0.popFirst() }
    }
}

/// What the bulk phase's readers share: each loads one range of user ids on its own connection.
private final class BulkReader: Sendable {
    let bulk: Projection.BulkRows
    let copies: [(table: String, statement: String)]
    let horizon: UInt64
    let batchSize: Int
    let categories: [String]
    let readsMetadata: Bool
    let store: PostgresEventStore
    /// The run as the phase began, for progress reports.
    let progress: RunState
    /// Events loaded by all readers so far.
    let applied = Mutex<Int>(0)

    init(
        bulk: Projection.BulkRows, copies: [(table: String, statement: String)], horizon: UInt64, batchSize: Int,
        categories: [String], readsMetadata: Bool, store: PostgresEventStore, progress: RunState
    ) {
        (self.bulk, self.copies, self.horizon, self.batchSize) = (bulk, copies, horizon, batchSize)
        (self.categories, self.readsMetadata, self.store, self.progress) = (categories, readsMetadata, store, progress)
    }

    /// Reads the users of `users` page by page, folds each user's events into rows and writes them with `COPY`.
    func load(_ users: (from: UUID?, to: UUID?), on connection: PostgresConnection) async throws {
        var rows = CopyRows(binary: true)
        var user: (id: UUID, fold: any BulkFold)? // the last user's rows so far: more events may follow
        var page = try await read(after: nil, users: users, on: connection)
        while true {
            try Task.checkCancellation()
            // The next page is asked for before this one is folded: PostgreSQL reads it meanwhile.
            let cursor = page.isFull ? page.last.flatMap { last in last.userId.map { ($0, last.checkpoint.position) } } : nil
            async let ahead = cursor == nil ? nil : read(after: cursor, users: users, on: connection)
            // Each event read where the page keeps it: not copied out, retained and released.
            for index in page.recorded.indices {
                guard let userId = page.recorded[index].userId else { continue }
                if user?.id != userId {
                    try user?.fold.write(to: &rows)
                    user = (userId, bulk.fold(userId, progress.seal))
                }
                // Changed where it is kept: the fold is never copied, nor retained and released, event by event.
                try user!.fold.apply(page.recorded[index], occurredAt: page.occurredAt[index])
            }
            // Counted and reported under one lock, so reports from the readers never go backwards.
            applied.withLock { applied in
                applied += page.recorded.count
                var report = progress
                report.applied += applied
                report.report(nil)
            }
            if rows.count >= 8 * batchSize {
                // Queued on the connection beside the page read ahead (between its rows and its keys, at worst).
                try await write(rows, on: connection)
                rows.removeAll()
            }
            guard let next = try await ahead else { break }
            page = next
        }
        try user?.fold.write(to: &rows)
        try await write(rows, on: connection)
    }

    /// The page of `users` after `cursor` (from the first when nil).
    private func read(
        after cursor: (userId: UUID, position: Int64)?, users: (from: UUID?, to: UUID?), on connection: PostgresConnection
    ) async throws -> PostgresEventStore.LogPage {
        try await store.readByUser(
            after: cursor, users: users, below: horizon, limit: batchSize, categories: categories,
            leavingSealed: bulk.leavingSealed, leavingData: bulk.leavingData, withMetadata: readsMetadata, on: connection)
    }

    private func write(_ rows: CopyRows, on connection: PostgresConnection) async throws {
        let (tables, copies) = (rows.tables, copies)
        _ = try await connection.run { job in
            for (table, statement) in copies {
                if let data = rows.binaryCopy(of: table) { try job.copyIn(statement + " (FORMAT binary)", data: data) }
                if let data = tables[table] { try job.copyIn(statement, data: data) }
            }
        }
    }
}

/// Where a run has got to, and how it reports progress.
private struct RunState {
    let projection: String
    /// Events of the projection's streams when the run started.
    let initialTotal: Int
    var total: Int
    let report: @Sendable (ReplayProgress) -> Void
    let clock = ContinuousClock()
    let started: ContinuousClock.Instant
    var checkpoint = LogCheckpoint.start
    var applied = 0
    /// The events the bulk phase loaded and how long it took, keys included.
    var bulk: (events: Int, duration: Duration)?
    var phase = ReplayProgress.Phase.rebuilding
    /// What seals personal data in the rebuilt tables.
    let seal: ReadModelSeal

    init(projection: String, total: Int, seal: ReadModelSeal, report: @escaping @Sendable (ReplayProgress) -> Void) {
        self.projection = projection
        self.seal = seal
        self.initialTotal = total
        self.total = total
        self.report = report
        self.started = clock.now
    }

    /// Reports progress, entering `phase` if one is given.
    mutating func report(_ phase: ReplayProgress.Phase?) {
        if let phase { self.phase = phase }
        total = max(total, applied)
        report(ReplayProgress(
            projection: projection, phase: self.phase, applied: applied, total: total, elapsed: clock.now - started))
    }

    func outcome(_ mode: ProjectionReplay.Mode, drift: [RowDrift]) -> ReplayOutcome {
        ReplayOutcome(
            projection: projection, mode: mode, events: applied, duration: clock.now - started, drift: drift,
            bulkEvents: bulk?.events ?? 0, bulkDuration: bulk?.duration ?? .zero)
    }
}

/// How far a run has got, for a progress bar.
public struct ReplayProgress: Sendable, Hashable {
    /// What the run is doing.
    public enum Phase: String, Sendable, Hashable {
        /// `buildingKeys`: the bulk phase's rows are in; the copies' keys and indexes are being built.
        case rebuilding, buildingKeys = "building keys", swapping, verifying
    }

    public var projection: String
    public var phase: Phase
    /// Events applied so far.
    public var applied: Int
    /// Events of the projection's streams in the log when the run started (or applied so far, if more).
    public var total: Int
    public var elapsed: Duration

    public init(projection: String, phase: Phase, applied: Int, total: Int, elapsed: Duration) {
        self.projection = projection
        self.phase = phase
        self.applied = applied
        self.total = total
        self.elapsed = elapsed
    }

    /// Events applied per second so far.
    public var eventsPerSecond: Double { Self.rate(applied, elapsed) }

    /// Time left at the rate so far, when there is a rate to go by.
    public var estimatedRemaining: Duration? {
        let rate = eventsPerSecond
        guard rate > 0 else { return nil }
        return .milliseconds(Int64(Double(max(0, total - applied)) / rate * 1000))
    }

    static func rate(_ events: Int, _ elapsed: Duration) -> Double {
        rate(events, seconds: elapsed.seconds)
    }

    /// Events per second over `seconds`; 0 for no time at all.
    static func rate(_ events: Int, seconds: Double) -> Double {
        seconds > 0 ? Double(events) / seconds : 0
    }
}

/// What a finished run did.
public struct ReplayOutcome: Sendable, Hashable {
    public var projection: String
    public var mode: ProjectionReplay.Mode
    /// Events applied to the copies.
    public var events: Int
    public var duration: Duration
    /// Rows where the live tables differ from the log (verify only).
    public var drift: [RowDrift]
    /// Events the bulk phase loaded (0 when the run had none), and how long that phase took, keys included.
    public var bulkEvents: Int
    public var bulkDuration: Duration

    public init(
        projection: String, mode: ProjectionReplay.Mode, events: Int, duration: Duration, drift: [RowDrift],
        bulkEvents: Int = 0, bulkDuration: Duration = .zero
    ) {
        self.projection = projection
        self.mode = mode
        self.events = events
        self.duration = duration
        self.drift = drift
        self.bulkEvents = bulkEvents
        self.bulkDuration = bulkDuration
    }

    /// Events per second of the bulk phase, and of everything after it (catch-up, swap or compare).
    public var bulkEventsPerSecond: Double { ReplayProgress.rate(bulkEvents, bulkDuration) }
    public var catchUpEventsPerSecond: Double { ReplayProgress.rate(events - bulkEvents, duration - bulkDuration) }

    public var eventsPerSecond: Double { ReplayProgress.rate(events, duration) }
    /// `duration` in seconds.
    public var seconds: Double { duration.seconds }
}

/// Why a replay stopped; the live tables are untouched.
public struct ReplayError: Error, Sendable, CustomStringConvertible {
    /// One line saying what is wrong and what to do.
    public let message: String

    init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
