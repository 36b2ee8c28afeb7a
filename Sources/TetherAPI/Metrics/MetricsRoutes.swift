import TetherHTTP

/// Metrics measured when `/metrics` is scraped rather than kept in memory, such as
/// gauges read from a table.
public protocol MetricsCollector: Sendable {
    /// The families as they stand now.
    func collect() async throws -> [MetricFamily]
}

/// `GET /metrics`: the registry's counters and histograms, then every collector's families,
/// in Prometheus's text format 0.0.4.
///
/// Replay's gauges (events per second and duration of the last run, read from
/// the table where `tether replay` records its runs) belong in a
/// ``MetricsCollector`` passed to ``TetherService`` as `metricsCollectors`.
public struct MetricsRoutes: Sendable {
    let registry: MetricsRegistry
    let collectors: [any MetricsCollector]
    let collectorFailures: Counter

    public init(registry: MetricsRegistry, collectors: [any MetricsCollector] = []) {
        self.registry = registry
        self.collectors = collectors
        collectorFailures = registry.counter(
            "tether_metrics_collector_failures_total",
            help: "Scrapes in which a collector failed and its metrics were left out.")
    }

    /// Adds the route to `router`.
    public func register(on router: inout Router) {
        router.get("/metrics") { _ in
            var families: [MetricFamily] = []
            for collector in collectors {
                do {
                    families += try await collector.collect()
                } catch {
                    // One failing source must not blank the whole scrape.
                    collectorFailures.increment()
                }
            }
            return HTTPResponse(
                status: 200, headers: ["Content-Type": PrometheusText.contentType],
                body: Array(PrometheusText.render(registry.snapshot() + families).utf8))
        }
    }
}
