import Foundation
import TetherHTTP
import TetherPostgres

/// Gauges of the last `tether replay` run of each projection and mode, read at scrape time
/// from `projection_replays`, where every finished run is recorded.
public struct ReplayMetrics: MetricsCollector {
    let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    public func collect() async throws -> [MetricFamily] {
        let runs = try await ProjectionReplayRecord.latest(on: database)
        func samples(_ value: (ProjectionReplayRecord) -> Double) -> [(labels: [(name: String, value: String)], value: Double)] {
            runs.map { ([("projection", $0.projection), ("mode", $0.mode.rawValue)], value($0)) }
        }
        return [
            .gauge("tether_replay_last_events_per_second", help: "Events per second of the last replay run.",
                   samples: samples(\.eventsPerSecond)),
            .gauge("tether_replay_last_phase_events_per_second",
                   help: "Events per second of each phase of the last replay run: bulk (rows written with COPY) and catch_up (event by event).",
                   samples: runs.flatMap { run in
                       [("bulk", run.bulkEventsPerSecond), ("catch_up", run.catchUpEventsPerSecond)].map { phase, rate in
                           ([("projection", run.projection), ("mode", run.mode.rawValue), ("phase", phase)], rate)
                       }
                   }),
            .gauge("tether_replay_last_duration_seconds", help: "Duration of the last replay run.", samples: samples(\.durationSeconds)),
            .gauge("tether_replay_last_events", help: "Events applied by the last replay run.", samples: samples { Double($0.events) }),
            .gauge("tether_replay_last_finished_timestamp_seconds", help: "When the last replay run finished (Unix time).",
                   samples: samples { $0.finishedAt.timeIntervalSince1970 }),
            .gauge("tether_replay_last_drifting_rows", help: "Rows that drifted, and dangling references, in the last --verify run.",
                   samples: runs.filter { $0.driftingRows != nil }.map {
                       ([("projection", $0.projection), ("mode", $0.mode.rawValue)], Double($0.driftingRows ?? 0))
                   }),
        ]
    }
}
