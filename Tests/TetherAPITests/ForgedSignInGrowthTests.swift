import Foundation
import Testing
import TetherAPI
import TetherTesting

/// Forged sign-ins cost their sender nothing, so they must not cost the log anything either: a refusal
/// that concerns no known account is counted per minute, and only the minute's count is an event.
/// `TETHER_FORGED_SIGN_INS` sets how many are sent: 20,000 unless told (about 30 s); `make soak` sends 100,000.
@Suite("Forged sign-ins grow the log by a bounded amount")
struct ForgedSignInGrowthTests {
    static var total: Int { ProcessInfo.processInfo.environment["TETHER_FORGED_SIGN_INS"].flatMap(Int.init) ?? 20_000 }

    @Test func forgedSignInsAddAnEventAMinuteWhateverTheirNumber() async throws {
        try await DevService.run(settings: ["TETHER_TRUSTED_PROXIES": "127.0.0.1"]) { app in
            // One real token with its signature changed: every request reaches verification and fails there.
            guard case .object(var members) = try await app.apple("apple-forged").credential,
                  case .string(let token) = members["identityToken"] else { throw HarnessError("no Apple token") }
            var forged = Array(token)
            forged[forged.count - 3] = forged[forged.count - 3] == "A" ? "B" : "A"
            members["identityToken"] = .string(String(forged))
            let body = try JSONEncoder().encode(Credential(provider: "apple", credential: .object(members)))
            let size: (String) async throws -> Int = { table in
                try await app.admin.query("SELECT pg_total_relation_size(\(table))::int AS n")[0].decode("n")
            }
            let eventsBytes = try await size("events")
            let started = Date()
            let total = Self.total
            let workers = 8
            // Each worker its own connection; each request from an address of its own, so no limit refuses it.
            let statuses = try await withThrowingTaskGroup(of: [Int: Int].self) { group in
                for worker in 0..<workers {
                    group.addTask {
                        try await app.withNewClient { client in
                            var statuses: [Int: Int] = [:]
                            for index in stride(from: worker, to: total, by: workers) {
                                let address = "10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255)"
                                let answer = try await client.post("/v1/sign-in", headers: ["X-Forwarded-For": address], body: Array(body))
                                statuses[answer.status, default: 0] += 1
                            }
                            return statuses
                        }
                    }
                }
                return try await group.reduce(into: [Int: Int]()) { $0.merge($1, uniquingKeysWith: +) }
            }
            let elapsed = Date().timeIntervalSince(started)
            #expect(statuses == [401: total], "\(statuses)")
            #expect(try await app.tallied("failed", detail: "invalid_credential") == total, "every refusal is counted")

            // Close every minute, and record them.
            let minutes: Int = try await app.admin.query("SELECT count(DISTINCT minute)::int AS n FROM sign_in_failure_tallies")[0].decode("n")
            try await app.admin.query("UPDATE sign_in_failure_tallies SET minute = minute - interval '1 day'")
            try await app.service.flushSignInFailureTallies()
            let types: [String] = try await app.admin.query("SELECT type FROM events ORDER BY position").map { try $0.decode("type") }
            let flushedMinutes = Int(elapsed / 60) + 2
            #expect(types.allSatisfy { $0 == "SignInFailuresCounted" }, "\(Set(types))")
            #expect(types.count >= minutes && types.count <= flushedMinutes, "\(types.count) events for \(minutes) minutes in \(elapsed) s")
            #expect(try await app.tallied("failed", detail: "invalid_credential") == total, "counted once, in the events")
            let grown = try await size("events") - eventsBytes
            print("forged sign-ins: \(total) in \(String(format: "%.1f", elapsed)) s (\(Int(Double(total) / elapsed))/s); "
                + "the log grew by \(types.count) events, \(grown) bytes")
            #expect(grown < 256 * 1024, "the log grew by \(grown) bytes")
        }
    }
}
