import Foundation
import Synchronization

/// A bounded pool of PostgreSQL connections for async code.
///
/// Tasks lease a connection, use it, and hand it back. When every connection is
/// busy, callers wait (up to `acquireTimeout`) without blocking a thread. A
/// connection that broke (server restart, network loss) is discarded on return,
/// and one whose server went away while it sat idle is replaced before it is
/// leased, so the request after a database restart succeeds.
public final class PostgresClient: Sendable {
    /// How to reach PostgreSQL and how many connections to keep.
    public struct Configuration: Sendable {
        /// A libpq connection string: `postgresql://user@host:port/db` or `host=… dbname=…`.
        public var url: String
        /// The most connections open at once.
        public var maxConnections: Int
        /// How long a caller waits for a free connection before failing.
        public var acquireTimeout: Duration
        /// libpq's `connect_timeout`, in seconds.
        public var connectTimeoutSeconds: Int
        /// `application_name` shown in `pg_stat_activity`.
        public var applicationName: String
        /// A role every connection switches to with `SET ROLE` (the service role, which
        /// may not update or delete events); nil keeps the login role.
        public var role: String?
        /// The master keys that wrap the keys stored in this database (`TETHER_MASTER_KEY_FILE`); nil
        /// stores new keys unwrapped and reads only unwrapped ones.
        public var masterKeys: MasterKeyRing?
        /// PostgreSQL's `statement_timeout` on every connection; nil keeps the server's (none by default).
        /// A server's pool sets one below the request deadline, so a statement stuck behind a lock is
        /// cancelled (and its transaction rolled back) before the client is told 503, never after.
        public var statementTimeout: Duration?

        public init(
            url: String, maxConnections: Int = 8, acquireTimeout: Duration = .seconds(10),
            connectTimeoutSeconds: Int = 5, applicationName: String = "tether", role: String? = nil, masterKeys: MasterKeyRing? = nil,
            statementTimeout: Duration? = nil
        ) {
            self.statementTimeout = statementTimeout
            self.masterKeys = masterKeys
            self.url = url
            self.maxConnections = max(1, maxConnections)
            self.acquireTimeout = acquireTimeout
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.applicationName = applicationName
            self.role = role
        }
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Lease, any Error>
    }

    /// What an acquirer gets: an idle connection, or the right to open a new one.
    private enum Lease: Sendable {
        case connection(PostgresConnection)
        case openNew
    }

    private struct State {
        var idle: [PostgresConnection] = []
        var open = 0
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        var isClosed = false
    }

    /// The configuration the pool was made with.
    public let configuration: Configuration
    private let state = Mutex(State())
    /// The read models' seal, loaded on first use (``readModelSeal()``).
    let readModelSealCache = ReadModelSealCache()

    /// Runs when an acquirer has found the pool full and is about to register as a waiter (tests only).
    private let beforeWaiting: (@Sendable () async -> Void)?

    public convenience init(configuration: Configuration) {
        self.init(configuration: configuration, beforeWaiting: nil)
    }

    /// A pool that calls `beforeWaiting` between finding itself full and registering the waiter,
    /// so a test can release a connection in exactly that gap.
    init(configuration: Configuration, beforeWaiting: (@Sendable () async -> Void)?) {
        self.configuration = configuration
        self.beforeWaiting = beforeWaiting
    }

    /// Convenience for a pool on `url` with default settings.
    public convenience init(url: String, maxConnections: Int = 8, role: String? = nil) {
        self.init(configuration: Configuration(url: url, maxConnections: maxConnections, role: role))
    }

    /// Leases a connection for the duration of `body`.
    @discardableResult
    public func withConnection<T>(
        isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection = try await acquire()
        do {
            let value = try await body(connection)
            await release(connection)
            return value
        } catch {
            await release(connection)
            throw error
        }
    }

    /// Runs `body` in a transaction on a leased connection; it commits when `body` returns.
    ///
    /// The transaction enters the ``ProjectionGate`` (shared) before anything else, so
    /// that `tether replay` can swap read models between commands, never inside one.
    @discardableResult
    public func withTransaction<T>(
        isolationLevel: String = "READ COMMITTED", isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            try await connection.withTransaction(
                isolationLevel: isolationLevel, prologue: ProjectionGate.enterSharedSQL, body)
        }
    }

    /// Runs a transaction as one job on a leased connection (``PostgresConnection/run(_:)``): no
    /// hop between threads per statement, and statements batched into as few round trips as
    /// ``TransactionJob/begin(_:)`` and ``TransactionJob/commit(_:)`` are called.
    ///
    /// It rolls back when `body` throws, and commits when `body` returns without committing.
    /// Like ``withTransaction(isolationLevel:isolation:_:)``, it enters the ``ProjectionGate`` first.
    public func withTransactionJob<T: Sendable>(_ body: @escaping @Sendable (TransactionJob) throws -> T) async throws -> T {
        try await withConnection { connection in
            try await connection.run { job in
                let transaction = TransactionJob(job: job)
                do {
                    let value = try body(transaction)
                    if transaction.state == .open { try transaction.commit([]) }
                    return value
                } catch {
                    if transaction.state == .open, !job.isBroken {
                        _ = try? job.query("ROLLBACK")
                    }
                    throw error
                }
            }
        }
    }

    /// Runs one statement on a leased connection.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await withConnection { try await $0.query(query) }
    }

    /// Closes idle connections and fails later acquisitions; leased ones close when returned.
    public func shutdown() {
        let (idle, waiters) = state.withLock { state -> ([PostgresConnection], [Waiter]) in
            state.isClosed = true
            defer {
                state.open -= state.idle.count
                state.idle = []
                state.waiters = []
            }
            return (state.idle, state.waiters)
        }
        _ = idle // released here; deinit calls PQfinish
        for waiter in waiters {
            waiter.continuation.resume(throwing: PostgresError.poolClosed)
        }
    }

    private func acquire() async throws -> PostgresConnection {
        while true {
            let lease = try await lease()
            switch lease {
            case .openNew:
                do {
                    return try await PostgresConnection.connect(configuration)
                } catch {
                    returnSlot()
                    throw error
                }
            case .connection(let connection):
                if connection.checkHealth() {
                    return connection
                }
                returnSlot()
            }
        }
    }

    private func lease() async throws -> Lease {
        if let ready = try state.withLock({ state in try Self.take(&state, limit: configuration.maxConnections) }) {
            return ready
        }
        let id = state.withLock { state -> UInt64 in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        await beforeWaiting?()
        let timeout = configuration.acquireTimeout
        let timer = Task { [weak self] in
            try await Task.sleep(for: timeout)
            self?.failWaiter(id, with: PostgresError.poolTimeout(
                "no PostgreSQL connection became free within \(timeout) (pool of \(self?.configuration.maxConnections ?? 0))"))
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // A connection released (or a slot given up) since the first look found no waiter to
                // hand it to: look again under the same lock that registers this waiter, or it would
                // sit idle while this waiter sleeps until the next release or its timeout.
                let outcome = state.withLock { state -> Result<Lease, any Error>? in
                    do {
                        if let ready = try Self.take(&state, limit: configuration.maxConnections) { return .success(ready) }
                    } catch {
                        return .failure(error)
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            failWaiter(id, with: CancellationError())
        }
    }

    /// An idle connection or a free slot, if the pool has one; throws once the pool is closed.
    private static func take(_ state: inout State, limit: Int) throws -> Lease? {
        if state.isClosed { throw PostgresError.poolClosed }
        if let connection = state.idle.popLast() { return .connection(connection) }
        if state.open < limit {
            state.open += 1
            return .openNew
        }
        return nil
    }

    private func failWaiter(_ id: UInt64, with error: any Error) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index)
        }
        waiter?.continuation.resume(throwing: error)
    }

    private func release(_ connection: PostgresConnection) async {
        var usable = !connection.isBroken
        if usable, connection.isInTransaction {
            // A body that leaked an open transaction must not hand it to the next caller.
            usable = (try? await connection.execute(simple: "ROLLBACK")) != nil
        }
        if usable {
            let waiter = state.withLock { state -> Waiter? in
                if state.isClosed {
                    state.open -= 1
                    return nil
                }
                if state.waiters.isEmpty {
                    state.idle.append(connection)
                    return nil
                }
                return state.waiters.removeFirst()
            }
            waiter?.continuation.resume(returning: .connection(connection))
        } else {
            returnSlot()
        }
    }

    /// Gives up a connection slot: a waiter (if any) may open a fresh connection in its place.
    private func returnSlot() {
        let waiter = state.withLock { state -> Waiter? in
            if !state.isClosed, !state.waiters.isEmpty {
                return state.waiters.removeFirst()
            }
            state.open -= 1
            return nil
        }
        waiter?.continuation.resume(returning: .openNew)
    }
}
