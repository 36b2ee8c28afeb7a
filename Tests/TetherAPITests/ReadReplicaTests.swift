import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

/// `TETHER_DATABASE_READ_URL`: admin search, user detail, history and the event feed are answered by a
/// streaming standby, with its lag in the history answer and on `/metrics`; commands and a user's
/// reads about themselves stay on the primary.
@Suite("Read replica: support reads on a standby, commands and users' own reads on the primary")
struct ReadReplicaTests {
    /// Returns once `standby` has replayed everything `primary` has written so far.
    static func caughtUp(_ standby: PostgresClient, with primary: PostgresClient) async throws {
        let lsn: String = try await primary.query("SELECT pg_current_wal_lsn()::text AS lsn")[0].decode("lsn")
        for _ in 0..<200 {
            if try await standby.query("SELECT pg_last_wal_replay_lsn() >= \(lsn)::pg_lsn AS ok")[0].decode("ok", as: Bool.self) {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw HarnessError("the standby did not replay up to \(lsn) within 10 s")
    }

    /// The feed's gap-safe horizon on a standby: the primary's writers are not in the standby's
    /// `pg_stat_activity`, so an event committed after an older transaction that is still open must wait
    /// behind it, or the follower's checkpoint passes the older one and never reads its event.
    @Test func theFeedOnAStandbyNeverSkipsAnEventWhoseTransactionWasStillOpen() async throws {
        let replicated = try await ReplicatedPostgres.start("replica-feed", synchronous: false)
        defer { replicated.stop() }
        let primary = PostgresClient(url: replicated.url(of: replicated.primary), maxConnections: 3)
        let standby = PostgresClient(url: replicated.url(of: replicated.standby), maxConnections: 2)
        defer {
            standby.shutdown()
            primary.shutdown()
        }
        let writer = PostgresEventStore(client: primary)
        let follower = PostgresEventStore(client: standby)
        func event(_ type: String) -> NewEvent { NewEvent(type: type, data: Data(#"{"n":1}"#.utf8)) }
        let (appended, appendedNow) = AsyncStream<Void>.makeStream()
        let (release, releaseNow) = AsyncStream<Void>.makeStream()
        let held = Task {
            try await primary.withTransaction { connection in
                _ = try await writer.append([event("Held")], to: StreamName("test-held"), expected: .any, metadata: EventMetadata(), on: connection)
                appendedNow.yield()
                for await _ in release { break }
            }
        }
        for await _ in appended { break }
        _ = try await writer.append([event("Later")], to: StreamName("test-later"), expected: .any, metadata: EventMetadata())
        try await Self.caughtUp(standby, with: primary)
        let during = try await follower.follow(after: .start, types: ["Held", "Later"], userId: nil, limit: 10)
        #expect(during.events.isEmpty, "the later event waits behind the open transaction: \(during.events.map(\.type))")
        releaseNow.yield()
        releaseNow.finish()
        try await held.value
        try await Self.caughtUp(standby, with: primary)
        let after = try await follower.follow(after: during.next, types: ["Held", "Later"], userId: nil, limit: 10)
        #expect(after.events.map(\.type) == ["Held", "Later"])
    }

    /// `tether serve` starts with its primary's standby as `TETHER_DATABASE_READ_URL`, and refuses at start one that
    /// reaches another database of the cluster, or a database of the same name in another cluster: either would
    /// answer support reads with another database's rows.
    @Test func serveRefusesAReadURLThatIsNoCopyOfThePrimary() async throws {
        let replicated = try await ReplicatedPostgres.start("replica-check", synchronous: false)
        defer { replicated.stop() }
        let idp = try DevIdPServer.start()
        defer { Task { await idp.server.shutdown() } }
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("tether-replica-\(UUID().uuidString).key").path
        _ = try MasterKey.create(at: keyFile)
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        var environment = idp.configuration
        environment["TETHER_MASTER_KEY_FILE"] = keyFile
        func serve(primary: String, reading: String) async throws -> TetherCommandLine.Run {
            var settings = environment
            settings["TETHER_DATABASE_READ_URL"] = reading
            settings["TETHER_LISTEN"] = "127.0.0.1:\(try LocalPostgresServer.freeLoopbackPort())"
            let server = try TetherCommandLine.spawn(["serve"], databaseURL: primary, environment: settings)
            let watchdog = Task {
                try await Task.sleep(for: .seconds(20))
                server.send(SIGKILL)
            }
            defer { watchdog.cancel() }
            return try await server.wait()
        }
        // Another cluster's database of the same name (the test cluster's): only the system identifiers differ.
        let elsewhere = try await TestDatabase.make(migrated: false)
        defer { Task { try await elsewhere.drop() } }
        let owner = PostgresClient(url: replicated.primary.url, maxConnections: 1)
        defer { owner.shutdown() }
        try await owner.withConnection { try await $0.execute(simple: "CREATE DATABASE \"\(elsewhere.name)\"") }
        let primaryNamedAlike = "postgresql://postgres@127.0.0.1:\(replicated.primary.port)/\(elsewhere.name)"
        let otherCluster = try await serve(primary: primaryNamedAlike, reading: elsewhere.url)
        #expect(otherCluster.status == 1, "\(otherCluster.stderr)")
        #expect(otherCluster.stderr.contains("TETHER_DATABASE_READ_URL reaches database \"\(elsewhere.name)\" of PostgreSQL cluster"), "\(otherCluster.stderr)")
        // The standby's other database.
        let otherDatabase = try await serve(primary: replicated.url(of: replicated.primary), reading: replicated.standby.url)
        #expect(otherDatabase.status == 1, "\(otherDatabase.stderr)")
        #expect(otherDatabase.stderr.contains(#"reaches database "postgres""#), "\(otherDatabase.stderr)")
        // The standby's copy of the primary's database: the server gets ready.
        let port = try LocalPostgresServer.freeLoopbackPort()
        var settings = environment
        settings["TETHER_DATABASE_READ_URL"] = replicated.url(of: replicated.standby)
        let server = try await TetherCommandLine.serve(databaseURL: replicated.url(of: replicated.primary), port: port, environment: settings)
        server.send(SIGTERM)
        #expect(try await server.wait().status == 0)
    }

    @Test func supportReadsComeFromTheStandbyAndSayHowStaleTheyMayBe() async throws {
        let replicated = try await ReplicatedPostgres.start("replica", synchronous: false)
        defer { replicated.stop() }
        let primaryURL = replicated.url(of: replicated.primary)
        let running = try await RunningService.start(
            databaseURL: primaryURL, values: ["TETHER_DATABASE_READ_URL": replicated.url(of: replicated.standby)], devIdP: true)
        let idp = running.idp!.client()
        let owner = PostgresClient(url: primaryURL, maxConnections: 2)
        let standby = PostgresClient(url: replicated.url(of: replicated.standby), maxConnections: 1)
        do {
            let support = try await AdminKeyStore(database: owner).create(
                role: .support, name: "replica test", metadata: EventMetadata(actor: .operator("tester"), surface: "cli"))
            let admin: KeyValuePairs<String, String> = ["Authorization": "Bearer \(support.secret)"]
            func signIn(_ sub: String) async throws -> SignedIn {
                let minted = try await idp.post("/dev-idp/apple/token", json: ["sub": sub])
                let token = try minted.decodeJSON([String: String].self)["identityToken"] ?? ""
                let answer = try await running.client.post(
                    "/v1/sign-in", json: ["provider": "apple", "credential": ["identityToken": .string(token)]] as JSONValue)
                #expect(answer.status == 201, "\(answer.bodyText)")
                return try answer.decodeJSON(SignedIn.self)
            }
            func caughtUp() async throws { try await Self.caughtUp(standby, with: owner) }
            func lag(ofHistory id: String) async throws -> Double? {
                let answer = try await running.client.get("/v1/admin/users/\(id)/history", headers: admin)
                #expect(answer.status == 200, "\(answer.bodyText)")
                let page = try answer.decodeJSON(JSONValue.self)
                #expect(!page["events"]!.elements.isEmpty)
                guard case .double(let lag)? = page["replicaLagSeconds"] else {
                    if case .int(let lag)? = page["replicaLagSeconds"] { return Double(lag) }
                    return nil
                }
                return lag
            }

            let first = try await signIn("apple-replica-1")
            try await caughtUp()
            let fresh = try #require(try await lag(ofHistory: first.user.id), "the answer says how stale it may be")
            #expect(fresh >= 0 && fresh < 5)

            // With the standby's replay paused, support reads trail the primary; commands and users' own reads do not.
            try await standby.query("SELECT pg_wal_replay_pause()")
            let second = try await signIn("apple-replica-2")
            let me = try await running.client.get("/v1/users/me", headers: ["Authorization": "Bearer \(second.session.accessToken)"])
            #expect(me.status == 200, "a user reads their own writes")
            #expect(try await running.client.get("/v1/admin/users/\(second.user.id)", headers: admin).status == 404,
                    "the standby has not replayed the new user")
            let searched = try await running.client.get("/v1/admin/users?uid=apple-replica-2&provider=apple", headers: admin)
            #expect(try searched.decodeJSON(JSONValue.self)["users"]?.elements.count == 0)
            let feed = try await running.client.get("/v1/admin/events?limit=500", headers: admin)
            #expect(feed.status == 200)
            #expect(feed.bodyText.contains(first.user.id), "the feed holds what the standby replayed")
            #expect(!feed.bodyText.contains(second.user.id), "the feed is read on the standby")
            try await Task.sleep(for: .milliseconds(1100))
            let stale = try #require(try await lag(ofHistory: first.user.id))
            #expect(stale >= 1, "replay paused for over a second: \(stale)")
            let metrics = try await running.client.get("/metrics")
            let gauge = metrics.bodyText.split(separator: "\n").first { $0.hasPrefix("tether_database_replica_lag_seconds ") }
            let value = try #require(gauge.flatMap { Double($0.split(separator: " ").last ?? "") }, "\(metrics.bodyText.prefix(200))")
            #expect(value >= 1)

            // Once replay resumes, the standby answers the new user, and its lag is back to nothing.
            try await standby.query("SELECT pg_wal_replay_resume()")
            try await caughtUp()
            #expect(try await running.client.get("/v1/admin/users/\(second.user.id)", headers: admin).status == 200)
            #expect(try #require(try await lag(ofHistory: second.user.id)) < 5)
        } catch {
            Issue.record(error)
        }
        standby.shutdown()
        owner.shutdown()
        await running.stop()
        await idp.close()
    }
}
