import Foundation
import Testing
@testable import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

/// The states kept between commands are only a starting point: the log under the user's lock decides.
@Suite("Users' states kept between commands")
struct AccountStateCacheTests {
    private func session() -> NewSession {
        NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: ["apple"])
    }

    private let apple = ExternalIdentity(provider: "apple", uid: "001.cache", email: nil, isEmailVerified: false)
    private let google = ExternalIdentity(provider: "google", uid: "g-cache", email: nil, isEmailVerified: false)

    /// A user signed in with Apple and linked to Google by `accounts`, and the log's owner, who can change it
    /// behind the service's back.
    private struct LinkedUser {
        let client: PostgresClient
        let owner: PostgresClient
        let accounts: AccountService
        let userId: UUID

        /// Runs `statement` on the log, which refuses changes to what it holds unless its owner lifts that.
        func rewriteLog(_ statement: PostgresQuery) async throws {
            try await owner.withTransaction { connection in
                try await connection.query("ALTER TABLE events DISABLE TRIGGER events_no_update_or_delete")
                try await connection.query(statement)
                try await connection.query("ALTER TABLE events ENABLE TRIGGER events_no_update_or_delete")
            }
        }

        /// The log and read models put back to before the Google link (version 4), as by a restore; with `relinking`,
        /// another instance then links that Facebook identity as version 5.
        func putBackBeforeTheLink(relinking facebook: ExternalIdentity? = nil) async throws {
            try await rewriteLog("DELETE FROM events WHERE stream = \(StreamName.user(userId).rawValue) AND version > 4")
            try await owner.query("DELETE FROM identities WHERE user_id = \(userId) AND provider = 'google'")
            try await owner.query("UPDATE users SET version = 4 WHERE id = \(userId)")
            if let facebook {
                try await AccountService(database: client, emailPolicy: .oneAccountPerEmail).link(facebook, to: userId, context: CommandContext())
            }
        }
    }

    /// `tail`: how many of a stream's last events the service reads when no hint names its user.
    private func withLinkedUser(tail: Int? = nil, _ body: (LinkedUser) async throws -> Void) async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 2)
        let owner = database.client(asServiceRole: false, maxConnections: 1)
        defer { client.shutdown(); owner.shutdown() }
        var accounts = AccountService(database: client, emailPolicy: .oneAccountPerEmail)
        if let tail { accounts.streamTail = tail }
        let userId = try await accounts.signIn(apple, session: session(), context: CommandContext()).userId
        try await accounts.link(google, to: userId, context: CommandContext())
        try await body(LinkedUser(client: client, owner: owner, accounts: accounts, userId: userId))
    }

    /// Two instances on one database, as two servers: each keeps its own states, and neither misses the other's writes.
    @Test func anotherInstancesWritesAreReadOverAKeptState() async throws {
        let database = try await TestDatabase.make()
        let clientA = database.client(maxConnections: 2), clientB = database.client(maxConnections: 2)
        defer { clientA.shutdown(); clientB.shutdown() }
        let first = AccountService(database: clientA, emailPolicy: .oneAccountPerEmail)
        let second = AccountService(database: clientB, emailPolicy: .oneAccountPerEmail)
        let userId = try await first.signIn(apple, session: session(), context: CommandContext()).userId
        // The second instance links Google; the first still keeps the state from before.
        try await second.link(google, to: userId, context: CommandContext())
        let unlinked = try await first.unlink(provider: "google", from: userId, context: CommandContext())
        #expect(unlinked.identities.keys.sorted() == ["apple"])
        let returning = try await first.signIn(apple, session: session(), context: CommandContext())
        #expect(returning.account?.version == 8, "registered (4), linked (1), unlinked (1): the sign-in read from version 6")
        #expect(returning.account?.sessions.count == 2)
    }

    /// A session's first refresh finds its user's kept state by the refresh token the session was opened
    /// with, as later refreshes do by the token they were given: none reads the whole stream again.
    @Test func aSessionsFirstRefreshStartsFromTheKeptState() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 2)
        defer { client.shutdown() }
        let accounts = AccountService(database: client, emailPolicy: .oneAccountPerEmail)
        let opened = session()
        let userId = try await accounts.signIn(apple, session: opened, context: CommandContext()).userId
        var presented = opened.refreshTokenHash
        for round in 1...2 {
            let meter = PostgresMeter()
            let next = "rotated-\(round)-\(UUID().uuidString)"
            let rotated = try await PostgresMeter.$current.withValue(meter) {
                try await accounts.refresh(presentedHash: presented, newHash: next, presentedJKT: nil, context: CommandContext())
            }
            #expect(rotated.userId == userId && rotated.sessionId == opened.id)
            #expect(rotated.account.version == 4 + round, "registered with the session (4 events), then one a refresh")
            // The stream is read from the kept state's version (`version > CASE …`), not from the start.
            #expect(meter.statements.contains { $0.contains("stream = 'user-'") && $0.contains("version > CASE") },
                    "refresh \(round) read the whole stream: \(meter.statements)")
            presented = next
        }
    }

    /// A command no hint led to (an identity the state was never named by) reads the stream (whole, when shorter
    /// than the tail it reads), and decodes only what the state kept of the user by id does not hold.
    @Test func aStreamReadWholeIsFoldedOnlyPastTheStateKeptById() async throws {
        try await withLinkedUser { user in
            // The stream's first event stops decoding: only a command that decodes it fails.
            try await user.rewriteLog("""
                UPDATE events SET data = '{"unreadable": true}' WHERE stream = \(StreamName.user(user.userId).rawValue) AND version = 1
                """)
            let meter = PostgresMeter()
            let returning = try await PostgresMeter.$current.withValue(meter) {
                try await user.accounts.signIn(google, session: session(), context: CommandContext())
            }
            #expect(!meter.statements.contains { $0.contains("version > CASE") }, "no hint named the user: \(meter.statements)")
            #expect(returning.userId == user.userId && !returning.isNewUser)
            #expect(returning.account?.version == 7, "registered (4), linked (1), signed in (2)")
            #expect(returning.account?.identities.keys.sorted() == ["apple", "google"])
            // Without the kept state, the whole stream is decoded, the damaged event with it.
            let fresh = AccountService(database: user.client, emailPolicy: .oneAccountPerEmail)
            await #expect(throws: (any Error).self) { try await fresh.signIn(google, session: session(), context: CommandContext()) }
        }
    }

    /// The stream's version-1 event made unreadable: only a command that decodes it fails.
    private func damageFirstEvent(of user: LinkedUser) async throws {
        try await user.rewriteLog("""
            UPDATE events SET data = '{"unreadable": true}' WHERE stream = \(StreamName.user(user.userId).rawValue) AND version = 1
            """)
    }

    /// Without a hint, a command reads only the stream's last events (here 2 of 5): the state kept by id is
    /// among them, so PostgreSQL reads no more, and nothing older is decoded.
    @Test func aLongStreamIsReadOnlyFromItsTailWhenTheStateKeptByIdIsInIt() async throws {
        try await withLinkedUser(tail: 2) { user in
            try await damageFirstEvent(of: user)
            let meter = PostgresMeter()
            let returning = try await PostgresMeter.$current.withValue(meter) {
                try await user.accounts.signIn(google, session: session(), context: CommandContext())
            }
            #expect(returning.userId == user.userId && returning.account?.version == 7)
            #expect(meter.roundTrips == 2, "\(meter.statements)")
            #expect(meter.statements.contains { $0.contains("stream = 'user-'") && $0.contains("greatest(0,") }, "\(meter.statements)")
        }
    }

    /// With no state kept (another server, or after a restart), the tail is not enough: the earlier events are
    /// read in a third round trip, and the state is the one a whole read gives.
    @Test func aLongStreamWithNoStateKeptIsReadWholeInAThirdRoundTrip() async throws {
        try await withLinkedUser { user in
            var fresh = AccountService(database: user.client, emailPolicy: .oneAccountPerEmail)
            fresh.streamTail = 2
            let meter = PostgresMeter()
            let returning = try await PostgresMeter.$current.withValue(meter) {
                try await fresh.signIn(google, session: session(), context: CommandContext())
            }
            #expect(meter.roundTrips == 3, "\(meter.statements)")
            #expect(meter.statements.contains { $0.contains("version < ") }, "\(meter.statements)")
            #expect(returning.account?.version == 7 && returning.account?.identities.keys.sorted() == ["apple", "google"])
            #expect(returning.account?.sessions.count == 2)
            // Folded from the log in two parts by one server, and whole by another: the same state.
            var parts = AccountService(database: user.client, emailPolicy: .oneAccountPerEmail)
            parts.streamTail = 3
            let whole = try await AccountService(database: user.client, emailPolicy: .oneAccountPerEmail).read(user.userId)
            #expect(try await parts.read(user.userId) == whole)
            // The next command of the same server finds its state kept: two round trips again.
            let again = PostgresMeter()
            _ = try await PostgresMeter.$current.withValue(again) {
                try await fresh.signIn(google, session: session(), context: CommandContext())
            }
            #expect(again.roundTrips == 2, "\(again.statements)")
        }
    }

    /// A kept state older than the tail (another server wrote more events since): the earlier events are
    /// read, and decoding still starts after the kept state.
    @Test func aStateKeptFromBeforeTheTailIsFoundInTheEarlierEvents() async throws {
        try await withLinkedUser(tail: 2) { user in
            let other = AccountService(database: user.client, emailPolicy: .oneAccountPerEmail)
            for _ in 0..<2 { _ = try await other.signIn(apple, session: session(), context: CommandContext()) }
            try await damageFirstEvent(of: user)
            let meter = PostgresMeter()
            let returning = try await PostgresMeter.$current.withValue(meter) {
                try await user.accounts.signIn(google, session: session(), context: CommandContext())
            }
            #expect(meter.roundTrips == 3, "\(meter.statements)")
            #expect(returning.account?.version == 11, "registered (4), linked (1), three sign-ins of two events")
            #expect(returning.account?.sessions.count == 4)
        }
    }

    /// A log put back to an earlier point and written again since, by another instance, up to the kept
    /// state's version: a command believes the log, not the state kept of the user. Signing in with Facebook,
    /// no hint names the user and the state is found by id; with Apple, the identity's hint finds it and the
    /// stream is read only after the kept version, which the log has again, written by another transaction.
    @Test(arguments: ["facebook", "apple"])
    func aLogWrittenAgainPastARestoreIsBelievedOverTheKeptState(signingInWith provider: String) async throws {
        try await withLinkedUser { user in
            // The link (version 5) is undone, as by a restore; another instance then links Facebook as version 5.
            let facebook = ExternalIdentity(provider: "facebook", uid: "fb-cache", email: nil, isEmailVerified: false)
            try await user.putBackBeforeTheLink(relinking: facebook)
            // This instance still keeps the state at version 5 with Google.
            let returning = try await user.accounts.signIn(provider == "apple" ? apple : facebook, session: session(), context: CommandContext())
            #expect(returning.userId == user.userId)
            #expect(returning.account?.identities.keys.sorted() == ["apple", "facebook"], "the log's version 5, not the kept one")
            #expect(returning.account?.version == 7)
            let kept = try await user.accounts.read(user.userId)
            #expect(kept.version == 7 && kept.identities.keys.sorted() == ["apple", "facebook"], "the state kept after it is the log's")
        }
    }

    /// A read of an id that names no user keeps the empty state it found (version 0: no event to check). The
    /// reads and commands after it start from that state and answer the same (a read checking the empty
    /// state's event answered "stream … is at version 0, expected 0", a 500 of the email-code routes).
    @Test func anIdWithNoUserReadsAndIsRefusedAgainFromTheEmptyStateKeptOfIt() async throws {
        try await withLinkedUser { user in
            let nobody = UUID()
            for attempt in 1...3 {
                let read = try await user.accounts.read(nobody)
                #expect(!read.exists && read.version == 0, "attempt \(attempt)")
                await #expect(throws: AccountError.notFound, "attempt \(attempt)") {
                    try await user.accounts.unlink(provider: "apple", from: nobody, context: CommandContext())
                }
            }
        }
    }

    /// A read finds the state kept by id as a command's hint does: after a restore, the log's state, not the kept one.
    @Test func aReadAfterARestoreAnswersTheLogNotTheStateKeptById() async throws {
        try await withLinkedUser { user in
            let facebook = ExternalIdentity(provider: "facebook", uid: "fb-read", email: nil, isEmailVerified: false)
            try await user.putBackBeforeTheLink(relinking: facebook)
            let read = try await user.accounts.read(user.userId)
            #expect(read.version == 5 && read.identities.keys.sorted() == ["apple", "facebook"])
        }
    }

    /// A state kept by id that is ahead of the log (a database put back, then written again by another
    /// instance) is forgotten by the first command no hint led to, which folds the log whole: the state that
    /// command leaves, though of a lower version, is kept, and the next command by id starts from it.
    @Test func aStateKeptByIdAheadOfTheLogIsForgottenAndReplaced() async throws {
        try await withLinkedUser(tail: 2) { user in
            for _ in 0..<2 { _ = try await user.accounts.signIn(apple, session: session(), context: CommandContext()) }
            // Kept: version 9. The log goes back to version 4, and another instance links Facebook as version 5.
            let facebook = ExternalIdentity(provider: "facebook", uid: "fb-ahead", email: nil, isEmailVerified: false)
            try await user.putBackBeforeTheLink(relinking: facebook)
            let returning = try await user.accounts.signIn(facebook, session: session(), context: CommandContext())
            #expect(returning.account?.version == 7 && returning.account?.identities.keys.sorted() == ["apple", "facebook"])
            let meter = PostgresMeter()
            let read = try await PostgresMeter.$current.withValue(meter) { try await user.accounts.read(user.userId) }
            #expect(read.version == 7, "the state the sign-in left, not the one kept from before the restore")
            #expect(meter.roundTrips == 1, "\(meter.statements)")
        }
    }

    /// A log that lost its newest events (a database put back to an earlier point) is believed over the kept state.
    @Test func aKeptStateAheadOfTheLogIsDroppedAndTheStreamReadWhole() async throws {
        try await withLinkedUser { user in
            // The link's event and read model are gone, as after a restore.
            try await user.putBackBeforeTheLink()
            let returning = try await user.accounts.signIn(apple, session: session(), context: CommandContext())
            #expect(returning.account?.identities.keys.sorted() == ["apple"], "the lost link is not resurrected from memory")
            #expect(returning.account?.version == 6, "the sign-in's two events follow the log's four")
            let versions = try await user.owner.query("""
                SELECT version FROM events WHERE stream = \(StreamName.user(user.userId).rawValue) ORDER BY version
                """).map { try $0.decode("version", as: Int.self) }
            #expect(versions == Array(1...6), "appended right after the log's last event, with no gap")
        }
    }

    /// A kept state found by the identity makes the sign-in a returning one, without the email's lock;
    /// an identity unlinked since is noticed, and the sign-in goes the way a fresh read says.
    @Test func anIdentityHintIsCheckedAgainstTheLog() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 2)
        defer { client.shutdown() }
        let accounts = AccountService(database: client, emailPolicy: .oneAccountPerEmail)
        let withEmail = ExternalIdentity(provider: "apple", uid: "001.hint", email: "hint@privaterelay.appleid.com", isEmailVerified: true)
        _ = try await accounts.signIn(withEmail, session: session(), context: CommandContext())
        let meter = PostgresMeter()
        let returning = try await PostgresMeter.$current.withValue(meter) {
            try await accounts.signIn(withEmail, session: session(), context: CommandContext())
        }
        #expect(!returning.isNewUser)
        #expect(!meter.statements.contains { $0.contains("email_normalized") }, "\(meter.statements)")
        #expect(meter.roundTrips == 2)

        let userId = try await accounts.signIn(apple, session: session(), context: CommandContext()).userId
        try await accounts.link(google, to: userId, context: CommandContext())
        try await accounts.unlink(provider: "apple", from: userId, context: CommandContext())
        let again = try await accounts.signIn(apple, session: session(), context: CommandContext())
        #expect(again.isNewUser, "the identity left its user: signing in with it makes a new one")
        #expect(again.userId != userId)
    }

    /// A kept state's key is used again only for the stored bytes it was opened from: a key re-wrapped
    /// (another master key, another nonce) is unwrapped anew, and a destroyed one is none.
    @Test func aKeptKeyIsUsedOnlyForTheStoredKeyItWasOpenedFrom() throws {
        let ring = MasterKeyRing(current: MasterKey.generate())
        let user = UUID()
        let made = try PersonalDataVault.newKey(for: user, masterKeys: ring)
        let opened = try #require(try AccountStateCache.KeptKey.opening(made.stored, of: user, kept: nil, masterKeys: ring))
        #expect(opened.opened == made.key && opened.stored == made.stored)

        // A marker in place of the opened key shows whether the kept one was taken or the stored one unwrapped.
        let kept = AccountStateCache.KeptKey(stored: made.stored, opened: Array(repeating: 7, count: 32))
        #expect(try AccountStateCache.KeptKey.opening(made.stored, of: user, kept: kept, masterKeys: ring)?.opened == kept.opened)
        let rewrapped = try ring.wrap(made.key, context: PersonalDataVault.wrappingContext(user))
        #expect(rewrapped != made.stored)
        #expect(try AccountStateCache.KeptKey.opening(rewrapped, of: user, kept: kept, masterKeys: ring)?.opened == made.key)
        #expect(try AccountStateCache.KeptKey.opening(nil, of: user, kept: kept, masterKeys: ring) == nil, "a destroyed key")
    }

    /// A user's commands keep their key with their state (``aKeptKeyIsUsedOnlyForTheStoredKeyItWasOpenedFrom``
    /// shows when it is used again); their erasure leaves the state without it.
    @Test func aCommandKeepsTheUsersKeyWithTheStateUntilTheirErasure() async throws {
        try await withLinkedUser { linked in
            let stored: [UInt8] = try await linked.owner.query(
                "SELECT key FROM personal_data_keys WHERE user_id = \(linked.userId)")[0].decode("key")
            let kept = try #require(linked.accounts.cache.entry(for: linked.userId)?.key, "the link's load opened the key")
            #expect(kept.stored == stored)
            #expect(kept.opened == (try PersonalDataVault.opened(stored, of: linked.userId, masterKeys: linked.client.configuration.masterKeys)))
            _ = try await linked.accounts.signIn(apple, session: session(), context: CommandContext())
            #expect(linked.accounts.cache.entry(for: linked.userId)?.key?.stored == stored)

            _ = try await linked.accounts.erase(userId: linked.userId, reason: nil, context: CommandContext())
            let erased = try #require(linked.accounts.cache.entry(for: linked.userId))
            #expect(erased.account.isErased)
            #expect(erased.key == nil, "the destroyed key is not kept in memory")
        }
    }
}
