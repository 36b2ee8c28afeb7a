import CLibPQ
import Dispatch
import Foundation
import Synchronization

/// One PostgreSQL connection on libpq.
///
/// libpq's calls block, so each connection owns a serial dispatch queue and every
/// libpq call runs there, off Swift's cooperative threads.
///
/// `@unchecked Sendable`: the `PGconn` pointer is only touched on `queue`, and a
/// connection is leased to one task at a time by ``PostgresClient``. That task may share it
/// with its own child tasks (replay's bulk readers read the next page in one while the parent
/// writes rows): their calls queue on `queue` one after the other, never inside each other, so
/// only work that keeps nothing open between its calls (no transaction, no cursor) may share one.
public final class PostgresConnection: @unchecked Sendable {
    private let connection: OpaquePointer
    private let queue: DispatchQueue
    private let settings: PostgresClient.Configuration
    /// Set once the connection is known to be unusable; the pool then discards it.
    private(set) var isBroken = false
    /// Where the work now running on `queue` counts its round trips (only touched on `queue`).
    private var meter: PostgresMeter?
    /// The statements prepared on this connection (only touched on `queue`).
    private var preparedStatements = PreparedStatements()
    /// What asks the server to stop the statement running now (``onQueue(_:)``, when its task is cancelled).
    private let cancelHandle: OpaquePointer?

    /// Prepared statements: their names by statement text and parameter kinds (the key), the keys by
    /// name, and how often texts not prepared yet were seen.
    private struct PreparedStatements {
        var names: [StatementKey: String] = [:]
        var keys: [String: StatementKey] = [:]
        var seen: [StatementKey: Int] = [:]
        var counter = 0

        /// Forgets the statement `name` (it was not prepared after all).
        mutating func forget(_ name: String) {
            if let key = keys.removeValue(forKey: name) { names[key] = nil }
        }
    }

    /// A statement's text with which of its parameters are sent binary: what a prepared statement is
    /// kept under. Made without copying the text (a command's joined writes run to kilobytes).
    struct StatementKey: Hashable {
        let sql: String
        let parameterCount: Int
        /// Bit `i`: parameter `i` is binary, for the first 64 parameters.
        let binaryMask: UInt64
        /// The binary parameters from the 65th on, by index (empty for nearly every statement).
        let binaryBeyondMask: [Int]

        init(_ query: PostgresQuery) {
            sql = query.sql
            parameterCount = query.parameters.count
            var mask: UInt64 = 0
            var beyond: [Int] = []
            for (index, parameter) in query.parameters.enumerated() where parameter.isBinary {
                if index < 64 { mask |= 1 << UInt64(index) } else { beyond.append(index) }
            }
            binaryMask = mask
            binaryBeyondMask = beyond
        }
    }

    private init(connection: OpaquePointer, queue: DispatchQueue, settings: PostgresClient.Configuration) {
        self.connection = connection
        self.queue = queue
        self.settings = settings
        self.cancelHandle = PQgetCancel(connection)
    }

    deinit {
        if let cancelHandle { PQfreeCancel(cancelHandle) }
        PQfinish(connection)
    }

    /// Opens a connection described by `configuration.url` (a libpq URL or key=value string).
    public static func connect(_ configuration: PostgresClient.Configuration) async throws -> PostgresConnection {
        let queue = DispatchQueue(label: "tether.postgres.connection")
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try connectBlocking(configuration, queue: queue) })
            }
        }
    }

    private static func connectBlocking(
        _ configuration: PostgresClient.Configuration, queue: DispatchQueue
    ) throws -> PostgresConnection {
        // Our defaults come first so that the URL's own settings win.
        let keywords = ["connect_timeout", "application_name", "dbname"]
        let values = [String(configuration.connectTimeoutSeconds), configuration.applicationName, configuration.url]
        let handle = withCStringArray(keywords) { keywordPointers in
            withCStringArray(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let handle else {
            throw PostgresError.connectionFailed("could not connect to PostgreSQL: out of memory")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = errorMessage(handle)
            PQfinish(handle)
            throw PostgresError.connectionFailed(
                "could not connect to PostgreSQL at \(redacted(configuration.url)): \(message)")
        }
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        let connection = PostgresConnection(connection: handle, queue: queue, settings: configuration)
        var setup = "SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET intervalstyle = 'iso_8601'"
        if let role = configuration.role {
            setup += "; SET ROLE \(quoteIdentifier(role))"
        }
        if let timeout = configuration.statementTimeout {
            let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
            setup += "; SET statement_timeout = \(max(1, milliseconds))"
        }
        do {
            try connection.executeBlocking(simple: setup)
        } catch let error as PostgresError {
            let hint = configuration.role != nil && error.message.contains("does not exist") ? " (tether migrate creates it)" : ""
            throw PostgresError.connectionFailed(
                "connected to PostgreSQL at \(redacted(configuration.url)), but session set-up failed: \(error.description)\(hint)")
        }
        return connection
    }

    /// Runs a statement with bound parameters and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await onQueue { _ in try self.executeBlocking(query) }
    }

    /// Runs one or more statements without parameters (simple query protocol), as migrations need.
    public func execute(simple sql: String) async throws {
        try await onQueue { _ in try self.executeBlocking(simple: sql) }
    }

    /// Runs `body` inside `BEGIN`/`COMMIT`, rolling back when it throws. Once the task is cancelled, the
    /// transaction neither begins nor commits: it throws `CancellationError` and leaves nothing written.
    @discardableResult
    public func withTransaction<T>(
        isolationLevel: String = "READ COMMITTED", isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withTransaction(isolationLevel: isolationLevel, prologue: nil, body)
    }

    /// Like ``withTransaction(isolationLevel:isolation:_:)``, running `prologue` in the
    /// same round trip as `BEGIN` (``PostgresClient`` enters the ``ProjectionGate`` so).
    @discardableResult
    func withTransaction<T>(
        isolationLevel: String, prologue: String?, isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let begin = prologue.map { "BEGIN ISOLATION LEVEL \(isolationLevel); \($0)" } ?? "BEGIN ISOLATION LEVEL \(isolationLevel)"
        do {
            // Neither begun nor committed for a task already cancelled: its answer was given up on.
            try await onQueue(refusedOnceCancelled: true) { _ in try self.executeBlocking(simple: begin) }
            let value = try await body(self)
            try await onQueue(refusedOnceCancelled: true) { _ in try self.executeBlocking(simple: "COMMIT") }
            return value
        } catch {
            // Nothing to roll back after a refused BEGIN, or a COMMIT that failed (it ended the transaction).
            if !isBroken, isInTransaction {
                try? await execute(simple: "ROLLBACK")
            }
            throw error
        }
    }

    /// Whether the connection is still usable; a server restart or idle kill is noticed here.
    ///
    /// When the server has closed the connection (for example after a restart), the
    /// termination message is already waiting on the socket: reading it marks the
    /// connection broken without sending a query that would fail.
    ///
    /// It never waits (a zero-timeout poll and libpq's non-blocking input), so the pool calls it on
    /// the acquiring task, on a connection no one else holds, without a hop to the queue.
    func checkHealth() -> Bool {
        guard !isBroken, PQstatus(connection) == CONNECTION_OK else {
            isBroken = true
            return false
        }
        let socket = PQsocket(connection)
        guard socket >= 0 else {
            isBroken = true
            return false
        }
        for _ in 0..<4 {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 0)
            if ready == 0 { return true }
            if ready < 0 || PQconsumeInput(connection) == 0 || PQstatus(connection) != CONNECTION_OK {
                isBroken = true
                return false
            }
            // Drop anything the server sent while idle (notices, a FATAL before the close).
            while PQisBusy(connection) == 0, let result = PQgetResult(connection) {
                PQclear(result)
            }
        }
        return PQstatus(connection) == CONNECTION_OK
    }

    /// True while a transaction block is open (or failed and not yet rolled back).
    ///
    /// libpq answers from its own state without I/O; the pool asks on a connection no work is running on.
    var isInTransaction: Bool {
        let status = PQtransactionStatus(connection)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// Runs `work` on the connection's queue with the caller's ``PostgresMeter``.
    ///
    /// A task cancelled while its work runs asks the server to stop the statement running (PostgreSQL answers
    /// 57014 and the transaction is rolled back): a request answered 503 at its deadline or at the shutdown's
    /// must not commit after that answer. Work started after the cancellation runs (a rollback, a cleanup, an
    /// unlock), unless it is `refusedOnceCancelled` (a transaction's `BEGIN` and `COMMIT`): then it throws
    /// `CancellationError` without running. The queue starts nothing else until the cancel request has reached
    /// the server, so that it cannot stop a later statement: a backend that gets one between statements ignores it.
    private func onQueue<T: Sendable>(
        refusedOnceCancelled: Bool = false, _ work: @escaping @Sendable (WorkControl) throws -> T
    ) async throws -> T {
        let meter = PostgresMeter.current
        let control = WorkControl()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                queue.async {
                    let refused = control.state.withLock { state -> Bool in
                        if refusedOnceCancelled, state.isCancelled { return true }
                        state.progress = .running
                        return false
                    }
                    if refused { return continuation.resume(throwing: CancellationError()) }
                    self.meter = meter
                    let result = Result { try work(control) }
                    self.meter = nil
                    let cancelling = control.state.withLock { state -> DispatchSemaphore? in
                        defer { state.progress = .finished }
                        if case .cancelling(let sent) = state.progress { return sent } else { return nil }
                    }
                    cancelling?.wait()
                    continuation.resume(with: result)
                }
            }
        } onCancel: {
            let sent = control.state.withLock { state -> DispatchSemaphore? in
                state.isCancelled = true
                guard case .running = state.progress else { return nil }
                let sent = DispatchSemaphore(value: 0)
                state.progress = .cancelling(sent)
                return sent
            }
            // PQcancel opens a connection of its own to the server: not on the thread that cancels. The closure keeps
            // this connection, and so its cancel handle, alive until it returns.
            if let sent {
                DispatchQueue.global().async {
                    self.sendCancel()
                    sent.signal()
                }
            }
        }
    }

    /// Where the work of one ``onQueue(refusedOnceCancelled:_:)`` call is, and whether its task was cancelled
    /// (before or while it ran): `cancelling` is signalled once the cancel request has reached the server.
    final class WorkControl: Sendable {
        struct State {
            var progress = Progress.waiting
            var isCancelled = false
        }
        enum Progress {
            case waiting, running, cancelling(DispatchSemaphore), finished
        }
        let state = Mutex(State())

        /// Whether the task the work runs for has been cancelled.
        var isCancelled: Bool { state.withLock { $0.isCancelled } }
    }

    /// Asks the server to stop the statement this connection runs now, if any.
    private func sendCancel() {
        guard let cancelHandle else { return }
        var message = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancelHandle, &message, Int32(message.count))
    }

    /// Runs `job` on the connection's queue as one piece of work: every statement it sends, and
    /// everything it computes between them, happens there, with no hop back to a task in between.
    ///
    /// The job must not block on anything but this connection. It sees the caller's ``PostgresMeter``.
    public func run<T: Sendable>(_ job: @escaping @Sendable (Job) throws -> T) async throws -> T {
        try await onQueue { try job(Job(connection: self, control: $0)) }
    }

    /// The blocking face of a connection, given to a job running on its queue.
    ///
    /// `@unchecked Sendable`: it is only used on the connection's queue, inside ``run(_:)``.
    public struct Job: @unchecked Sendable {
        fileprivate let connection: PostgresConnection
        fileprivate let control: WorkControl

        /// Whether the task the job runs for has been cancelled: its answer was given up on (a deadline, a
        /// shutdown), so a transaction must not begin or commit any more.
        public var isCancelled: Bool { control.isCancelled }

        /// Runs one statement with bound parameters (one round trip).
        @discardableResult
        public func query(_ query: PostgresQuery) throws -> PostgresRows {
            try connection.executeBlocking(query)
        }

        /// Sends every statement, then waits once for all their results (one round trip, libpq's
        /// pipeline mode). Statements after one that fails are not run; the first error is thrown.
        @discardableResult
        public func pipeline(_ queries: [PostgresQuery]) throws -> [PostgresRows] {
            try connection.pipelineBlocking(queries)
        }

        /// Runs `copy`, a `COPY … FROM STDIN` statement in text format, sending `data` as its rows
        /// (one round trip); answers how many rows PostgreSQL took.
        @discardableResult
        public func copyIn(_ copy: String, data: [UInt8]) throws -> Int {
            try connection.copyInBlocking(copy, data: data)
        }

        /// Whether the connection is still usable (a failed statement may have broken it).
        public var isBroken: Bool { connection.isBroken }
    }

    private func copyInBlocking(_ copy: String, data: [UInt8]) throws -> Int {
        guard !isBroken else { throw PostgresError.connectionLost("the connection to PostgreSQL was lost") }
        meter?.count(roundTrips: 1, statements: [copy])
        guard let started = PQexec(connection, copy) else { try failWithoutResult() }
        guard PQresultStatus(started) == PGRES_COPY_IN else {
            _ = try rows(from: started) // the statement's error, or a statement that was not a COPY FROM STDIN
            throw PostgresError.protocolViolation("not a COPY … FROM STDIN statement: \(copy)")
        }
        PQclear(started)
        var failure: (any Error)?
        let chunk = 1 << 20
        data.withUnsafeBufferPointer { buffer in
            var offset = 0
            while offset < buffer.count, failure == nil {
                let count = min(chunk, buffer.count - offset)
                let sent = buffer.baseAddress!.advanced(by: offset).withMemoryRebound(to: CChar.self, capacity: count) {
                    PQputCopyData(connection, $0, Int32(count))
                }
                if sent != 1 { failure = PostgresError.connectionLost("COPY could not send its rows: \(Self.errorMessage(connection))") }
                offset += count
            }
        }
        if PQputCopyEnd(connection, failure == nil ? nil : "the client could not send every row") != 1, failure == nil {
            failure = PostgresError.connectionLost("COPY could not finish: \(Self.errorMessage(connection))")
        }
        var copied = 0
        while let result = PQgetResult(connection) {
            if PQresultStatus(result) == PGRES_COPY_IN {
                // The end of the data never reached the server: libpq would answer COPY_IN forever.
                PQclear(result)
                isBroken = true
                failure = failure ?? PostgresError.connectionLost("COPY could not finish: \(Self.errorMessage(connection))")
                break
            }
            do {
                copied += try rows(from: result).affectedRows
            } catch {
                failure = failure ?? error
            }
        }
        if let failure {
            if PQstatus(connection) != CONNECTION_OK { isBroken = true }
            throw failure
        }
        return copied
    }

    private func executeBlocking(_ query: PostgresQuery) throws -> PostgresRows {
        try pipelineBlocking([query])[0]
    }

    /// Sends `queries` in one pipeline and reads every result after a single sync.
    private func pipelineBlocking(_ queries: [PostgresQuery]) throws -> [PostgresRows] {
        guard !isBroken else { throw PostgresError.connectionLost("the connection to PostgreSQL was lost") }
        guard !queries.isEmpty else { return [] }
        meter?.count(roundTrips: 1, statements: queries.map(\.sql))
        guard PQenterPipelineMode(connection) == 1 else {
            throw PostgresError.protocolViolation("libpq could not enter pipeline mode: \(Self.errorMessage(connection))")
        }
        defer {
            // It only fails with results left unread: the connection is then in no state to reuse.
            if PQexitPipelineMode(connection) != 1 { isBroken = true }
        }
        // What each result in turn answers: a statement being prepared (its name), or a query.
        var expected: [String?] = []
        expected.reserveCapacity(queries.count * 2)
        for query in queries {
            let (name, isNew) = preparedName(for: query)
            let sent = Self.withParameters(of: query) { count, types, values, lengths, formats -> Int32 in
                guard let name else { return PQsendQueryParams(connection, query.sql, count, types, values, lengths, formats, 0) }
                if isNew {
                    guard PQsendPrepare(connection, name, query.sql, count, types) == 1 else { return 0 }
                    expected.append(name)
                }
                return PQsendQueryPrepared(connection, name, count, values, lengths, formats, 0)
            }
            guard sent == 1 else { try failWithoutResult() }
            expected.append(nil)
        }
        guard PQpipelineSync(connection) == 1 else { try failWithoutResult() }
        var results: [PostgresRows] = []
        results.reserveCapacity(queries.count)
        var firstError: (any Error)?
        var answered = 0
        // Each statement's result is followed by a NULL; the sync's own result ends the pipeline.
        while true {
            guard let result = PQgetResult(connection) else {
                if PQstatus(connection) != CONNECTION_OK { try failWithoutResult() }
                continue
            }
            let status = PQresultStatus(result)
            if status == PGRES_PIPELINE_SYNC {
                PQclear(result)
                break
            }
            let preparing = answered < expected.count ? expected[answered] : nil
            answered += 1
            if let preparing, status != PGRES_COMMAND_OK {
                // Not prepared after all (refused, or not run after an earlier error): prepare it again next time.
                preparedStatements.forget(preparing)
            }
            if status == PGRES_PIPELINE_ABORTED {
                PQclear(result)
                continue
            }
            do {
                let rows = try rows(from: result)
                if preparing == nil { results.append(rows) }
            } catch {
                if firstError == nil { firstError = error }
                if isBroken { throw error }
            }
        }
        if let firstError { throw firstError }
        return results
    }

    /// The most statements a connection keeps prepared; past it, new ones are sent unprepared.
    static let preparedStatementLimit = 256

    /// The prepared statement to run `query` as, and whether it must be prepared first; nil to send it
    /// unprepared. A statement is prepared the second time its text (with its parameter types) is
    /// seen, so text made once (a multi-row insert of some length) never fills the cache.
    private func preparedName(for query: PostgresQuery) -> (name: String?, isNew: Bool) {
        let key = StatementKey(query)
        if let name = preparedStatements.names[key] { return (name, false) }
        guard preparedStatements.names.count < Self.preparedStatementLimit else { return (nil, false) }
        let seen = preparedStatements.seen[key, default: 0] + 1
        guard seen >= 2 else {
            if preparedStatements.seen.count > 4 * Self.preparedStatementLimit { preparedStatements.seen = [:] }
            preparedStatements.seen[key] = seen
            return (nil, false)
        }
        preparedStatements.seen[key] = nil
        preparedStatements.counter += 1
        let name = "tether_\(preparedStatements.counter)"
        preparedStatements.names[key] = name
        preparedStatements.keys[name] = key
        return (name, true)
    }

    /// Calls `body` with a query's parameters as libpq takes them (type oids, values, lengths, formats).
    ///
    /// The arrays and the values' bytes (each text with its NUL) are temporary allocations, on the stack when
    /// small: libpq copies the values into its output buffer before `body` returns. A command's writes carry
    /// a few dozen parameters, and a copy (`strdup`) and array each cost more than the bytes.
    private static func withParameters<R>(
        of query: PostgresQuery,
        _ body: (Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R
    ) -> R {
        let parameters = query.parameters
        let count = parameters.count
        guard count > 0 else { return body(0, nil, nil, nil, nil) }
        var size = 0
        for parameter in parameters {
            switch parameter.storage {
            case .null: break
            case .text(let text): size += text.utf8.count + 1
            case .bytea(let bytes): size += bytes.count
            }
        }
        return withUnsafeTemporaryAllocation(of: Oid.self, capacity: count) { types in
            withUnsafeTemporaryAllocation(of: Int32.self, capacity: 2 * count) { lengthsAndFormats in
                withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: count) { values in
                    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(size, 1)) { storage in
                        let lengths = lengthsAndFormats.baseAddress!, formats = lengths + count
                        var offset = 0
                        /// Copies `bytes` into the storage and points the parameter at them.
                        func place(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) {
                            let start = storage.baseAddress! + offset
                            if let base = bytes.baseAddress { start.update(from: base, count: bytes.count) }
                            offset += bytes.count
                            values[index] = UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self)
                        }
                        for (index, parameter) in parameters.enumerated() {
                            types[index] = 0
                            lengths[index] = 0
                            formats[index] = 0
                            switch parameter.storage {
                            case .null:
                                values[index] = nil
                            case .text(let text):
                                if text.utf8.withContiguousStorageIfAvailable({ place($0, at: index) }) == nil {
                                    Array(text.utf8).withUnsafeBufferPointer { place($0, at: index) }
                                }
                                storage[offset] = 0
                                offset += 1
                            case .bytea(let bytes):
                                types[index] = 17 // bytea
                                formats[index] = 1
                                lengths[index] = Int32(bytes.count)
                                bytes.withUnsafeBufferPointer { place($0, at: index) }
                            }
                        }
                        return body(Int32(count), types.baseAddress, UnsafePointer(values.baseAddress), lengths, formats)
                    }
                }
            }
        }
    }

    private func executeBlocking(simple sql: String) throws {
        guard !isBroken else { throw PostgresError.connectionLost("the connection to PostgreSQL was lost") }
        meter?.count(roundTrips: 1, statements: [sql])
        _ = try rows(from: PQexec(connection, sql))
    }

    /// Turns a libpq result into rows or a precise error, and frees it.
    private func rows(from result: OpaquePointer?) throws -> PostgresRows {
        guard let result else {
            try failWithoutResult()
        }
        let status = PQresultStatus(result)
        if status == PGRES_TUPLES_OK || status == PGRES_SINGLE_TUPLE {
            return PostgresRows(taking: result) // which clears it when the rows go
        }
        defer { PQclear(result) }
        switch status {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
            return PostgresRows(affectedRows: affected)
        default:
            if PQstatus(connection) != CONNECTION_OK {
                isBroken = true
                throw PostgresError.connectionLost("the connection to PostgreSQL was lost: \(Self.errorMessage(connection))")
            }
            func field(_ code: Character) -> String? {
                guard let value = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
                return String(cString: value)
            }
            let sqlState = field("C")
            let message = field("M") ?? Self.errorMessage(connection)
            let error = PostgresError.server(message, sqlState: sqlState, constraint: field("n"), detail: field("D"))
            if error.isUnavailable {
                isBroken = true
            }
            throw error
        }
    }

    private func failWithoutResult() throws -> Never {
        if PQstatus(connection) != CONNECTION_OK {
            isBroken = true
            throw PostgresError.connectionLost("the connection to PostgreSQL was lost: \(Self.errorMessage(connection))")
        }
        throw PostgresError.protocolViolation("libpq returned no result: \(Self.errorMessage(connection))")
    }

    private static func errorMessage(_ handle: OpaquePointer) -> String {
        guard let message = PQerrorMessage(handle) else { return "unknown error" }
        let text = String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "unknown error" : text.replacingOccurrences(of: "\n", with: "; ")
    }

    /// Quotes an identifier for SQL text (`"role"`), doubling embedded quotes.
    static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Why libpq cannot read `url` as a connection string (an unknown option, a bad URI); nil when it can. Such a
    /// string could never connect: a server given one would retry it forever. libpq quotes the part it could not
    /// read, which may be the password (`invalid percent-encoded token: "Pa%ss"`): every quoted part is masked.
    ///
    /// libpq reads the values of a few options only when it connects (`sslmode=bogus`, a port that is no number), so
    /// those are checked here as libpq 15 checks them.
    public static func connectionStringProblem(_ url: String) -> String? {
        var message: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &message) else {
            defer { if let message { PQfreemem(message) } }
            let text = message.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "cannot be read"
            return text.replacingOccurrences(of: #""[^"]*""#, with: "\"…\"", options: .regularExpression)
        }
        defer { PQconninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val, let problem = valueProblem(String(cString: keyword), String(cString: value)) { return problem }
            option += 1
        }
        return nil
    }

    /// What C's `isspace` skips around a number libpq reads (not Unicode's other spaces, which it refuses).
    private static let cSpace = CharacterSet(charactersIn: " \t\n\r\u{0B}\u{0C}")

    /// The options whose values libpq takes from a list, and the list.
    private static let enumeratedOptions: [String: [String]] = [
        "sslmode": ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"],
        "target_session_attrs": ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"],
        "gssencmode": ["disable", "prefer", "require"],
        "channel_binding": ["disable", "prefer", "require"],
    ]

    /// Why libpq would refuse `value` for the option `keyword` when connecting; nil when it would not. None of these
    /// options is secret, so the value is shown.
    private static func valueProblem(_ keyword: String, _ value: String) -> String? {
        if let allowed = enumeratedOptions[keyword], !allowed.contains(value) {
            return "invalid \(keyword) value \"\(value)\" (libpq takes \(allowed.joined(separator: ", ")))"
        }
        switch keyword {
        case "port":
            // One port, or one per host (an empty entry is the default).
            // libpq reads each as strtol does, white space around it allowed.
            let ports = value.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: Self.cSpace) }
            guard ports.allSatisfy({ $0.isEmpty || UInt16($0).map { $0 > 0 } == true }) else {
                return "invalid port \"\(value)\" (a port is a number from 1 to 65535, one for each host)"
            }
        case "connect_timeout":
            guard Int32(value.trimmingCharacters(in: Self.cSpace)) != nil else { return "invalid connect_timeout \"\(value)\" (a whole number of seconds)" }
        default:
            break
        }
        return nil
    }

    /// A connection string as it may be shown: every password in it replaced by `***`, whatever its form (the
    /// URL's `user:password@`, a `password=` query parameter or keyword, quoted or not), parseable or not.
    static func redacted(_ url: String) -> String {
        var text = url
        for (pattern, template) in url.contains("://") ? urlRedactions : keywordRedactions {
            text = pattern.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: template)
        }
        return text
    }

    /// A URL's `user:password@` (up to the last `@` of the authority: a raw `@` in a password), then a `password`
    /// query parameter (up to the next `&`).
    private nonisolated(unsafe) static let urlRedactions: [(NSRegularExpression, String)] = [
        (try! NSRegularExpression(pattern: #"(://[^/?#@:\s]*:)[^/?#\s]*@"#), "$1***@"),
        (try! NSRegularExpression(pattern: #"([?&]password=)[^&#\s]*"#, options: .caseInsensitive), "$1***"),
    ]

    /// A keyword string's `password=` value, quoted, or up to the next space that no backslash escapes (libpq reads
    /// `pass\ word` as one value).
    private nonisolated(unsafe) static let keywordRedactions: [(NSRegularExpression, String)] = [
        (try! NSRegularExpression(pattern: #"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:\\.|[^\s\\])+\\?)"#, options: .caseInsensitive), "$1***"),
    ]
}

/// Calls `body` with a NULL-terminated array of C strings that live for the call.
private func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let duplicates = strings.map { strdup($0) }
    defer { duplicates.forEach { free($0) } }
    let pointers = duplicates.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

extension PostgresConnection {
    /// Runs `enter`, then `body`, then `leave`: after `body` returns, and after it throws unless the connection
    /// broke. For what a session holds around some work: an advisory lock, a setting.
    func around<T>(
        _ enter: PostgresQuery, _ leave: PostgresQuery, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async throws -> T {
        try await query(enter)
        do {
            let value = try await body()
            try await query(leave)
            return value
        } catch {
            if !isBroken { _ = try? await query(leave) }
            throw error
        }
    }
}
