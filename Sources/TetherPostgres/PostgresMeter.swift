import Synchronization

/// Counts the round trips and transactions that the work of one task makes to PostgreSQL.
///
/// Bound with `PostgresMeter.$current.withValue(meter) { … }`, every statement run for that task
/// on any connection is counted, so a test can hold a command to its budget of round trips. A
/// pipeline counts as one round trip, however many statements it carries.
public final class PostgresMeter: Sendable {
    /// The meter of the running task, if any.
    @TaskLocal public static var current: PostgresMeter?

    private struct Counts {
        var roundTrips = 0
        var transactions = 0
        var statements: [String] = []
    }

    private let counts = Mutex(Counts())

    public init() {}

    /// Waits on the server so far: one per statement sent alone, one per pipeline.
    public var roundTrips: Int { counts.withLock { $0.roundTrips } }
    /// Transactions begun so far (`BEGIN` statements).
    public var transactions: Int { counts.withLock { $0.transactions } }
    /// Every statement's SQL, in order (for a failing budget's message).
    public var statements: [String] { counts.withLock { $0.statements } }

    func count(roundTrips: Int, statements: [String]) {
        counts.withLock { counts in
            counts.roundTrips += roundTrips
            counts.statements.append(contentsOf: statements)
            counts.transactions += statements.filter { $0.hasPrefix("BEGIN") }.count
        }
    }
}
