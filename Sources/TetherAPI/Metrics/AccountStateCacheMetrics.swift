import TetherHTTP

/// The users' states kept between commands (``AccountStateCache``), at scrape time: how many, and the
/// bytes they are estimated to take against the cache's bound.
struct AccountStateCacheMetrics: MetricsCollector {
    let cache: AccountStateCache

    func collect() async throws -> [MetricFamily] {
        let usage = cache.usage
        return [
            .gauge("tether_account_states_kept", help: "Users' states kept in memory between commands.",
                   samples: [([], Double(usage.states))]),
            .gauge("tether_account_states_kept_bytes", help: "Estimated bytes of the users' states kept in memory.",
                   samples: [([], Double(usage.bytes))]),
            .gauge("tether_account_states_kept_bytes_limit", help: "The most bytes of users' states kept before the least recently used go.",
                   samples: [([], Double(cache.byteBudget))]),
        ]
    }
}
