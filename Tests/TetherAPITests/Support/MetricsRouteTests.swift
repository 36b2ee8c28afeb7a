import Foundation
import Testing
import TetherAPI
import TetherHTTP
import TetherPostgres

@Suite("GET /metrics")
struct MetricsRouteTests {
    private struct ReplayStandIn: MetricsCollector {
        func collect() async throws -> [MetricFamily] {
            [.gauge("tether_replay_events_per_second", help: "Stand-in.", samples: [([("projection", "accounts")], 1250)])]
        }
    }

    private struct Broken: MetricsCollector {
        struct Failure: Error {}
        func collect() async throws -> [MetricFamily] { throw Failure() }
    }

    @Test func metricsCountRequestsByRouteAndTimeHistoryQueries() async throws {
        try await SupportHarness.run(metricsCollectors: [ReplayStandIn(), Broken()]) { harness in
            let before = try await harness.client.get("/metrics")
            #expect(before.bodyText.contains("tether_history_query_duration_seconds_count 0\n"))

            let ada = try await harness.signUp("ada@example.com")
            let support = try await harness.adminKey(.support)
            let history = "/v1/admin/users/\(ada.id.uuidString.lowercased())/history"
            #expect(try await harness.adminGet(history, key: support.secret).status == 200)
            #expect(try await harness.adminGet(history + "?limit=1", key: support.secret).status == 200)
            #expect(try await harness.client.get(history).status == 401)

            let scrape = try await harness.client.get("/metrics")
            #expect(scrape.status == 200)
            #expect(scrape.headers.values(for: "Content-Type") == ["text/plain; version=0.0.4; charset=utf-8"])
            let text = scrape.bodyText
            for line in [
                "# TYPE tether_history_query_duration_seconds histogram",
                "tether_history_query_duration_seconds_count 2",
                "tether_history_query_duration_seconds_bucket{le=\"+Inf\"} 2",
                "# TYPE tether_http_requests_total counter",
                "tether_http_requests_total{method=\"GET\",route=\"/v1/admin/users/{id}/history\",status=\"200\"} 2",
                "tether_http_requests_total{method=\"GET\",route=\"/v1/admin/users/{id}/history\",status=\"401\"} 1",
                "tether_http_requests_total{method=\"POST\",route=\"/v1/sign-up\",status=\"201\"} 1",
                "tether_http_requests_total{method=\"GET\",route=\"/metrics\",status=\"200\"} 1",
                "tether_replay_events_per_second{projection=\"accounts\"} 1250",
                "tether_metrics_collector_failures_total 2",
                "tether_account_states_kept 1",
                "tether_account_states_kept_bytes_limit 268435456",
            ] {
                #expect(text.split(separator: "\n").contains(Substring(line)), "\(line)")
            }
            // Ada's state, kept since her sign-up: an estimate, one state's worth at least.
            let kept = text.split(separator: "\n").first { $0.hasPrefix("tether_account_states_kept_bytes ") }
            #expect(kept.flatMap { Double($0.split(separator: " ")[1]) }.map { $0 >= 896 } == true, "\(kept ?? "absent")")
            // The process's memory: resident, and malloc's share of it in use within what it holds.
            func gauge(_ name: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
            }
            let resident = gauge("process_resident_memory_bytes"), inUse = gauge("tether_malloc_in_use_bytes")
            let held = gauge("tether_malloc_held_bytes")
            #expect((resident ?? 0) > 1_000_000, "\(String(describing: resident))")
            #expect((inUse ?? 0) > 1_000_000 && inUse! <= held!, "\(String(describing: inUse)) of \(String(describing: held))")
            // Every sample line belongs to a family announced by # TYPE just before it.
            var family = ""
            for line in text.split(separator: "\n") {
                if line.hasPrefix("# TYPE ") {
                    family = String(line.split(separator: " ")[2])
                } else if !line.hasPrefix("#") {
                    #expect(line.hasPrefix(family), "\(line)")
                }
            }
        }
    }

    /// `TETHER_STATE_CACHE_MB` bounds the states kept, and /metrics shows the bound.
    @Test func theStateCacheTakesItsBudgetFromTheSetting() async throws {
        try await SupportHarness.run(settings: ["TETHER_STATE_CACHE_MB": "8"]) { harness in
            let text = try await harness.client.get("/metrics").bodyText
            #expect(text.split(separator: "\n").contains("tether_account_states_kept_bytes_limit 8388608"))
        }
    }

    @Test func theLastReplayRunOfEachProjectionIsExported() async throws {
        try await SupportHarness.run { harness in
            _ = try await harness.signUp("ada@example.com")
            // The bulk phase takes what every transaction of the cluster has let go of: other tests'
            // transactions, in their own databases, can hold it back for a moment under load.
            for _ in 0..<400 {
                let settled: Bool = try await harness.owner.query(
                    "SELECT pg_snapshot_xmin(pg_current_snapshot()) > (SELECT max(tx) FROM events) AS settled")[0].decode("settled")
                if settled { break }
                try await Task.sleep(for: .milliseconds(25))
            }
            let result = try await ProjectionReplay(projection: .accounts, database: harness.owner).run(.replace)
            _ = try await ProjectionReplay(projection: .accounts, database: harness.owner).run(.verify)
            let text = try await harness.client.get("/metrics").bodyText
            let lines = text.split(separator: "\n").map(String.init)
            #expect(lines.contains("# TYPE tether_replay_last_events_per_second gauge"))
            #expect(lines.contains("tether_replay_last_events{projection=\"accounts\",mode=\"replay\"} \(result.events)"))
            #expect(lines.contains { $0.hasPrefix("tether_replay_last_duration_seconds{projection=\"accounts\",mode=\"verify\"} ") })
            #expect(lines.contains("tether_replay_last_drifting_rows{projection=\"accounts\",mode=\"verify\"} 0"))
            // Both phases' rates: the log went in bulk (what other tests' transactions held back, event by event).
            func rate(_ phase: String) -> Double? {
                lines.first { $0.hasPrefix("tether_replay_last_phase_events_per_second{projection=\"accounts\",mode=\"replay\",phase=\"\(phase)\"} ") }
                    .flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
            }
            #expect(result.bulkEvents > 0)
            #expect(try #require(rate("bulk")) > 0)
            #expect(try #require(rate("catch_up")) >= 0)
            #expect(result.events > 0)
        }
    }
}
