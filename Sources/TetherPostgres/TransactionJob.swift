/// One transaction running as a job on its connection: begun and committed together with the
/// statements around them, each in a single round trip.
///
/// `@unchecked Sendable`: it lives inside one ``PostgresClient/withTransactionJob(_:)`` job, on the
/// connection's queue, and its state is touched there only.
public final class TransactionJob: @unchecked Sendable {
    enum State { case idle, open, committed }

    let job: PostgresConnection.Job
    private(set) var state = State.idle

    init(job: PostgresConnection.Job) {
        self.job = job
    }

    private static let prologue: [PostgresQuery] = [
        "BEGIN ISOLATION LEVEL READ COMMITTED", PostgresQuery(unsafeSQL: ProjectionGate.enterSharedSQL),
    ]

    /// Begins the transaction (READ COMMITTED, through the ``ProjectionGate``) and runs `statements`
    /// in the same round trip; answers their rows, in order.
    @discardableResult
    public func begin(_ statements: [PostgresQuery]) throws -> [PostgresRows] {
        precondition(state == .idle, "a transaction job begins once")
        try refuseOnceCancelled()
        state = .open
        return Array(try job.pipeline(Self.prologue + statements).dropFirst(Self.prologue.count))
    }

    /// Begins, runs `statements` and commits, all in one round trip; answers their rows.
    @discardableResult
    public func runAlone(_ statements: [PostgresQuery]) throws -> [PostgresRows] {
        precondition(state == .idle, "a transaction job begins once")
        try refuseOnceCancelled()
        state = .open
        let rows = try job.pipeline(Self.prologue + statements + ["COMMIT"])
        state = .committed
        return Array(rows.dropFirst(Self.prologue.count).dropLast())
    }

    /// Runs `statements` inside the open transaction, in one round trip.
    @discardableResult
    public func run(_ statements: [PostgresQuery]) throws -> [PostgresRows] {
        precondition(state == .open, "statements run between begin and commit")
        try refuseOnceCancelled()
        return try job.pipeline(statements)
    }

    /// Runs `statements` in one round trip: inside the transaction while it is open, each on its own once it
    /// committed. For reads of what no transaction changes, such as a stream's earlier events.
    public func read(_ statements: [PostgresQuery]) throws -> [PostgresRows] {
        try job.pipeline(statements)
    }

    /// Runs `statements` and commits, in one round trip; answers their rows.
    @discardableResult
    public func commit(_ statements: [PostgresQuery]) throws -> [PostgresRows] {
        precondition(state == .open, "a transaction job commits once, after it began")
        try refuseOnceCancelled()
        let rows = try job.pipeline(statements + ["COMMIT"])
        state = .committed
        return Array(rows.dropLast())
    }

    /// Throws `CancellationError` once the job's task is cancelled (a request answered at its deadline or at the
    /// shutdown's): the transaction then neither begins nor goes on, and ``PostgresClient/withTransactionJob(_:)``
    /// rolls back what it began. A cancel that arrives while a statement runs stops it on the server instead.
    private func refuseOnceCancelled() throws {
        if job.isCancelled { throw CancellationError() }
    }
}
