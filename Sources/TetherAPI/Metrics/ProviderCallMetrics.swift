import Foundation
import TetherHTTP
import TetherPostgres

/// The provider-call outbox at scrape time: calls waiting, by action, and the age of the oldest.
public struct ProviderCallMetrics: MetricsCollector {
    let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    public func collect() async throws -> [MetricFamily] {
        let rows = try await database.query("""
            SELECT action, count(*)::bigint AS pending, extract(epoch FROM now() - min(created_at))::float8 AS oldest
            FROM provider_calls WHERE done_at IS NULL AND abandoned_at IS NULL GROUP BY action ORDER BY action
            """)
        var pending: [(labels: [(name: String, value: String)], value: Double)] = []
        var oldest = 0.0
        for row in rows {
            pending.append(([("action", try row.decode("action", as: String.self))], Double(try row.decode("pending", as: Int64.self))))
            oldest = max(oldest, try row.decode("oldest", as: Double?.self) ?? 0)
        }
        return [
            .gauge("tether_provider_calls_pending", help: "Calls to providers waiting in the outbox (revocations), by action.", samples: pending),
            .gauge("tether_provider_calls_oldest_pending_seconds", help: "Age of the oldest call still waiting (0 when none).",
                   samples: [([], oldest)]),
        ]
    }
}
