import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherPostgres
import TetherTesting

/// The worst minutes short of a failover: `tether serve` killed with SIGKILL under sign-in load, and
/// PostgreSQL restarted under it. Every acknowledged sign-in must survive, nothing may be half-written
/// (`tether replay --verify` finds no drift), and the service must come back by itself.
@Suite("Crash and database restart under load: nothing acknowledged is lost")
struct CrashAndRestartTests {
    @Test func aTetherServeKilledUnderLoadLosesNoAcknowledgedSignInAndWritesNothingHalfway() async throws {
        let database = try await TestDatabase.make()
        let idp = try DevIdPServer.start()
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("tether-crash-\(UUID().uuidString).key").path
        let masterKey = try MasterKey.create(at: keyFile)
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        var environment = idp.configuration
        environment["TETHER_MASTER_KEY_FILE"] = keyFile
        let port = try LocalPostgresServer.freeLoopbackPort()
        let first = try await TetherCommandLine.serve(databaseURL: database.url, port: port, environment: environment)

        // Eight clients sign new users in; the process is killed once at least 50 are acknowledged.
        let load = SignInLoad(port: port, idpPort: idp.server.boundPort, workers: 8, subjectPrefix: "apple-crash")
        let loaded = try await load.wait(upTo: .seconds(60)) { $0.filter { $0.status == 201 }.count >= 50 }
        first.send(SIGKILL)
        #expect(try await first.wait().status == 128 + SIGKILL)
        try await Task.sleep(for: .milliseconds(200)) // the requests in flight see the connection go
        await load.stop()
        #expect(loaded, "50 sign-ins acknowledged before the kill")

        let all = load.all
        let acknowledged = Set(load.acknowledged)
        #expect(all.allSatisfy { $0.status == 201 || $0.status == nil }, "only sign-ins, then no answer: \(Set(all.compactMap(\.status)))")
        // As `tether replay` reads the log: with the master key that wraps the users' keys.
        var ownerConfiguration = database.configuration(asServiceRole: false, maxConnections: 2)
        ownerConfiguration.masterKeys = MasterKeyRing(current: masterKey)
        let owner = PostgresClient(configuration: ownerConfiguration)
        defer { owner.shutdown() }
        let users = Set(try await owner.query("SELECT id::text AS id FROM users").map { try $0.decode("id", as: String.self) })
        #expect(acknowledged.isSubset(of: users), "lost: \(acknowledged.subtracting(users).sorted())")
        // A sign-in cut off by the kill either committed whole or not at all: every user has its identity
        // and its session, and the read models are exactly what the log replays to.
        let halfway: Int = try await owner.query("""
            SELECT count(*)::int AS n FROM users u
            WHERE NOT EXISTS (SELECT 1 FROM identities i WHERE i.user_id = u.id)
               OR NOT EXISTS (SELECT 1 FROM sessions s WHERE s.user_id = u.id)
            """)[0].decode("n")
        #expect(halfway == 0)
        #expect(try await ProjectionReplay(projection: .accounts, database: owner).run(.verify).drift.isEmpty)
        print("CrashAndRestartTests: kill -9 under 8 clients: \(acknowledged.count) acknowledged sign-ins, all found; "
              + "\(users.count - acknowledged.count) more committed whose answer the kill cut off; "
              + "\(all.filter { $0.status == nil }.count) requests unanswered; replay --verify: no drift")

        // The next process serves at once; an acknowledged person signs in again as the same user.
        let next = try await TetherCommandLine.serve(databaseURL: database.url, port: port, environment: environment)
        let again = SignInLoad(port: port, idpPort: idp.server.boundPort, workers: 1, subjectPrefix: "apple-after-crash")
        #expect(try await again.wait(upTo: .seconds(30)) { $0.contains { $0.status == 201 } }, "sign-ins after the restart")
        await again.stop()
        let client = HTTPTestClient(port: port, timeout: .seconds(10))
        let idpClient = idp.client()
        if let survivor = all.first(where: { $0.status == 201 }) {
            let token = try await idpClient.post("/dev-idp/apple/token", json: ["sub": survivor.subject]).decodeJSON([String: String].self)["identityToken"]!
            let answer = try await client.post(
                "/v1/sign-in", json: ["provider": "apple", "credential": ["identityToken": .string(token)]] as JSONValue)
            #expect(answer.status == 200)
            #expect(try answer.decodeJSON(SignedIn.self).user.id == survivor.userId)
        }
        await client.close()
        await idpClient.close()
        next.send(SIGTERM)
        #expect(try await next.wait().status == 0)
    }

    @Test func aDatabaseRestartUnderLoadIsOnly503sAndSignInsResumeWithoutARestartOfTether() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-restart-\(UUID().uuidString.prefix(8))")
        let postgres = try await ReplicatedPostgres.startWithSchema(at: directory)
        defer {
            try? postgres.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        let url = postgres.url(database: "tether")
        let running = try await RunningService.start(databaseURL: url, values: [:], devIdP: true)
        let load = SignInLoad(
            port: running.service.server.boundPort, idpPort: running.idp!.server.boundPort, workers: 4, subjectPrefix: "apple-restart")
        let loaded = try await load.wait(upTo: .seconds(60)) { $0.filter { $0.status == 201 }.count >= 20 }

        try await BlockingWork.run { try postgres.stop() }
        let down = ContinuousClock.now
        let readyWhileDown = try await running.client.get("/readyz")
        // Some sign-ins meet the stopped database before it comes back.
        let sawOutage = try await load.wait(upTo: .seconds(30)) { $0.contains { $0.status == 503 && $0.at > down } }
        try await BlockingWork.run { try postgres.start() }
        let back = ContinuousClock.now
        let resumed = try await load.wait(upTo: .seconds(30)) { $0.contains { $0.status == 201 && $0.at > back } }
        let readyAfter = try await running.client.get("/readyz")
        await load.stop()
        await running.stop()

        #expect(loaded && sawOutage && resumed, "sign-ins before, 503s during, sign-ins after")
        #expect(readyWhileDown.status == 503 && readyAfter.status == 200)
        let all = load.all
        #expect(all.allSatisfy { $0.status == 201 || ($0.status == 503 && $0.retryAfter != nil) },
                "only sign-ins and 503s with Retry-After: \(Set(all.map { $0.status.map(String.init) ?? "no answer" }))")
        let owner = PostgresClient(url: url, maxConnections: 2)
        defer { owner.shutdown() }
        let users = Set(try await owner.query("SELECT id::text AS id FROM users").map { try $0.decode("id", as: String.self) })
        let acknowledged = Set(load.acknowledged)
        #expect(acknowledged.isSubset(of: users), "lost: \(acknowledged.subtracting(users).sorted())")
        #expect(try await ProjectionReplay(projection: .accounts, database: owner).run(.verify).drift.isEmpty)
        if let firstAfter = all.filter({ $0.status == 201 && $0.at > back }).map(\.at).min() {
            print("CrashAndRestartTests: database restart under 4 clients: \(acknowledged.count) acknowledged sign-ins, all found; "
                  + "\(all.filter { $0.status == 503 }.count) answered 503; first sign-in \(firstAfter - back) after PostgreSQL was back "
                  + "(down \(back - down)); replay --verify: no drift")
        }
    }
}
