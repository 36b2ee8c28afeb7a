import Foundation
import Synchronization
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherTesting

/// Every projected row of the account tables as text, table by table, in a stable order.
func accountTableRows(_ client: PostgresClient) async throws -> [String] {
    var lines: [String] = []
    for table in AccountProjection.tables {
        let rows = try await client.query("SELECT t::text AS row FROM \(unsafeSQL: table) t ORDER BY 1")
        lines += try rows.map { "\(table): " + (try $0.decode("row", as: String.self)) }
    }
    return lines
}

/// A flag one task sets and others poll.
private final class Flag: Sendable {
    private let value = Atomic(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}

/// `tether replay` on the account read models, against logs the service itself wrote.
@Suite("Replay of the account read models")
struct ReplayTests {
    private func apple(_ uid: String, email: String? = nil) -> ExternalIdentity {
        ExternalIdentity(provider: "apple", uid: uid, email: email, isEmailVerified: email != nil)
    }

    private func session() -> NewSession {
        NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: ["test"])
    }

    private func rows(_ client: PostgresClient) async throws -> [String] {
        try await accountTableRows(client)
    }

    /// Constraint names and definitions, indexes and grants of the account tables.
    private func structure(_ client: PostgresClient) async throws -> [String] {
        let tables = PostgresArray(AccountProjection.tables)
        return try await client.query("""
            SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) AS line FROM pg_constraint
            WHERE conrelid = ANY(\(tables)::regclass[])
            UNION ALL SELECT indexdef FROM pg_indexes WHERE tablename = ANY(\(tables)::name[])
            UNION ALL SELECT relname || ' ' || relacl::text FROM pg_class WHERE oid = ANY(\(tables)::regclass[])
            ORDER BY 1
            """).map { try $0.decode("line") }
    }

    private struct Tokens: Decodable {
        struct Session: Decodable { var accessToken: String; var refreshToken: String }
        struct User: Decodable { var id: String }
        var user: User
        var session: Session
    }

    private struct PasswordSignIn: Encodable {
        var provider = "password"
        var credential: [String: String]
    }

    /// The /v1 scenarios over HTTP (password sign-up and sign-in, refresh, refresh reuse,
    /// sign-out, revoke-all) plus provider commands through the account service
    /// (sign-ins, links, unlinks, a trusted-email takeover, disable and enable).
    private func writeScenarios(databaseURL: String) async throws {
        try await withService(databaseURL: databaseURL) { client in
            let ada = try await client.post("/v1/sign-up", json: ["email": "ada@example.com", "password": "correct horse", "displayName": "Ada"])
            #expect(ada.status == 201)
            let first = try ada.decodeJSON(Tokens.self)
            let signIn = try await client.post("/v1/sign-in", json: PasswordSignIn(credential: ["email": "ada@example.com", "password": "correct horse"]))
            #expect(signIn.status == 200)
            let second = try signIn.decodeJSON(Tokens.self)
            let refreshed = try await client.post("/v1/sessions/refresh", json: ["refreshToken": second.session.refreshToken])
            #expect(refreshed.status == 200)
            let reused = try await client.post("/v1/sessions/refresh", json: ["refreshToken": second.session.refreshToken])
            #expect(reused.status == 401)
            let signOut = try await client.post("/v1/sign-out", headers: ["Authorization": "Bearer \(first.session.accessToken)"], body: [])
            #expect(signOut.status == 204)
            let bob = try await client.post("/v1/sign-up", json: ["email": "bob@example.com", "password": "battery staple"])
            let bobTokens = try bob.decodeJSON(Tokens.self)
            let revoke = try await client.post(
                "/v1/users/me/sessions/revoke", headers: ["Authorization": "Bearer \(bobTokens.session.accessToken)"], body: [])
            #expect(revoke.status == 204)
            let unknown = try await client.post("/v1/sign-in", json: PasswordSignIn(credential: ["email": "nobody@example.com", "password": "whatever123"]))
            #expect(unknown.status == 401)
        }
        let database = PostgresClient(url: databaseURL, maxConnections: 4, role: "tether_service")
        defer { database.shutdown() }
        let accounts = AccountService(database: database, emailPolicy: .oneAccountPerEmail)
        let carol = try await accounts.signIn(apple("001.carol", email: "carol@privaterelay.appleid.com"), session: session(), context: CommandContext()).userId
        _ = try await accounts.signIn(apple("001.carol", email: "carol@privaterelay.appleid.com"), session: session(), context: CommandContext())
        try await accounts.link(
            ExternalIdentity(provider: "facebook", uid: "fb-carol", email: "carol@example.com", displayName: "Carol", photoURL: "https://example.com/c.png"),
            to: carol, context: CommandContext())
        try await accounts.link(ExternalIdentity(provider: "google", uid: "g-carol", email: "carol@gmail.com", isEmailVerified: true), to: carol, context: CommandContext())
        try await accounts.unlink(provider: "facebook", from: carol, context: CommandContext())
        try await accounts.revokeAllSessions(userId: carol, context: CommandContext())
        try await accounts.setDisabled(true, userId: carol, reason: "support", context: CommandContext())
        try await accounts.setDisabled(false, userId: carol, reason: nil, context: CommandContext())
        // A password account with an unverified gmail address, taken over by Google.
        _ = try await accounts.signUp(email: "dan@gmail.com", passwordHash: "$scrypt$x", displayName: nil, session: session(), context: CommandContext())
        _ = try await accounts.signIn(
            ExternalIdentity(provider: "google", uid: "g-dan", email: "dan@gmail.com", isEmailVerified: true, displayName: "Dan"),
            session: session(), context: CommandContext())
    }

    @Test func replayingTheLogOfTheV1ScenariosGivesTablesIdenticalToTheLiveOnes() async throws {
        let database = try await TestDatabase.make()
        try await writeScenarios(databaseURL: database.url)
        let owner = database.client(asServiceRole: false, maxConnections: 4)
        defer { owner.shutdown() }
        let (rowsBefore, structureBefore) = (try await rows(owner), try await structure(owner))
        #expect(rowsBefore.filter { $0.hasPrefix("identities:") }.count == 5)

        let replay = ProjectionReplay(projection: .accounts, database: owner, configuration: .init(batchSize: 10))
        #expect(try await replay.run(.verify).drift == [])
        let outcome = try await replay.run(.replace)

        #expect(outcome.events > 40)
        #expect(try await rows(owner) == rowsBefore)
        #expect(try await structure(owner) == structureBefore)
        #expect(try await replay.run(.verify).drift == [])
    }

    @Test func writesDuringAReplayAreAllInTheSwappedTables() async throws {
        let database = try await TestDatabase.make()
        let service = database.client(maxConnections: 8)
        let owner = database.client(asServiceRole: false, maxConnections: 2)
        defer { service.shutdown(); owner.shutdown() }
        let accounts = AccountService(database: service, emailPolicy: .allowDuplicateEmails)
        for index in 0..<150 {
            _ = try await accounts.signIn(apple("seed-\(index)"), session: session(), context: CommandContext())
        }
        let replayDone = Flag()
        // Three writers keep signing up, signing in and linking until the replay has finished.
        let writers = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in 0..<3 {
                    group.addTask {
                        var written = 0
                        while !replayDone.isSet || written < 5 {
                            let identity = apple("w\(writer)-\(written)")
                            let user = try await accounts.signIn(identity, session: session(), context: CommandContext()).userId
                            _ = try await accounts.signIn(identity, session: session(), context: CommandContext())
                            try await accounts.link(ExternalIdentity(provider: "google", uid: "g-w\(writer)-\(written)"), to: user, context: CommandContext())
                            written += 1
                            try await Task.sleep(for: .milliseconds(2))
                        }
                        return written
                    }
                }
                // And a reader outside any transaction (as token checks are), which the swap
                // must wait for or give way to, never fail.
                group.addTask {
                    while !replayDone.isSet {
                        _ = try await accounts.isSessionActive(userId: UUID(), sessionId: UUID(), issuedAt: Date())
                        _ = try await service.query("SELECT count(*) FROM users u JOIN identities i ON i.user_id = u.id")
                    }
                    return 0
                }
                return try await group.reduce(0, +)
            }
        }
        let outcome = try await ProjectionReplay(projection: .accounts, database: owner, configuration: .init(batchSize: 25)).run(.replace)
        replayDone.set()
        let written = try await writers.value

        #expect(outcome.events > 600, "events appended during the run were caught up")
        let counts = try await owner.query("""
            SELECT (SELECT count(*) FROM users) AS users, (SELECT count(*) FROM identities) AS identities,
                   (SELECT count(*) FROM sessions) AS sessions
            """)[0]
        #expect(try counts.decode("users", as: Int.self) == 150 + written)
        #expect(try counts.decode("identities", as: Int.self) == 150 + 2 * written)
        #expect(try counts.decode("sessions", as: Int.self) == 150 + 2 * written)
        #expect(try await ProjectionReplay(projection: .accounts, database: owner).run(.verify).drift == [])
        // The swapped tables keep the constraint names the service maps to domain errors.
        let taken = try await accounts.signIn(apple("taken"), session: session(), context: CommandContext()).userId
        _ = taken
        let other = try await accounts.signIn(apple("other"), session: session(), context: CommandContext()).userId
        await #expect(throws: AccountError.credentialAlreadyInUse) {
            try await accounts.link(ExternalIdentity(provider: "apple", uid: "taken"), to: other, context: CommandContext())
        }
    }

    // MARK: The command line

    /// Runs the built `tether` off the cooperative threads (see ``TetherCommandLine``).
    private func runTether(_ arguments: [String], databaseURL: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        let run = try await TetherCommandLine.run(arguments, databaseURL: databaseURL)
        return (run.status, run.stdout, run.stderr)
    }

    @Test func theVerifyCommandExitsZeroWhenTheReadModelsMatchAndOneWithEachDriftingRowPrinted() async throws {
        let database = try await TestDatabase.make()
        let service = database.client(maxConnections: 2)
        defer { service.shutdown() }
        let accounts = AccountService(database: service, emailPolicy: .oneAccountPerEmail)
        let userId = try await accounts.signIn(
            ExternalIdentity(provider: "apple", uid: "001.cli", displayName: "Ada"), session: session(), context: CommandContext()).userId

        let clean = try await runTether(["replay", "--verify"], databaseURL: database.url)
        #expect(clean.status == 0)
        #expect(clean.stdout.contains("verified accounts: 4 events in"))
        #expect(clean.stdout.contains("read models match the log"))
        #expect(clean.stderr.contains("replay accounts: verifying"), "plain progress lines when standard error is not a terminal")

        try await database.client(asServiceRole: false, maxConnections: 1).query(
            "UPDATE users SET display_name = 'Mallory' WHERE id = \(userId)")
        let drifted = try await runTether(["replay", "--verify", "--projection", "accounts"], databaseURL: database.url)
        #expect(drifted.status == 1)
        // Values in the read models are sealed: the drift names the column, and prints what it holds.
        let sealedAda = try await database.client(asServiceRole: false, maxConnections: 1).readModelSeal().seal("Ada")
        #expect(drifted.stdout.contains(
            "drift: users (id=\(userId.uuidString.lowercased())) changed: display_name live 'Mallory', log '\(sealedAda)'\n"))
        #expect(drifted.stdout.contains("1 drifting rows"))
        #expect(drifted.stderr.hasSuffix("tether: the read models drift from the log: 1 row differ (listed above)\n"))

        let repaired = try await runTether(["replay"], databaseURL: database.url)
        #expect(repaired.status == 0)
        #expect(repaired.stdout.contains("replayed accounts: 4 events in"))
        #expect(repaired.stdout.contains(" events/s; bulk "), "the log before the run went in bulk: \(repaired.stdout)")
        #expect(repaired.stdout.contains("/s), swapped in"))
        #expect(try await runTether(["replay", "--verify"], databaseURL: database.url).status == 0)

        let unknown = try await runTether(["replay", "--projection", "nope"], databaseURL: database.url)
        #expect(unknown.status == 2)
        #expect(unknown.stderr == "tether: no projection \"nope\" (known: accounts, admin-keys) (see tether replay --help)\n")
    }
}
