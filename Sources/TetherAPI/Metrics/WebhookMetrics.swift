import Foundation
import TetherHTTP
import TetherPostgres

/// Gauges of each webhook subscription, read at scrape time: how far behind the log it is (events of
/// the log after its cursor) and how old the oldest of them is.
public struct WebhookMetrics: MetricsCollector {
    let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    public func collect() async throws -> [MetricFamily] {
        let rows = try await database.query("""
            SELECT s.id, s.status,
                   (SELECT count(*) FROM events e WHERE (e.tx, e.position) > (s.cursor_tx, s.cursor_position)
                        AND e.type = ANY(\(PostgresArray(PublicEvent.internalTypes))::text[]))::bigint AS lag,
                   (SELECT extract(epoch FROM now() - min(e.occurred_at)) FROM events e
                    WHERE (e.tx, e.position) > (s.cursor_tx, s.cursor_position)
                        AND e.type = ANY(\(PostgresArray(PublicEvent.internalTypes))::text[]))::float8 AS oldest
            FROM webhook_subscriptions s ORDER BY s.created_at
            """)
        var lag: [(labels: [(name: String, value: String)], value: Double)] = []
        var age: [(labels: [(name: String, value: String)], value: Double)] = []
        for row in rows {
            let labels = [("subscription", try row.decode("id", as: UUID.self).lowercasedText), ("status", try row.decode("status", as: String.self))]
            lag.append((labels, Double(try row.decode("lag", as: Int64.self))))
            age.append((labels, try row.decode("oldest", as: Double?.self) ?? 0))
        }
        return [
            .gauge("tether_webhook_lag_events", help: "Public events in the log after the subscription's cursor (not yet delivered).", samples: lag),
            .gauge("tether_webhook_oldest_undelivered_seconds", help: "Age of the oldest public event not yet delivered (0 when none).",
                   samples: age),
        ]
    }
}
