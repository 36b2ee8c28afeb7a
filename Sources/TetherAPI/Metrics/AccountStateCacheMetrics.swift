import Synchronization
import TetherHTTP

/// The users' states kept between commands (``AccountStateCache``), at scrape time: how many, and the
/// bytes they are estimated to take against the cache's bound; and where commands' loads started.
struct AccountStateCacheMetrics: MetricsCollector {
    let cache: AccountStateCache

    func collect() async throws -> [MetricFamily] {
        let usage = cache.usage
        let loads = cache.loads
        return [
            .gauge("tether_account_states_kept", help: "Users' states kept in memory between commands.",
                   samples: [([], Double(usage.states))]),
            .gauge("tether_account_states_kept_bytes", help: "Estimated bytes of the users' states kept in memory.",
                   samples: [([], Double(usage.bytes))]),
            .gauge("tether_account_states_kept_bytes_limit", help: "The most bytes of users' states kept before the least recently used go.",
                   samples: [([], Double(cache.byteBudget))]),
            MetricFamily(
                name: "tether_account_state_loads_total", help: "Users' states loaded by commands, by where the load started.",
                type: .counter, samples: AccountStateCache.Loads.Origin.allCases.map {
                    MetricSample(labels: [("from", $0.rawValue)], value: Double(loads[$0]))
                }),
            MetricFamily(
                name: "tether_account_snapshots_written_total", help: "Users' snapshots written by commands that folded their state from the log.",
                type: .counter, samples: [MetricSample(value: Double(loads.snapshotsWritten.load(ordering: .relaxed)))]),
            MetricFamily(
                name: "tether_account_snapshots_passed_over_total",
                help: "Users' snapshots read and not used: the log was written again since, or they did not open.",
                type: .counter, samples: [MetricSample(value: Double(loads.snapshotsPassedOver.load(ordering: .relaxed)))]),
        ]
    }
}
