import Foundation
import Testing
@testable import TetherAPI
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres
import TetherProviders
import TetherTesting

/// Structural budgets, not timings: each command is one transaction with a small, fixed number of
/// round trips to PostgreSQL, counted by the connection (``PostgresMeter``). A command that starts
/// reading back what it computed, or sends its statements one by one, fails here.
@Suite("Round-trip budgets of the commands")
struct RoundTripBudgetTests {
    /// Stands in for Apple's servers having accepted a token for `identity` (nothing outside this machine is called).
    private struct AcceptedToken: IdentityVerification {
        let identity: ExternalIdentity
        func verify(_ credential: ProviderCredential) async throws -> ExternalIdentity { identity }
    }

    private struct Fixture {
        let database: TestDatabase
        let client: PostgresClient
        let accounts: AccountService
        let commands: AccountCommands
    }

    private func fixture(accepting identity: ExternalIdentity, maxConnections: Int = 4) async throws -> Fixture {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: maxConnections)
        // The read models' seal is loaded once per pool, before its first command: no command's cost.
        _ = try await client.readModelSeal()
        let accounts = AccountService(database: client, emailPolicy: .oneAccountPerEmail)
        let commands = AccountCommands(
            accounts: accounts, identities: AcceptedToken(identity: identity), limits: SignInLimits(database: client),
            pendingCredentials: MFAPendingCredentials(keys: SigningKeyStore(client: client)), passwords: try PasswordVerifier())
        // So are the keys of the limits' rows.
        try await commands.loadKeys()
        return Fixture(database: database, client: client, accounts: accounts, commands: commands)
    }

    private static let apple = ExternalIdentity(
        provider: "apple", uid: "001.budget", email: "budget@privaterelay.appleid.com", isEmailVerified: true)

    private func newSession() -> NewSession {
        NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: ["apple"], jkt: nil)
    }

    private func signIn(_ commands: AccountCommands) -> SignInCommand {
        SignInCommand(
            credential: .apple(identityToken: "accepted", rawNonce: nil, fullName: nil), session: newSession(),
            context: CommandContext(metadata: EventMetadata(clientIP: "192.0.2.7", surface: "v1")))
    }

    /// Runs `body` with a meter bound, and answers what it counted.
    private func metered<T>(_ body: () async throws -> T) async throws -> (T, PostgresMeter) {
        let meter = PostgresMeter()
        let value = try await PostgresMeter.$current.withValue(meter) { try await body() }
        return (value, meter)
    }

    @Test func aReturningSignInIsOneTransactionOfTwoRoundTrips() async throws {
        let fixture = try await fixture(accepting: Self.apple)
        defer { fixture.client.shutdown() }
        _ = try await fixture.commands.signIn(signIn(fixture.commands))
        let (result, meter) = try await metered { try await fixture.commands.signIn(signIn(fixture.commands)) }
        guard case .signedIn(let account, let isNewUser) = result else {
            Issue.record("expected a session, got \(result)")
            return
        }
        #expect(!isNewUser)
        #expect(account.sessions.count == 2)
        #expect(meter.transactions == 1, "\(meter.statements)")
        #expect(meter.roundTrips == 2, "\(meter.roundTrips) round trips: \(meter.statements)")
    }

    /// The statements that load the user an identity names evaluate the identity's lookup once each. Inlined
    /// at each use of the id (as PostgreSQL does with a plain subquery), a returning sign-in looked the
    /// identity up nine times instead of three.
    @Test(arguments: [false, true])
    func theStatementsThatLoadAnIdentitysOwnerLookItUpOnceEach(knowingTheState: Bool) async throws {
        let fixture = try await fixture(accepting: Self.apple)
        defer { fixture.client.shutdown() }
        guard case .signedIn(let account, _) = try await fixture.commands.signIn(signIn(fixture.commands)) else {
            Issue.record("expected a session")
            return
        }
        let owner = try AccountProjection.identityOwner(provider: "apple", uid: Self.apple.uid, seal: try await fixture.client.readModelSeal())
        let known = knowingTheState ? fixture.accounts.cache.entry(for: account.id) : nil
        #expect((known != nil) == knowingTheState)
        let statements = AccountService.loadStatements(user: .named(owner), known: known, commandId: UUID(), tail: 32)
        try await expectOneScan(of: "identities", in: statements, on: fixture.client)
        // A refresh's query of the token's session and user, a row with two columns: once a statement too.
        let session = try await fixture.client.query("SELECT refresh_token_hash FROM sessions LIMIT 1")[0].decode("refresh_token_hash", as: String.self)
        let refresh = AccountService.loadStatements(user: AccountService.refreshTokensUser(session), known: known, commandId: UUID(), tail: 32)
        try await expectOneScan(of: "refresh_tokens", in: refresh, on: fixture.client)
    }

    /// Expects each of the three load `statements` to scan `table` once (by its plan).
    private func expectOneScan(of table: String, in statements: [PostgresQuery], on client: PostgresClient) async throws {
        #expect(statements.count == 3)
        for statement in statements {
            var explain = PostgresQuery(unsafeSQL: "EXPLAIN (COSTS OFF) ")
            explain.append(statement)
            let plan = try await client.query(explain).map { try $0.decode("QUERY PLAN", as: String.self) }
            // A scan of the table, not of its index (whose name begins like it): " on <table>" ends the line or a word.
            let scans = plan.filter { $0.hasSuffix(" on \(table)") || $0.contains(" on \(table) ") }
            #expect(scans.count == 1, "\(table):\n\(plan.joined(separator: "\n"))")
        }
    }

    /// PostgreSQL plans a prepared statement at each execution while a plan for its parameters' values looks
    /// cheaper than the generic one; a parameter in `LIMIT`, `OFFSET`, `make_interval` or `= ANY` makes it so,
    /// and the sign-in's limits statement cost 140 µs of planning for 14 µs of execution. After five custom
    /// plans, each hot statement must run on its generic plan: planned once per connection.
    @Test func theStatementsOfSignInsRefreshesAndHistoryPagesArePlannedOncePerConnection() async throws {
        // One connection: every statement below is prepared on it.
        let fixture = try await fixture(accepting: Self.apple, maxConnections: 1)
        defer { fixture.client.shutdown() }
        let (client, accounts, commands) = (fixture.client, fixture.accounts, fixture.commands)
        // The table after an attack from one address an hour ago, with its statistics: what a live service's
        // planner then sees. (In an empty table any plan looks as cheap as any other. With the limits' numbers
        // as parameters, such a table made PostgreSQL plan the limits statement at each sign-in.)
        let owner = fixture.database.client(asServiceRole: false, maxConnections: 1)
        defer { owner.shutdown() }
        try await owner.query("""
            INSERT INTO sign_in_attempts (id, scope_key, kind, started_at)
            SELECT gen_random_uuid(), 'ip:203.0.113.66', 'failure', now() - interval '1 hour' FROM generate_series(1, 20000) n
            """)
        try await owner.query("ANALYZE sign_in_attempts")
        var userId: UUID?
        var hash = ""
        for _ in 0..<10 {
            let command = signIn(commands)
            guard case .signedIn(let account, _) = try await commands.signIn(command) else {
                Issue.record("expected a session")
                return
            }
            userId = account.id
            hash = command.session.refreshTokenHash
        }
        for round in 0..<10 {
            let next = "rotated \(round)"
            _ = try await accounts.refresh(presentedHash: hash, newHash: next, presentedJKT: nil, context: CommandContext())
            hash = next
        }
        let (admin, _) = try await AdminKeyStore(database: owner).create(role: .support, name: "plans", metadata: EventMetadata(surface: "cli"))
        let keys = AdminKeyStore(database: client)
        let history = UserHistory(database: client)
        let user = try #require(userId)
        for _ in 0..<10 {
            _ = try await keys.record(
                keyId: admin.id, about: user, metadata: EventMetadata(surface: "admin"), reading: history.pageStatements(of: user, limit: 50)
            ) { rows in
                let page = try history.page(of: user, from: rows, limit: 50)
                return (.historyViewed(.init(userId: user, after: 0, limit: 50, returned: page.entries.count, status: 200)), page)
            }
        }
        let plans = try await client.query("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        #expect(plans.count >= 10, "the commands' statements are prepared on the pool's one connection")
        for row in plans {
            let statement: String = try row.decode("statement")
            let custom: Int = try row.decode("custom_plans")
            let generic: Int = try row.decode("generic_plans")
            #expect(custom <= 5, "planned at each of its \(custom + generic) executions: \(statement)")
        }
    }

    @Test func aNewUsersSignInIsOneTransactionOfTwoRoundTrips() async throws {
        let fixture = try await fixture(accepting: Self.apple)
        defer { fixture.client.shutdown() }
        let (result, meter) = try await metered { try await fixture.commands.signIn(signIn(fixture.commands)) }
        guard case .signedIn(_, let isNewUser) = result else {
            Issue.record("expected a session, got \(result)")
            return
        }
        #expect(isNewUser)
        #expect(meter.transactions == 1, "\(meter.statements)")
        #expect(meter.roundTrips == 2, "\(meter.roundTrips) round trips: \(meter.statements)")
    }

    @Test func linkRefreshUnlinkSignOutAndEraseAreOneTransactionOfTwoRoundTripsEach() async throws {
        let fixture = try await fixture(accepting: Self.apple)
        defer { fixture.client.shutdown() }
        let accounts = fixture.accounts
        let session = newSession()
        let userId = try await accounts.signIn(Self.apple, session: session, context: CommandContext()).userId
        let google = ExternalIdentity(provider: "google", uid: "g-budget", email: nil, isEmailVerified: false)
        let ((), link) = try await metered { try await accounts.link(google, to: userId, context: CommandContext()) }

        let (rotated, refresh) = try await metered {
            try await accounts.refresh(
                presentedHash: session.refreshTokenHash, newHash: "rotated", presentedJKT: nil, context: CommandContext())
        }
        #expect(rotated.sessionId == session.id)
        // The token finds its session and user in one lookup, made by the three statements that load the user
        // (not a fourth of its own): the first round trip is BEGIN, the replay gate and those three.
        let lookups = refresh.statements.filter { $0.contains("FROM refresh_tokens") }
        #expect(lookups.count == 3, "\(refresh.statements)")
        #expect(refresh.statements.count == 5 + 2, "\(refresh.statements)")
        let ((), unlink) = try await metered {
            try await accounts.unlink(provider: "google", from: userId, context: CommandContext())
        }
        let ((), signOut) = try await metered {
            try await accounts.signOut(userId: userId, sessionId: session.id, context: CommandContext())
        }
        let ((), erase) = try await metered {
            try await accounts.erase(userId: userId, reason: "asked to", context: CommandContext())
        }
        let key = try await fixture.client.query("SELECT key FROM personal_data_keys WHERE user_id = \(userId)")
        #expect(try key[0].decode("key", as: [UInt8]?.self) == nil, "the erasure destroyed the key in its own transaction")
        for (name, meter) in [("link", link), ("refresh", refresh), ("unlink", unlink), ("sign-out", signOut), ("erase", erase)] {
            #expect(meter.transactions == 1, "\(name): \(meter.statements)")
            #expect(meter.roundTrips == 2, "\(name): \(meter.roundTrips) round trips: \(meter.statements)")
        }
    }

    /// An anonymous sign-in takes a sign-up place first (one transaction of one round trip), then is an
    /// ordinary new user's sign-in; linking a real identity to it later is a link like any other, whose
    /// dropping of the anonymous identity adds no statement.
    @Test func anAnonymousSignInIsTwoTransactionsOfThreeRoundTripsAndItsUpgradeALink() async throws {
        let anonymous = ExternalIdentity(provider: "anonymous", uid: UUID().uuidString.lowercased())
        let fixture = try await fixture(accepting: anonymous)
        defer { fixture.client.shutdown() }
        let command = SignInCommand(
            credential: .anonymous(id: nil), session: newSession(),
            context: CommandContext(metadata: EventMetadata(clientIP: "192.0.2.9", surface: "parse")))
        let (result, signIn) = try await metered { try await fixture.commands.signIn(command) }
        guard case .signedIn(let account, true) = result else {
            Issue.record("expected a new user, got \(result)")
            return
        }
        #expect(account.isAnonymous)
        #expect(signIn.transactions == 2, "\(signIn.statements)")
        #expect(signIn.roundTrips == 3, "\(signIn.roundTrips) round trips: \(signIn.statements)")
        let (upgraded, link) = try await metered {
            try await fixture.accounts.link(Self.apple, to: account.id, context: CommandContext())
        }
        #expect(upgraded.signInMethods == ["apple"])
        #expect(link.transactions == 1, "\(link.statements)")
        #expect(link.roundTrips == 2, "\(link.roundTrips) round trips: \(link.statements)")
    }

    /// The sign-up limit takes its place in a transaction of its own, before the password is hashed;
    /// the sign-up itself is one more transaction of two round trips.
    @Test func aSignUpIsTwoTransactionsOfThreeRoundTripsInAll() async throws {
        let fixture = try await fixture(accepting: Self.apple)
        defer { fixture.client.shutdown() }
        let command = SignUpCommand(
            email: "new@example.com", password: "correct horse battery staple", displayName: "New", session: newSession(),
            context: CommandContext(metadata: EventMetadata(clientIP: "192.0.2.8", surface: "v1")))
        let (account, meter) = try await metered { try await fixture.commands.signUp(command) }
        #expect(account.identities["password"] != nil)
        #expect(meter.transactions == 2, "\(meter.statements)")
        #expect(meter.roundTrips == 3, "\(meter.roundTrips) round trips: \(meter.statements)")
    }

    /// A password reset asked for an address takes the address's place in the mail limits (one transaction
    /// of one round trip), then issues the code to whoever holds it (one of two: the owner is found in the
    /// first). Using the code is one transaction of two round trips, whatever it drops and ends.
    @Test func aPasswordResetIsThreeTransactionsOfFiveRoundTripsInAll() async throws {
        let fixture = try await fixture(accepting: Self.apple)
        defer { fixture.client.shutdown() }
        let outbox = DevMailOutbox()
        let flows = EmailFlows(
            commands: fixture.commands, mail: outbox, publicURL: URL(string: "https://auth.example.com"), development: false)
        _ = try await fixture.commands.signIn(signIn(fixture.commands))
        let request = EmailFlows.Request(context: CommandContext(metadata: EventMetadata(clientIP: "192.0.2.9", surface: "v1")))
        let (_, asked) = try await metered {
            try await flows.requestPasswordReset(email: Self.apple.email!, request)
            await flows.finishSending() // the code is issued after the answer went
        }
        #expect(asked.transactions == 2, "\(asked.statements)")
        #expect(asked.roundTrips == 3, "\(asked.roundTrips) round trips: \(asked.statements)")
        let code = try #require(outbox.mails().last?.code)
        let (account, used) = try await metered {
            try await flows.resetPassword(code: code, newPassword: "a new password", context: CommandContext())
        }
        #expect(account.isEmailVerified)
        #expect(account.activeSessions.isEmpty)
        #expect(used.transactions == 1, "\(used.statements)")
        #expect(used.roundTrips == 2, "\(used.roundTrips) round trips: \(used.statements)")
    }

    /// A password sign-in reserves its place in the limits (one transaction of two round trips) before
    /// the password is checked (one read of the account), and gives it back in the sign-in's own commit.
    @Test func aPasswordSignInIsTwoTransactionsOfFiveRoundTripsInAll() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 4)
        defer { client.shutdown() }
        _ = try await client.readModelSeal()
        let accounts = AccountService(database: client, emailPolicy: .oneAccountPerEmail)
        let passwords = try PasswordVerifier(hasher: ScryptPasswordHasher(parameters: .init(logN: 10, blockSize: 8, parallelism: 1)))
        let verification = ProviderIdentityVerification(providers: try IdentityProviders(
            configuration: try ProvidersConfiguration.fromEnvironment([:]), nonceStore: PostgresNonceStore(client: client),
            passwords: PasswordIdentityVerifier(passwords: passwords, directory: accounts)))
        let commands = AccountCommands(
            accounts: accounts, identities: verification, limits: SignInLimits(database: client),
            pendingCredentials: MFAPendingCredentials(keys: SigningKeyStore(client: client)), passwords: passwords)
        try await commands.loadKeys()
        let context = CommandContext(metadata: EventMetadata(clientIP: "192.0.2.9", surface: "v1"))
        _ = try await commands.signUp(SignUpCommand(
            email: "pw@example.com", password: "correct horse battery staple", displayName: nil, session: newSession(), context: context))
        let command = SignInCommand(
            credential: .password(email: "pw@example.com", password: "correct horse battery staple"), session: newSession(), context: context)
        let (result, meter) = try await metered { try await commands.signIn(command) }
        guard case .signedIn = result else {
            Issue.record("expected a session, got \(result)")
            return
        }
        #expect(meter.transactions == 2, "\(meter.statements)")
        #expect(meter.roundTrips == 5, "\(meter.roundTrips) round trips: \(meter.statements)")
        let places = try await client.query("SELECT count(*)::int AS n FROM sign_in_attempts WHERE kind = 'attempt'")
        #expect(try places[0].decode("n", as: Int.self) == 0, "the place was given back with the sign-in")
    }

    @Test func theSignInAnswerIsTheStateTheReadModelsHold() async throws {
        let fixture = try await fixture(accepting: Self.apple)
        defer { fixture.client.shutdown() }
        _ = try await fixture.commands.signIn(signIn(fixture.commands))
        guard case .signedIn(let account, _) = try await fixture.commands.signIn(signIn(fixture.commands)) else {
            Issue.record("expected a session")
            return
        }
        let row = try await fixture.client.query("""
            SELECT email, email_verified, created_at, last_sign_in_at FROM users WHERE id = \(account.id)
            """)[0]
        #expect(try row.decode("email", openedWith: try await fixture.client.readModelSeal()) == account.email)
        #expect(try row.decode("email_verified", as: Bool.self) == account.isEmailVerified)
        #expect(try row.decode("created_at", as: Date.self) == account.createdAt)
        #expect(try row.decode("last_sign_in_at", as: Date?.self) == account.lastSignInAt)
    }

    @Test func aHistoryPageIsOneRoundTripAndItsRecordOneTransactionOfTwo() async throws {
        let fixture = try await fixture(accepting: Self.apple)
        defer { fixture.client.shutdown() }
        guard case .signedIn(let account, _) = try await fixture.commands.signIn(signIn(fixture.commands)) else {
            Issue.record("expected a session")
            return
        }
        let history = UserHistory(database: fixture.client)
        let (page, reading) = try await metered { try await history.page(of: account.id) }
        #expect(page.entries.map(\.type).contains("SignedIn"))
        #expect(page.entries.contains { $0.clientIP == "192.0.2.7" }, "the sealed address was opened with the key read alongside")
        #expect(reading.roundTrips == 1, "\(reading.statements)")

        // Keys are made by an operator (the owner role); the service records what they are used for.
        let owner = fixture.database.client(asServiceRole: false, maxConnections: 1)
        defer { owner.shutdown() }
        let (admin, secret) = try await AdminKeyStore(database: owner).create(role: .support, name: "budget", metadata: EventMetadata(surface: "cli"))
        let keys = AdminKeyStore(database: fixture.client)
        // A key found live is not looked up again by a request whose record checks it (a history page)...
        let (found, lookup) = try await metered { try await keys.authenticate(secret, checkedByItsRecord: true) }
        #expect(found?.id == admin.id)
        #expect(lookup.roundTrips == 1, "\(lookup.statements)")
        let (again, remembered) = try await metered { try await keys.authenticate(secret, checkedByItsRecord: true) }
        #expect(again == found)
        #expect(remembered.roundTrips == 0, "\(remembered.statements)")
        // ...and is by any other.
        let (_, other) = try await metered { try await keys.authenticate(secret) }
        #expect(other.roundTrips == 1, "\(other.statements)")
        let viewed = AdminEvent.historyViewed(.init(userId: account.id, after: 0, limit: 50, returned: page.entries.count, status: 200))
        let ((), recording) = try await metered {
            try await keys.record(viewed, keyId: admin.id, metadata: EventMetadata(actor: .init(kind: "admin", id: admin.id.uuidString), surface: "admin"))
        }
        #expect(recording.transactions == 1, "\(recording.statements)")
        #expect(recording.roundTrips == 2, "\(recording.statements)")
        let after = try await history.page(of: account.id)
        #expect(after.entries.last?.type == "AdminHistoryViewed")
        #expect(after.entries.last?.stream == StreamName.adminKey(admin.id).rawValue)

        // As the support API reads a page: in its record's transaction, the read in the record's first round trip.
        let (read, together) = try await metered {
            try await keys.record(
                keyId: admin.id, about: account.id, metadata: EventMetadata(surface: "admin"),
                reading: history.pageStatements(of: account.id, limit: 50)
            ) { rows in
                let page = try history.page(of: account.id, from: rows, limit: 50)
                return (.historyViewed(.init(userId: account.id, after: 0, limit: 50, returned: page.entries.count, status: 200)), page)
            }
        }
        #expect(together.transactions == 1, "\(together.statements)")
        #expect(together.roundTrips == 2, "the page costs no round trip beyond its record: \(together.statements)")
        #expect(read.entries.map(\.position) == after.entries.map(\.position), "the same page, read with its record")
        #expect(read.entries.contains { $0.clientIP == "192.0.2.7" })
        let last = try await history.page(of: account.id)
        #expect(last.entries.count == after.entries.count + 1)
        #expect(last.entries.last?.type == "AdminHistoryViewed")
        // The user has a key: a record reads it, and makes (draws, wraps and offers) none.
        #expect(!together.statements.contains { $0.contains("INSERT INTO personal_data_keys") }, "\(together.statements)")

        // A record about an id no user has names no one, and makes no key: two round trips.
        let stranger = UUID()
        let strangerViewed = AdminEvent.userViewed(.init(userId: stranger, status: 404))
        let metadata = EventMetadata(clientIP: "192.0.2.8", surface: "admin")
        let ((), unknown) = try await metered { try await keys.record(strangerViewed, keyId: admin.id, metadata: metadata) }
        #expect(unknown.transactions == 1 && unknown.roundTrips == 2, "\(unknown.statements)")
        #expect(try await fixture.client.query("SELECT 1 FROM personal_data_keys WHERE user_id = \(stranger)").isEmpty)
        #expect(try await fixture.client.query("SELECT 1 FROM events WHERE user_id = \(stranger)").isEmpty)
        // An event about someone with no key yet makes theirs, once, in one more round trip; the next one reads it.
        let store = PostgresEventStore(client: fixture.client)
        func noted(_ data: String) -> NewEvent { NewEvent(id: UUID(), type: "BudgetNoted", schema: 1, data: Data(data.utf8), userId: stranger) }
        let ((), first) = try await metered { try await store.appendAtEnd([noted("{}")], to: .user(stranger), metadata: metadata) }
        #expect(first.transactions == 1 && first.roundTrips == 3, "\(first.statements)")
        let made: [UInt8] = try await fixture.client.query("SELECT key FROM personal_data_keys WHERE user_id = \(stranger)")[0].decode("key")
        let personal = noted(#"{"personal":{"email":"stranger@example.com"}}"#)
        let ((), second) = try await metered { try await store.appendAtEnd([personal], to: .user(stranger), metadata: metadata) }
        #expect(second.transactions == 1 && second.roundTrips == 2, "\(second.statements)")
        #expect(!second.statements.contains { $0.contains("INSERT INTO personal_data_keys") }, "\(second.statements)")
        #expect(try await fixture.client.query("SELECT key FROM personal_data_keys WHERE user_id = \(stranger)")[0].decode("key") == made)
        // Something personal appended about them after is sealed with that key, and opens with it.
        let stored: String = try await fixture.client.query("SELECT data::text AS data FROM events WHERE event_id = \(personal.id)")[0].decode("data")
        #expect(!stored.contains("stranger@example.com"), "\(stored)")
        let opened = try #require(try await store.readStream(.user(stranger), after: 0).last)
        #expect(String(decoding: opened.data, as: UTF8.self).contains("stranger@example.com"))
    }
}
