import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

@Suite("Account commands against the real database")
struct AccountServiceTests {
    private func service(_ policy: TetherConfiguration.EmailPolicy = .oneAccountPerEmail) async throws -> (AccountService, PostgresClient) {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 10)
        return (AccountService(database: client, emailPolicy: policy), client)
    }

    private func session(_ hash: String = UUID().uuidString, jkt: String? = nil) -> NewSession {
        NewSession(id: UUID(), refreshTokenHash: hash, amr: ["test"], jkt: jkt)
    }

    private func apple(_ uid: String, email: String? = nil, verified: Bool = true) -> ExternalIdentity {
        ExternalIdentity(provider: "apple", uid: uid, email: email, isEmailVerified: verified)
    }

    /// Every projected row, in a stable order, for comparing live tables with a rebuild.
    private func snapshot(_ client: PostgresClient) async throws -> [String] {
        var lines: [String] = []
        for table in AccountProjection.tables.reversed() {
            let rows = try await client.query("SELECT t::text AS row FROM \(unsafeSQL: table) t ORDER BY t::text")
            lines += try rows.map { "\(table): " + (try $0.decode("row", as: String.self)) }
        }
        return lines
    }

    @Test func aNewIdentityCreatesAUserAndReturningSignsInTheSameUser() async throws {
        let (accounts, client) = try await service()
        defer { client.shutdown() }
        let first = try await accounts.signIn(apple("001.a", email: "a@privaterelay.appleid.com"), session: session(), context: CommandContext())
        let second = try await accounts.signIn(apple("001.a", email: "a@privaterelay.appleid.com"), session: session(), context: CommandContext())
        #expect(first.isNewUser)
        #expect(!second.isNewUser)
        #expect(first.userId == second.userId)
        let users = try await client.query("SELECT count(*) AS n FROM users")
        #expect(try users[0].decode("n", as: Int.self) == 1)
    }

    @Test func fiftyParallelSignInsOfOneNewIdentityMakeExactlyOneUser() async throws {
        let (accounts, client) = try await service()
        defer { client.shutdown() }
        let ids = try await withThrowingTaskGroup(of: UUID.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    try await accounts.signIn(apple("001.race"), session: session(), context: CommandContext()).userId
                }
            }
            var ids: [UUID] = []
            for try await id in group { ids.append(id) }
            return ids
        }
        #expect(ids.count == 50)
        #expect(Set(ids).count == 1)
        let counts = try await client.query("SELECT (SELECT count(*) FROM users) AS users, (SELECT count(*) FROM sessions) AS sessions")
        #expect(try counts[0].decode("users", as: Int.self) == 1)
        #expect(try counts[0].decode("sessions", as: Int.self) == 50)
    }

    @Test func fiftyParallelLinksOfOneIdentityToFiftyUsersSucceedOnce() async throws {
        let (accounts, client) = try await service(.allowDuplicateEmails)
        defer { client.shutdown() }
        var users: [UUID] = []
        for index in 0..<50 {
            users.append(try await accounts.signIn(apple("owner-\(index)"), session: session(), context: CommandContext()).userId)
        }
        let facebook = ExternalIdentity(provider: "facebook", uid: "fb-shared")
        let results = await withTaskGroup(of: String.self) { group in
            for user in users {
                group.addTask {
                    do {
                        try await accounts.link(facebook, to: user, context: CommandContext())
                        return "linked"
                    } catch let error as AccountError {
                        return error.code
                    } catch {
                        return "unexpected: \(error)"
                    }
                }
            }
            var results: [String] = []
            for await result in group { results.append(result) }
            return results
        }
        #expect(results.filter { $0 == "linked" }.count == 1)
        #expect(results.filter { $0 == "credential_already_in_use" }.count == 49)
    }

    @Test func anEmailOwnedByAnotherAccountNeedsTheOtherCredentialFirst() async throws {
        let (accounts, client) = try await service(.oneAccountPerEmail)
        defer { client.shutdown() }
        _ = try await accounts.signIn(apple("001.o", email: "owner@example.com"), session: session(), context: CommandContext())
        let facebook = ExternalIdentity(provider: "facebook", uid: "fb-o", email: "Owner@Example.com", isEmailVerified: false)
        let error = await #expect(throws: AccountError.self) {
            try await accounts.signIn(facebook, session: session(), context: CommandContext())
        }
        #expect(error?.code == "account_exists_with_different_credential")
        #expect(error?.status == 409)
        #expect(error?.email == "owner@example.com")
        #expect(error?.signInMethods == ["apple"])
        let users = try await client.query("SELECT count(*) AS n FROM users")
        #expect(try users[0].decode("n", as: Int.self) == 1, "nothing is written")
    }

    @Test func duplicateEmailsMakeSeparateAccountsWhenThePolicyAllowsThem() async throws {
        let (accounts, client) = try await service(.allowDuplicateEmails)
        defer { client.shutdown() }
        let first = try await accounts.signIn(apple("001.d", email: "same@example.com"), session: session(), context: CommandContext())
        let facebook = ExternalIdentity(provider: "facebook", uid: "fb-d", email: "same@example.com")
        let second = try await accounts.signIn(facebook, session: session(), context: CommandContext())
        #expect(second.isNewUser)
        #expect(first.userId != second.userId)
    }

    @Test func aTrustedProviderTakesOverAnUnverifiedAccountAndDropsItsCredentials() async throws {
        let (accounts, client) = try await service()
        defer { client.shutdown() }
        let oldSession = session("old")
        let userId = try await accounts.signUp(
            email: "person@icloud.com", passwordHash: "scrypt$test", displayName: "P", session: oldSession, context: CommandContext()).id
        let outcome = try await accounts.signIn(apple("001.t", email: "person@icloud.com"), session: session(), context: CommandContext())
        #expect(outcome.userId == userId)
        #expect(outcome.outcome == "takeover")
        let identities = try await client.query("SELECT provider FROM identities WHERE user_id = \(userId)")
        #expect(try identities.map { try $0.decode("provider", as: String.self) } == ["apple"])
        let old = try await client.query("SELECT end_reason FROM sessions WHERE id = \(oldSession.id)")
        #expect(try old[0].decode("end_reason", as: String?.self) != nil)
        #expect(try await !accounts.isSessionActive(userId: userId, sessionId: oldSession.id, issuedAt: Date().addingTimeInterval(-60)))
        let user = try await client.query("SELECT email_verified FROM users WHERE id = \(userId)")
        #expect(try user[0].decode("email_verified", as: Bool.self))
    }

    @Test func anUntrustedProviderWithTheSameEmailDoesNotTakeOver() async throws {
        let (accounts, client) = try await service()
        defer { client.shutdown() }
        _ = try await accounts.signUp(email: "person@example.com", passwordHash: "h", displayName: nil, session: session(), context: CommandContext())
        // Apple is trusted only for its relay and iCloud domains.
        let error = await #expect(throws: AccountError.self) {
            try await accounts.signIn(apple("001.u", email: "person@example.com"), session: session(), context: CommandContext())
        }
        #expect(error?.code == "account_exists_with_different_credential")
        #expect(error?.signInMethods == ["password"])
    }

    @Test func linkingChecksOwnershipProvidersAndEmails() async throws {
        let (accounts, client) = try await service()
        defer { client.shutdown() }
        let a = try await accounts.signIn(apple("001.la", email: "a@example.com"), session: session(), context: CommandContext()).userId
        let b = try await accounts.signIn(apple("001.lb", email: "b@example.com"), session: session(), context: CommandContext()).userId
        await #expect(throws: AccountError.credentialAlreadyInUse) {
            try await accounts.link(apple("001.lb"), to: a, context: CommandContext())
        }
        await #expect(throws: AccountError.credentialAlreadyInUse) {
            try await accounts.link(apple("001.la"), to: a, context: CommandContext())
        }
        await #expect(throws: AccountError.providerAlreadyLinked) {
            try await accounts.link(apple("001.other"), to: a, context: CommandContext())
        }
        await #expect(throws: AccountError.emailAlreadyInUse) {
            try await accounts.link(ExternalIdentity(provider: "google", uid: "g1", email: "b@example.com", isEmailVerified: true), to: a, context: CommandContext())
        }
        try await accounts.link(ExternalIdentity(provider: "facebook", uid: "fb-a", email: "a@example.com"), to: a, context: CommandContext())
        try await accounts.unlink(provider: "facebook", from: a, context: CommandContext())
        await #expect(throws: AccountError.lastSignInMethod) {
            try await accounts.unlink(provider: "apple", from: a, context: CommandContext())
        }
        await #expect(throws: AccountError.noSuchProvider("facebook")) {
            try await accounts.unlink(provider: "facebook", from: b, context: CommandContext())
        }
    }

    @Test func refreshRotatesAndReuseEndsTheSession() async throws {
        let (accounts, client) = try await service()
        defer { client.shutdown() }
        let first = session("rt-0")
        let userId = try await accounts.signIn(apple("001.r"), session: first, context: CommandContext()).userId
        let rotated = try await accounts.refresh(presentedHash: "rt-0", newHash: "rt-1", presentedJKT: nil, context: CommandContext())
        #expect(rotated.userId == userId)
        #expect(rotated.sessionId == first.id)
        await #expect(throws: AccountError.refreshTokenReused) {
            try await accounts.refresh(presentedHash: "rt-0", newHash: "rt-2", presentedJKT: nil, context: CommandContext())
        }
        // The whole session is over: even the current token fails now.
        await #expect(throws: AccountError.invalidToken) {
            try await accounts.refresh(presentedHash: "rt-1", newHash: "rt-3", presentedJKT: nil, context: CommandContext())
        }
        await #expect(throws: AccountError.invalidToken) {
            try await accounts.refresh(presentedHash: "never-issued", newHash: "rt-4", presentedJKT: nil, context: CommandContext())
        }
        #expect(try await !accounts.isSessionActive(userId: userId, sessionId: first.id, issuedAt: Date()))
    }

    @Test func revokingAllSessionsVoidsEarlierTokens() async throws {
        let (accounts, client) = try await service()
        defer { client.shutdown() }
        let one = session("a"), two = session("b")
        let userId = try await accounts.signIn(apple("001.v"), session: one, context: CommandContext()).userId
        _ = try await accounts.signIn(apple("001.v"), session: two, context: CommandContext())
        let issued = Date().addingTimeInterval(-5)
        #expect(try await accounts.isSessionActive(userId: userId, sessionId: two.id, issuedAt: issued))
        try await accounts.revokeAllSessions(userId: userId, context: CommandContext())
        #expect(try await !accounts.isSessionActive(userId: userId, sessionId: one.id, issuedAt: issued))
        #expect(try await !accounts.isSessionActive(userId: userId, sessionId: two.id, issuedAt: issued))
        await #expect(throws: AccountError.invalidToken) {
            try await accounts.refresh(presentedHash: "b", newHash: "c", presentedJKT: nil, context: CommandContext())
        }
    }

    @Test func aRetriedCommandWritesItsEventsOnce() async throws {
        let (accounts, client) = try await service()
        defer { client.shutdown() }
        let userId = try await accounts.signIn(apple("001.i"), session: session(), context: CommandContext()).userId
        let context = CommandContext()
        try await accounts.link(ExternalIdentity(provider: "facebook", uid: "fb-i"), to: userId, context: context)
        try await accounts.unlink(provider: "facebook", from: userId, context: CommandContext())
        // The same link command again (same id) is recognised: no second IdentityLinked.
        _ = try? await accounts.link(ExternalIdentity(provider: "facebook", uid: "fb-i"), to: userId, context: context)
        let linked = try await client.query("SELECT count(*) AS n FROM events WHERE type = 'IdentityLinked' AND user_id = \(userId)")
        #expect(try linked[0].decode("n", as: Int.self) == 2)
    }

    @Test func everyProjectedRowIsExplainedByTheEvents() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 10), owner = database.client(asServiceRole: false, maxConnections: 2)
        defer { client.shutdown(); owner.shutdown() }
        let accounts = AccountService(database: client, emailPolicy: .oneAccountPerEmail)
        let first = session("p-0")
        let userId = try await accounts.signIn(apple("001.p", email: "p@privaterelay.appleid.com"), session: first, context: CommandContext()).userId
        try await accounts.link(ExternalIdentity(provider: "facebook", uid: "fb-p", email: "p@example.com", displayName: "P"), to: userId, context: CommandContext())
        _ = try await accounts.refresh(presentedHash: "p-0", newHash: "p-1", presentedJKT: nil, context: CommandContext())
        _ = try await accounts.signUp(email: "q@example.com", passwordHash: "h", displayName: "Q", session: session(), context: CommandContext())
        try await accounts.unlink(provider: "facebook", from: userId, context: CommandContext())
        try await accounts.setDisabled(true, userId: userId, reason: "test", context: CommandContext())
        let live = try await snapshot(client)
        let replay = ProjectionReplay(projection: .accounts, database: owner)
        #expect(try await replay.run(.verify).drift == [])
        _ = try await replay.run(.replace)
        let rebuilt = try await snapshot(client)
        #expect(live.count > 6)
        #expect(rebuilt == live)
    }
}
