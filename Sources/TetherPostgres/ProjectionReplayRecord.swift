import Foundation

/// A finished `tether replay` run, as recorded in `projection_replays`.
public struct ProjectionReplayRecord: Sendable, Hashable {
    /// The projection rebuilt.
    public var projection: String
    /// `replay` (swapped in) or `verify` (compared).
    public var mode: ProjectionReplay.Mode
    /// Events applied.
    public var events: Int
    public var durationSeconds: Double
    public var eventsPerSecond: Double
    /// Rows that differed from the log; nil for a replay, which does not compare.
    public var driftingRows: Int?
    public var finishedAt: Date
    /// Events the bulk phase loaded, and how long it took (0 for a run without one).
    public var bulkEvents: Int
    public var bulkSeconds: Double

    /// Events per second of the bulk phase, and of the rest of the run (catch-up, swap or compare).
    public var bulkEventsPerSecond: Double { ReplayProgress.rate(bulkEvents, seconds: bulkSeconds) }
    public var catchUpEventsPerSecond: Double { ReplayProgress.rate(events - bulkEvents, seconds: durationSeconds - bulkSeconds) }

    /// The newest run of each projection in each mode, for `/metrics`.
    ///
    /// Readable by the service role.
    public static func latest(on client: PostgresClient) async throws -> [ProjectionReplayRecord] {
        let rows = try await client.query("""
            SELECT DISTINCT ON (projection, mode) projection, mode, events, duration_seconds, events_per_second,
                   drifting_rows, finished_at, bulk_events, bulk_seconds
            FROM projection_replays ORDER BY projection, mode, finished_at DESC, id DESC
            """)
        return try rows.map { row in
            let mode: String = try row.decode("mode")
            return ProjectionReplayRecord(
                projection: try row.decode("projection"), mode: ProjectionReplay.Mode(rawValue: mode) ?? .replace,
                events: try row.decode("events"), durationSeconds: try row.decode("duration_seconds"),
                eventsPerSecond: try row.decode("events_per_second"), driftingRows: try row.decode("drifting_rows"),
                finishedAt: try row.decode("finished_at"), bulkEvents: try row.decode("bulk_events"),
                bulkSeconds: try row.decode("bulk_seconds"))
        }
    }

    /// Records `outcome` (inside the swap's transaction, for a replay).
    static func insert(_ outcome: ReplayOutcome, on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO projection_replays (
                projection, mode, events, duration_seconds, events_per_second, drifting_rows, bulk_events, bulk_seconds)
            VALUES (\(outcome.projection), \(outcome.mode.rawValue), \(outcome.events), \(outcome.duration.seconds),
                    \(outcome.eventsPerSecond), \(outcome.mode == .verify ? outcome.drift.count : nil),
                    \(outcome.bulkEvents), \(outcome.bulkDuration.seconds))
            """)
    }
}
