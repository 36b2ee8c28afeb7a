/// The lock that lets `tether replay` swap read models while the server keeps writing.
///
/// Every transaction that `PostgresClient.withTransaction` opens takes this gate in
/// shared mode before its first statement (in the same round trip as `BEGIN`), and
/// holds it until it commits or rolls back. Shared holders never wait for each other.
/// The replay's swap takes it in exclusive mode, which
///
/// - waits for every command already in flight: a writer that read or wrote the old
///   tables finishes (and commits its events) before the swap touches them, so no
///   write lands in a table that is about to stop being live;
/// - makes every new command wait at `BEGIN` for the few milliseconds of the swap.
///   PostgreSQL queues a shared request behind a waiting exclusive one, so a steady
///   stream of writers cannot starve the swap.
///
/// The gate is taken before any other lock of the transaction, and the swapper holds
/// nothing when it asks for it, so gate and table locks never form a cycle.
/// Single statements outside a transaction (plain reads) do not take it; the swap
/// waits for them on the table locks with a short `lock_timeout` and retries, so it
/// is the swap, never a reader, that gives way.
///
/// Two rules follow for code that writes projections: a transaction never waits for
/// another transaction of the same process (the second would queue behind a waiting
/// swap that waits for the first; the swap's gate timeout breaks that knot, at the
/// price of a stall), and every row of a projection table comes from events, since
/// a swap keeps only what the log rebuilds.
///
/// Caveat: the shared lock is the first statement of the transaction, so under
/// `REPEATABLE READ` or `SERIALIZABLE` it fixes the snapshot before a swap it waited
/// for. Transactions that touch projection tables therefore use `READ COMMITTED`
/// (all of Tether's do).
public enum ProjectionGate {
    /// Advisory lock key: the ASCII of "tether" plus a kind byte (migrations use 1).
    public static let key: Int64 = 0x7465_7468_6572_0002

    /// Appended to `BEGIN` by `PostgresClient.withTransaction`.
    static let enterSharedSQL = "SELECT pg_advisory_xact_lock_shared(\(key))"

    /// Takes the gate exclusively for the rest of the transaction open on `connection`.
    ///
    /// Waits for every writer in flight (up to the transaction's `lock_timeout`).
    public static func closeExclusively(on connection: PostgresConnection) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(\(key))")
    }
}
