import Synchronization

/// The metrics a process keeps in memory (counters, histograms), rendered for `GET /metrics`.
///
/// Each metric is registered once, by name, when its owner is built; the owner
/// keeps the returned ``Counter`` or ``Histogram`` and records into it. Values
/// measured only at scrape time (gauges read from a table) are not registered:
/// they are passed to ``PrometheusText/render(_:)`` beside ``snapshot()``.
public final class MetricsRegistry: Sendable {
    private let metrics = Mutex<[any RegisteredMetric]>([])

    /// Creates an empty registry.
    public init() {}

    /// Registers a counter; `labels` name the labels every increment gives values for, in order.
    ///
    /// Registering a name twice is a programming error and traps.
    public func counter(_ name: String, help: String, labels: [String] = []) -> Counter {
        register(Counter(name: name, help: help, labelNames: labels))
    }

    /// Registers a histogram with upper bounds `buckets` (ascending; `+Inf` is implied).
    ///
    /// Registering a name twice is a programming error and traps.
    public func histogram(
        _ name: String, help: String, labels: [String] = [], buckets: [Double] = Histogram.defaultBuckets
    ) -> Histogram {
        register(Histogram(name: name, help: help, labelNames: labels, buckets: buckets))
    }

    /// Every registered metric's current values, in registration order.
    public func snapshot() -> [MetricFamily] {
        metrics.withLock { $0 }.map(\.family)
    }

    private func register<Metric: RegisteredMetric>(_ metric: Metric) -> Metric {
        precondition(MetricFamily.isValidName(metric.name), "\(metric.name) is not a valid metric name")
        metrics.withLock { metrics in
            precondition(!metrics.contains { $0.name == metric.name }, "metric \(metric.name) is registered twice")
            metrics.append(metric)
        }
        return metric
    }
}

/// A metric the registry can snapshot.
protocol RegisteredMetric: Sendable {
    var name: String { get }
    var family: MetricFamily { get }
}

/// A value that only goes up (requests served, events written).
public final class Counter: RegisteredMetric {
    let name: String
    private let help: String
    private let labelNames: [String]
    private let values: Mutex<[[String]: Double]>

    init(name: String, help: String, labelNames: [String]) {
        self.name = name
        self.help = help
        self.labelNames = labelNames
        // A metric without labels has its one series from the start, so a scrape shows 0 rather than nothing.
        values = Mutex(labelNames.isEmpty ? [[]: 0] : [:])
    }

    /// Adds `amount` (not negative) to the series with `labelValues`, given in the order the labels were registered.
    public func increment(_ labelValues: String..., by amount: Double = 1) {
        precondition(labelValues.count == labelNames.count, "\(name) takes \(labelNames.count) label values")
        precondition(amount >= 0, "a counter only goes up")
        values.withLock { $0[labelValues, default: 0] += amount }
    }

    /// The current value of the series with `labelValues` (0 when never incremented).
    public func value(_ labelValues: String...) -> Double {
        values.withLock { $0[labelValues] ?? 0 }
    }

    var family: MetricFamily {
        let series = values.withLock { $0 }.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        return MetricFamily(
            name: name, help: help, type: .counter,
            samples: series.map { MetricSample(labels: Array(zip(labelNames, $0.key)), value: $0.value) })
    }
}

/// Observations counted into buckets by size (request latencies, query durations).
public final class Histogram: RegisteredMetric {
    /// Prometheus's default buckets, in seconds: 5 ms to 10 s.
    public static let defaultBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private struct Series {
        /// Observations per bucket, not cumulative; the last slot is `+Inf`.
        var counts: [UInt64]
        var sum: Double = 0
    }

    let name: String
    private let help: String
    private let labelNames: [String]
    private let buckets: [Double]
    private let series: Mutex<[[String]: Series]>

    init(name: String, help: String, labelNames: [String], buckets: [Double]) {
        precondition(!buckets.isEmpty && zip(buckets, buckets.dropFirst()).allSatisfy { $0 < $1 }, "\(name): buckets must ascend")
        self.name = name
        self.help = help
        self.labelNames = labelNames
        self.buckets = buckets
        // A metric without labels has its one series from the start, so a scrape shows zeros rather than nothing.
        series = Mutex(labelNames.isEmpty ? [[]: Series(counts: Array(repeating: 0, count: buckets.count + 1))] : [:])
    }

    /// Records one observation of `value` in the series with `labelValues`.
    public func observe(_ value: Double, _ labelValues: String...) {
        record(value, labelValues)
    }

    /// Runs `body` and observes how long it took, in seconds, whether it returned or threw.
    public func time<T>(_ labelValues: String..., body: () async throws -> T) async rethrows -> T {
        let start = ContinuousClock.now
        defer {
            let elapsed = ContinuousClock.now - start
            record(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, labelValues)
        }
        return try await body()
    }

    private func record(_ value: Double, _ labelValues: [String]) {
        precondition(labelValues.count == labelNames.count, "\(name) takes \(labelNames.count) label values")
        let slot = buckets.firstIndex { value <= $0 } ?? buckets.count
        let empty = Series(counts: Array(repeating: 0, count: buckets.count + 1))
        series.withLock { series in
            series[labelValues, default: empty].counts[slot] += 1
            series[labelValues, default: empty].sum += value
        }
    }

    /// How many observations the series with `labelValues` holds.
    public func count(_ labelValues: String...) -> UInt64 {
        series.withLock { $0[labelValues]?.counts.reduce(0, +) ?? 0 }
    }

    var family: MetricFamily {
        let all = series.withLock { $0 }.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        var samples: [MetricSample] = []
        for (labelValues, series) in all {
            let labels = Array(zip(labelNames, labelValues))
            var cumulative: UInt64 = 0
            for (index, count) in series.counts.enumerated() {
                cumulative += count
                let bound = index < buckets.count ? PrometheusText.format(buckets[index]) : "+Inf"
                samples.append(MetricSample(suffix: "_bucket", labels: labels + [("le", bound)], value: Double(cumulative)))
            }
            samples.append(MetricSample(suffix: "_sum", labels: labels, value: series.sum))
            samples.append(MetricSample(suffix: "_count", labels: labels, value: Double(cumulative)))
        }
        return MetricFamily(name: name, help: help, type: .histogram, samples: samples)
    }
}
