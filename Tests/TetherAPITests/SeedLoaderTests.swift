import TetherCore
import Foundation
import Testing
import TetherAPI
import TetherHTTP
import TetherPostgres
import TetherProviders
import TetherTesting

@Suite("Seeds loaded through the real commands")
struct SeedLoaderTests {
    /// The checkout's `seeds/`, what `tether dev` loads.
    private static let seedDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("seeds")

    /// Runs `body` with a dev-IdP-backed service on a fresh database, a loader over it, and a superuser pool for reading.
    private func withSeeding(
        _ body: (SeedLoader, PostgresClient, DevIdPServer, HTTPTestClient) async throws -> Void
    ) async throws {
        let database = try await TestDatabase.make()
        let reader = database.client(asServiceRole: false, maxConnections: 2)
        defer { reader.shutdown() }
        try await withDevService(databaseURL: database.url) { service, idp, client in
            try await body(SeedLoader(service: service, devIdP: idp.devIdP), reader, idp, client)
        }
    }

    private func eventCount(_ client: PostgresClient) async throws -> Int {
        try await client.query("SELECT count(*) AS n FROM events")[0].decode("n")
    }

    /// `provider:emailVerified` of every identity of the user with `email`, sorted.
    private func identities(of email: String, _ client: PostgresClient) async throws -> [String] {
        try await client.query("""
            SELECT i.provider, i.email_verified FROM identities i JOIN users u ON u.id = i.user_id
            WHERE u.email_normalized = \(try await client.readModelSeal().seal(email)) ORDER BY i.provider
            """).map { "\(try $0.decode("provider", as: String.self)):\(try $0.decode("email_verified", as: Bool.self))" }
    }

    private func seed(_ name: String, _ steps: [[String: JSONValue]]) throws -> Seed {
        let data = try JSONEncoder().encode(["steps": steps])
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString).json")
        try data.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var seed = try Seed(contentsOf: file)
        seed.name = name
        return seed
    }

    /// Mints a token with `claims` at the dev identity provider's `mintPath` and signs in with it over `/v1`.
    private func signInWithMintedToken(
        _ provider: String, at mintPath: String, member: String, claims: [String: JSONValue], idp: DevIdPServer, client: HTTPTestClient
    ) async throws -> HTTPTestClient.Response {
        let rawNonce = JSONValue.string(UUID().uuidString)
        let dev = idp.client()
        let minted = try await dev.post(mintPath, json: claims.merging(["rawNonce": rawNonce]) { _, nonce in nonce })
        await dev.close()
        let token = try #require(try minted.decodeJSON([String: String].self)[member])
        return try await client.post("/v1/sign-in", json: [
            "provider": .string(provider), "credential": [member: .string(token), "rawNonce": rawNonce],
        ] as [String: JSONValue])
    }

    @Test func theSampleUsersArriveWithTheirIdentitiesAndDisabledFlag() async throws {
        try await withSeeding { loader, reader, _, _ in
            let outcomes = try await loader.load(directory: Self.seedDirectory)
            #expect(outcomes.map(\.seed) == ["ada", "charles", "grace", "katherine"])
            #expect(outcomes.allSatisfy { $0.applied > 0 && $0.skipped == 0 })

            let seal = try await reader.readModelSeal()
            let users = try await reader.query("SELECT email, email_verified, disabled, display_name FROM users")
            let rows = try users.map {
                "\(try $0.decode("email", openedWith: seal) ?? "") verified=\(try $0.decode("email_verified", as: Bool.self)) disabled=\(try $0.decode("disabled", as: Bool.self))"
            }.sorted()
            #expect(rows == [
                "ada@example.com verified=true disabled=false",
                "charles@example.com verified=false disabled=true",
                "grace@example.com verified=true disabled=false",
                "katherine@example.com verified=true disabled=false",
            ])
            #expect(try await identities(of: "ada@example.com", reader) == ["apple:true"])
            #expect(try await identities(of: "grace@example.com", reader) == ["apple:true", "facebook:false"])
            #expect(try await identities(of: "katherine@example.com", reader) == ["google:true", "password:false"])
            #expect(try await identities(of: "charles@example.com", reader) == ["facebook:false"])
            let ada = try await reader.query("SELECT display_name FROM users WHERE email = \(try seal.seal("ada@example.com"))")
            #expect(try ada[0].decode("display_name", openedWith: seal) == "Ada Lovelace")

            // Ada's story: two sessions, the first refreshed once and signed out.
            let sessions = try await reader.query("""
                SELECT s.generation, s.end_reason FROM sessions s JOIN users u ON u.id = s.user_id
                WHERE u.email = \(try seal.seal("ada@example.com")) ORDER BY s.started_at
                """)
            #expect(try sessions.map { "\(try $0.decode("generation", as: Int.self)):\(try $0.decode("end_reason", as: String?.self) ?? "active")" }
                == ["1:sign_out", "0:active"])

            let foreign = try await reader.query("""
                SELECT count(*) AS n FROM events
                WHERE metadata->>'surface' IS DISTINCT FROM 'cli' OR metadata->'actor'->>'kind' IS DISTINCT FROM 'system'
                   OR metadata->'actor'->>'id' IS DISTINCT FROM 'seeds'
                """)
            #expect(try foreign[0].decode("n", as: Int.self) == 0, "every seeded event is recorded as the seeds' own command")
            #expect(try await eventCount(reader) > 0)
        }
    }

    @Test func loadingTheSeedsAgainLeavesTheLogUnchanged() async throws {
        try await withSeeding { loader, reader, _, _ in
            let first = try await loader.load(directory: Self.seedDirectory)
            let eventsAfterFirst = try await eventCount(reader)
            let usersAfterFirst: Int = try await reader.query("SELECT count(*) AS n FROM users")[0].decode("n")

            let second = try await loader.load(directory: Self.seedDirectory)
            #expect(try await eventCount(reader) == eventsAfterFirst)
            #expect(try await reader.query("SELECT count(*) AS n FROM users")[0].decode("n", as: Int.self) == usersAfterFirst)
            #expect(second.map(\.userId) == first.map(\.userId))
            #expect(second.allSatisfy { $0.applied == 0 })
            #expect(second.map(\.skipped) == first.map(\.applied))
        }
    }

    @Test func anInterruptedLoadResumesWithTheSessionsItOpened() async throws {
        try await withSeeding { loader, reader, _, _ in
            let ada = try Seed(contentsOf: Self.seedDirectory.appendingPathComponent("ada.json"))
            var firstStepOnly = ada
            firstStepOnly.steps = [ada.steps[0]]
            _ = try await loader.load([firstStepOnly])
            // The refresh of the next run presents the refresh token the first run's sign-in handed out.
            let resumed = try await loader.load([ada])
            #expect(resumed.first?.skipped == 1)
            #expect(resumed.first?.applied == ada.steps.count - 1)
            let refreshed = try await reader.query("SELECT count(*) AS n FROM events WHERE type = 'SessionRefreshed'")
            #expect(try refreshed[0].decode("n", as: Int.self) == 1)
        }
    }

    @Test func aSeededAppleUserSignsInAgainAndTheDisabledOneIsRefused() async throws {
        try await withSeeding { loader, _, idp, client in
            let outcomes = try await loader.load(directory: Self.seedDirectory)
            let adaId = try #require(outcomes.first { $0.seed == "ada" }).userId
            let signIn = try await signInWithMintedToken(
                "apple", at: "/dev-idp/apple/token", member: "identityToken",
                claims: ["sub": "000101.ada0a0a0a0a0a0a0a0a0a0a0a0a0a0a0.0101", "email": "ada@example.com", "emailVerified": true],
                idp: idp, client: client)
            #expect(signIn.status == 200)
            let body = try signIn.decodeJSON([String: JSONValue].self)
            #expect(body["user"].flatMap { if case .object(let user) = $0 { user["id"] } else { nil } } == .string(adaId.uuidString.lowercased()))
            #expect(body["isNewUser"] == .bool(false))

            let refused = try await signInWithMintedToken(
                "facebook", at: "/dev-idp/facebook/limited-token", member: "authenticationToken",
                claims: ["sub": "10000000000000104", "email": "charles@example.com"], idp: idp, client: client)
            #expect(refused.status == 403)
            #expect(try refused.decodeJSON([String: JSONValue].self)["code"] == "user_disabled")

            let katherine = try await client.post("/v1/sign-in", json: [
                "provider": "password", "credential": ["email": "katherine@example.com", "password": "tether-seed-password"],
            ] as [String: JSONValue])
            #expect(katherine.status == 200, "the seeded password works over HTTP")
        }
    }

    @Test func aStepThatFailsNamesTheSeedAndStep() async throws {
        try await withSeeding { loader, reader, _, _ in
            let owner = try seed("owner", [
                ["command": "sign-in", "provider": "google", "token": ["sub": "shared-google", "email": "owner@example.com"]],
            ])
            let thief = try seed("thief", [
                ["command": "sign-up", "email": "thief@example.com", "password": "long enough"],
                ["command": "link", "provider": "google", "token": ["sub": "shared-google", "email": "thief@example.com"]],
            ])
            await #expect {
                try await loader.load([owner, thief])
            } throws: { error in
                let text = String(describing: error)
                return text.hasPrefix("seeds/thief.json, step 2 (link google): ") && text.contains("credential_already_in_use")
            }
            // The owner's story and the thief's first step stand; the failed link wrote nothing.
            let links: Int = try await reader.query("SELECT count(*) AS n FROM identities")[0].decode("n")
            #expect(links == 2)
        }
    }

    @Test(arguments: [
        (#"{"steps": []}"#, "seeds/bad.json: a seed needs at least one step"),
        (#"{"steps": [{"command": "dance"}]}"#, "unknown command \"dance\""),
        (#"{"steps": [{"command": "link", "provider": "apple", "token": {}}]}"#, "step 1 (link apple): the first step must be sign-in or sign-up"),
        (#"{"steps": [{"command": "sign-in", "provider": "myspace", "token": {}}]}"#, "provider must be apple, facebook, google, password or anonymous"),
        (#"{"steps": [{"command": "sign-in", "provider": "facebook", "token": {}, "accessToken": {}}]}"#, "either token (Limited Login) or accessToken"),
        (#"{"steps": [{"command": "sign-up", "email": "a@example.com", "password": "long enough"}, {"command": "sign-out"}, {"command": "refresh"}]}"#,
         "step 3 (refresh): no session is open"),
        (#"{"steps": [{"command": "sign-up", "email": "a@example.com"}]}"#, "sign-up needs email and password"),
        (#"{"steps": "many"}"#, "'/steps' must be"),
    ])
    func aMalformedSeedFileIsRefusedWithOneLineNamingIt(json: String, message: String) throws {
        let directory = try Self.directory(with: json)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect {
            try Seed.all(in: directory)
        } throws: { error in
            String(describing: error).hasPrefix("seeds/bad.json") && String(describing: error).contains(message)
        }
    }

    @Test func aMalformedSeedStopsTheLoadBeforeAnythingIsWritten() async throws {
        let directory = try Self.directory(with: #"{"steps": [{"command": "sign-up", "email": "late@example.com"}]}"#)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withSeeding { loader, reader, _, _ in
            await #expect(throws: SeedError.self) { try await loader.load(directory: directory) }
            let events = try await eventCount(reader)
            #expect(events == 0, "ada.json sorts first and is not loaded either")
        }
    }

    /// A directory with a copy of `ada.json` and `bad.json` holding `json`.
    private static func directory(with json: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("seeds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: seedDirectory.appendingPathComponent("ada.json"), to: directory.appendingPathComponent("ada.json"))
        try Data(json.utf8).write(to: directory.appendingPathComponent("bad.json"))
        return directory
    }
}
