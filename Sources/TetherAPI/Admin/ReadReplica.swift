import Foundation
import TetherHTTP
import TetherPostgres

/// A standby that answers support reads (`TETHER_DATABASE_READ_URL`): admin search, user detail,
/// history and the event feed. Commands, the records of who read what, and every read a user makes
/// about themselves stay on the primary, so nobody reads older data than they wrote.
public struct ReadReplica: Sendable {
    /// The pool on the standby.
    public let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    /// How far behind the primary the answers may be, in seconds (`lag`): 0 while the standby has
    /// replayed everything it received (or is no standby at all, after a promotion), otherwise the
    /// time since the last transaction it replayed committed on the primary.
    static let lagStatement: PostgresQuery = """
        SELECT (CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
                     ELSE greatest(0, extract(epoch FROM now() - pg_last_xact_replay_timestamp())) END)::float8 AS lag
        """

    /// The lag of ``lagStatement``'s rows.
    static func lag(from rows: PostgresRows) throws -> Double {
        try rows.first?.decode("lag", as: Double?.self) ?? 0
    }

    /// The standby's lag now.
    public func lag() async throws -> Double {
        try Self.lag(from: try await database.query(Self.lagStatement))
    }
}

/// `tether_database_replica_lag_seconds` on `/metrics`, measured at scrape time.
struct ReplicaMetrics: MetricsCollector {
    let replica: ReadReplica

    func collect() async throws -> [MetricFamily] {
        [.gauge(
            "tether_database_replica_lag_seconds",
            help: "How far behind the primary the read replica's answers may be (0 while it has replayed all it received).",
            samples: [([], try await replica.lag())])]
    }
}
