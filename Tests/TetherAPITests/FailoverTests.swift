import Foundation
import Synchronization
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

/// PostgreSQL failover under load: a primary with a synchronous streaming standby (Debian's
/// PostgreSQL), Tether on a multi-host URL with `target_session_attrs=read-write`. The primary is
/// stopped and the standby promoted while sign-ins run; Tether reconnects by itself.
@Suite("Failover: the primary stops, the standby is promoted, nothing acknowledged is lost")
struct FailoverTests {
    @Test func signInsGo503DuringThePromotionAndEveryAcknowledgedOneSurvives() async throws {
        let replicated = try await ReplicatedPostgres.start("failover", synchronous: true)
        defer { replicated.stop() }
        let primary = replicated.primary, standby = replicated.standby
        let standbyPort = standby.port
        let url = "postgresql://postgres@127.0.0.1:\(primary.port),127.0.0.1:\(standbyPort)/tether?target_session_attrs=read-write"

        let running = try await RunningService.start(databaseURL: url, values: [:], devIdP: true)
        // Each sign-in makes a new user: an acknowledged one (201) must be on the promoted standby.
        let load = SignInLoad(
            port: running.service.server.boundPort, idpPort: running.idp!.server.boundPort, workers: 1, subjectPrefix: "apple-failover")
        // The steps wait for what they need, not for fixed times: on a busy machine (CI runs this
        // beside other suites) the first sign-in alone can take longer than a fixed pause.
        // At least 0.8 s of load before the stop and 1.5 s after the promotion, and at least three
        // sign-ins acknowledged in each.
        let loadStarted = ContinuousClock.now
        let sawSignIns = try await load.wait(upTo: .seconds(60)) {
            ContinuousClock.now - loadStarted >= .milliseconds(800) && $0.filter { $0.status == 201 }.count >= 3
        }
        let stopped = ContinuousClock.now
        try primary.stop()
        try await Task.sleep(for: .milliseconds(300))
        try standby.promote()
        let promotedAt = ContinuousClock.now
        let sawRecovery = try await load.wait(upTo: .seconds(60)) {
            ContinuousClock.now - promotedAt >= .milliseconds(1500) && $0.filter { $0.status == 201 && $0.at > promotedAt }.count >= 3
        }
        await load.stop()
        #expect(sawSignIns && sawRecovery, "the load saw sign-ins before the stop and after the promotion")
        await running.stop()

        let all = load.all
        let acknowledged = load.acknowledged
        #expect(all.allSatisfy { $0.status == 201 || ($0.status == 503 && $0.retryAfter != nil) },
                "only sign-ins and 503s with Retry-After: \(Set(all.map { $0.status.map(String.init) ?? "no answer" }))")
        #expect(all.contains { $0.status == 503 }, "the outage was seen")
        let before = all.filter { $0.at < stopped && $0.status == 201 }.count
        let after = all.filter { $0.at > promotedAt && $0.status == 201 }
        #expect(before > 0 && !after.isEmpty, "sign-ins before the stop and after the promotion, with no restart")
        // The write outage: from the last sign-in before the first 503 to the first one after it.
        if let first503 = all.first(where: { $0.status == 503 }),
           let lastBefore = all.last(where: { $0.status == 201 && $0.at < first503.at }),
           let firstAfter = all.first(where: { $0.status == 201 && $0.at > first503.at }) {
            print("FailoverTests: \(acknowledged.count) acknowledged sign-ins; write outage \(firstAfter.at - lastBefore.at) "
                  + "(\(all.filter { $0.status == 503 }.count) answered 503; promotion \(promotedAt - stopped) after the stop began)")
        }
        // Nothing acknowledged was lost, and the promoted standby's read models match its log.
        let promoted = PostgresClient(url: "postgresql://postgres@127.0.0.1:\(standbyPort)/tether", maxConnections: 2)
        defer { promoted.shutdown() }
        let users = Set(try await promoted.query("SELECT id::text AS id FROM users").map { try $0.decode("id", as: String.self) })
        #expect(Set(acknowledged).isSubset(of: users), "lost: \(Set(acknowledged).subtracting(users).sorted())")
        #expect(try await ProjectionReplay(projection: .accounts, database: promoted).run(.verify).drift.isEmpty)
    }
}
