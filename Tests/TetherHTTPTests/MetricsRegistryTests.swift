import Testing
import TetherHTTP

@Suite("Metrics registry and the Prometheus text format")
struct MetricsRegistryTests {
    @Test func countersRenderOneSeriesPerLabelSetInLabelOrder() {
        let registry = MetricsRegistry()
        let requests = registry.counter("tether_test_requests_total", help: "Requests.", labels: ["route", "status"])
        requests.increment("/b", "200")
        requests.increment("/a", "404")
        requests.increment("/b", "200", by: 2)
        #expect(requests.value("/b", "200") == 3)
        #expect(PrometheusText.render(registry.snapshot()) == """
            # HELP tether_test_requests_total Requests.
            # TYPE tether_test_requests_total counter
            tether_test_requests_total{route="/a",status="404"} 1
            tether_test_requests_total{route="/b",status="200"} 3

            """)
    }

    @Test func histogramsRenderCumulativeBucketsSumAndCount() {
        let registry = MetricsRegistry()
        let latency = registry.histogram("tether_test_seconds", help: "Latency.", buckets: [0.01, 0.1, 1])
        for value in [0.0078125, 0.0078125, 0.0625, 0.5, 4] { // exact in binary, so the sum is too
            latency.observe(value)
        }
        #expect(latency.count() == 5)
        #expect(PrometheusText.render(registry.snapshot()) == """
            # HELP tether_test_seconds Latency.
            # TYPE tether_test_seconds histogram
            tether_test_seconds_bucket{le="0.01"} 2
            tether_test_seconds_bucket{le="0.1"} 3
            tether_test_seconds_bucket{le="1"} 4
            tether_test_seconds_bucket{le="+Inf"} 5
            tether_test_seconds_sum 4.578125
            tether_test_seconds_count 5

            """)
    }

    @Test func timingObservesWhetherTheBodyReturnsOrThrows() async {
        let registry = MetricsRegistry()
        let latency = registry.histogram("tether_test_query_seconds", help: "Queries.", labels: ["kind"])
        let answer = await latency.time("read") { 42 }
        #expect(answer == 42)
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await latency.time("read") { throw Failure() } }
        #expect(latency.count("read") == 2)
        #expect(latency.count("write") == 0)
    }

    @Test func helpAndLabelValuesAreEscaped() {
        let registry = MetricsRegistry()
        registry.counter("tether_test_total", help: "A \\ and a\nline.", labels: ["path"]).increment("say \"hi\"\\\n")
        let gauge = MetricFamily.gauge("tether_test_gauge", help: "Measured now.", samples: [([("run", "last")], 12.5)])
        #expect(PrometheusText.render(registry.snapshot() + [gauge]) == """
            # HELP tether_test_total A \\\\ and a\\nline.
            # TYPE tether_test_total counter
            tether_test_total{path="say \\"hi\\"\\\\\\n"} 1
            # HELP tether_test_gauge Measured now.
            # TYPE tether_test_gauge gauge
            tether_test_gauge{run="last"} 12.5

            """)
    }

    @Test(arguments: [(1.0, "1"), (0.25, "0.25"), (Double.infinity, "+Inf"), (-Double.infinity, "-Inf"), (Double.nan, "NaN"), (1e20, "1e+20")])
    func valuesAreWrittenAsTheFormatExpects(_ value: Double, _ text: String) {
        #expect(PrometheusText.format(value) == text)
    }

    @Test func requestMetricsCountByRoutePatternAndStatusIncludingThrownProblems() async throws {
        var router = Router()
        router.get("/users/{id}") { request in
            guard request.pathParameters["id"] != "missing" else { throw Problem.notFound() }
            return .text("ok")
        }
        let registry = MetricsRegistry()
        let metrics = RequestMetrics(registry: registry)
        let instrumented = metrics.instrument(router)
        _ = try await instrumented.respond(to: HTTPRequest(method: "GET", target: "/users/1"))
        _ = try await instrumented.respond(to: HTTPRequest(method: "GET", target: "/users/2"))
        await #expect(throws: Problem.self) { try await instrumented.respond(to: HTTPRequest(method: "GET", target: "/users/missing")) }
        #expect(metrics.requests.value("GET", "/users/{id}", "200") == 2)
        #expect(metrics.requests.value("GET", "/users/{id}", "404") == 1)
        #expect(instrumented.routes.map(\.pattern) == ["/users/{id}"])
    }
}
