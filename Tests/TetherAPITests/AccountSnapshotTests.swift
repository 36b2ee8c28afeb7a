import Foundation
import Testing
@testable import TetherAPI
import TetherCore
import TetherCrypto
import TetherPostgres
import Synchronization
import TetherTesting

/// Users' snapshots: a load that finds no kept state starts from one instead of the stream's first event,
/// and only when the log still goes on from it.
@Suite("Users' snapshots")
struct AccountSnapshotTests {
    private func session() -> NewSession {
        NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: ["apple"])
    }

    private let apple = ExternalIdentity(provider: "apple", uid: "001.snapshot", email: "snap@example.com", isEmailVerified: true)
    private let google = ExternalIdentity(provider: "google", uid: "g-snapshot", email: nil, isEmailVerified: false)

    /// A state of every part: identities (one with a grant), sessions of two kinds, a confirmed TOTP factor
    /// with recovery codes, a phone factor being enrolled, an open challenge with a wrong code, an email
    /// code, custom claims; dates with microseconds, as PostgreSQL gives them.
    private func richState() throws -> UserAccount {
        let id = UUID()
        let now = Date(timeIntervalSince1970: 1_795_958_985.123_456)
        var user = UserAccount(id: id)
        func apply(_ events: [AccountEvent], at date: Date = now) {
            user = user.appending(events.map { ($0, date) }, version: user.version + events.count)
        }
        apply(UserAccount.register(id: id, identity: apple, session: session(), now: now))
        var linked = google
        linked.providerGrant = ProviderGrant(kind: "refresh_token", token: "rt-1", clientId: "com.example")
        apply(try user.link(linked))
        var parse = session()
        parse.secretKind = .parseSessionToken
        apply(try user.signIn(with: apple, session: parse, now: now), at: now.addingTimeInterval(0.000_7))
        let totp = UUID()
        apply(try user.enrolTOTP(factorId: totp, secret: "JBSWY3DPEHPK3PXP", displayName: "phone app", authTime: now, now: now))
        apply(try user.confirmFactor(totp, type: .totp, check: .totp(matchingStep: 100), recoveryCodeHashes: ["r1", "r2"], now: now).events)
        apply(try user.enrolPhone(
            factorId: UUID(), phoneNumber: "+15555550100", displayName: nil, codeHash: "c", authTime: now, now: now))
        let challenged = session()
        apply(try user.signIn(with: apple, session: challenged, now: now))
        apply(try user.verifyChallenge(challenged.id, factor: totp, check: .totp(matchingStep: nil), session: session(), now: now).events)
        apply(try user.issueEmailCode(
            .passwordReset, codeId: UUID(), codeHash: "h", email: "snap@example.com", expiresAt: now.addingTimeInterval(60)))
        apply(try user.setCustomClaims(#"{"role":"admin"}"#))
        return user
    }

    @Test func aSealedStateOpensAsTheSameStateAndOnlyAsItsOwnUsersAtItsVersion() throws {
        let user = try richState()
        let id = user.id
        #expect(user.sessions.count == 2 && user.mfa.factors.count == 2 && user.mfa.challenges.count == 1)
        #expect(user.mfa.failures.count == 1 && user.emailCodes.count == 1 && user.identities["google"]?.grant != nil)

        let key = SecureRandom.bytes(count: 32)
        let stored = try AccountSnapshot.sealed(user, key: key)
        #expect(AccountSnapshot.opened(stored, of: id, version: user.version, key: key) == user)
        let text = String(decoding: stored, as: UTF8.self)
        #expect(!text.contains("snap@example.com") && !text.contains("001.snapshot") && !text.contains("+15555550100"), "sealed")
        #expect(AccountSnapshot.opened(stored, of: id, version: user.version - 1, key: key) == nil, "bound to its version")
        #expect(AccountSnapshot.opened(stored, of: UUID(), version: user.version, key: key) == nil, "bound to its user")
        #expect(AccountSnapshot.opened(stored, of: id, version: user.version, key: SecureRandom.bytes(count: 32)) == nil)
    }

    /// A tripwire for ``AccountSnapshot/format``: the stored properties a snapshot of this format holds. A new
    /// optional property would read as nil from an older snapshot, so a change here needs a new format number
    /// (and so does a change to how an event folds into the state, which no test can see).
    @Test func theFormatNamesEveryStoredPropertyOfTheState() throws {
        func labels(_ value: Any) -> [String] { Mirror(reflecting: value).children.compactMap(\.label) }
        let user = try richState()
        let mfa = user.mfa
        #expect(AccountSnapshot.format == 6)
        #expect(labels(user) == [
            "id", "version", "email", "isEmailVerified", "displayName", "photoURL", "isDisabled", "isErased", "createdAt",
            "lastSignInAt", "updatedAt", "validSince", "identities", "passwordHash", "passwordSetAt", "sessions", "mfa", "customClaims",
            "emailCodes",
        ])
        #expect(labels(try #require(user.identities["google"])) == [
            "provider", "uid", "email", "isEmailVerified", "displayName", "photoURL", "linkedAt", "emailForwarding", "grant",
            "grantCheckedAt",
        ])
        #expect(labels(try #require(user.identities["google"]?.grant)) == ["kind", "token", "clientId"])
        #expect(labels(try #require(user.sessions.values.first)) == [
            "id", "refreshTokenHash", "generation", "authTime", "amr", "jkt", "startedAt", "isActive", "secretKind", "installationId",
            "expiresAt", "developerClaims", "grantCheckedAt", "secondFactorId",
        ])
        #expect(labels(mfa) == ["factors", "recoveryCodes", "challenges", "failures", "smsSends"])
        #expect(labels(try #require(mfa.factors.values.first)) == [
            "id", "type", "displayName", "phoneNumber", "totpSecret", "enrolledAt", "confirmedAt", "lastUsedStep", "codeHash",
            "codeExpiresAt", "failedAttempts",
        ])
        #expect(labels(try #require(mfa.challenges.values.first)) == [
            "id", "firstFactor", "amr", "expiresAt", "jkt", "developerClaims", "attempts", "isEnded", "codeHash", "codeFactorId", "codeExpiresAt",
        ])
        #expect(labels(try #require(user.emailCodes.values.first)) == [
            "id", "purpose", "email", "codeHash", "issuedAt", "expiresAt", "restoresVerified", "isSpent", "isUsed", "refusedFor",
        ])
    }

    /// A user of `events` or so events (sign-ins after an Apple sign-up and a Google link), and the log's owner.
    private struct LongUser {
        let client: PostgresClient
        let owner: PostgresClient
        let userId: UUID

        /// A server with no state kept: it reads the stream's last 2 events, and snapshots after 8 decoded.
        func freshService() -> AccountService {
            var accounts = AccountService(database: client, emailPolicy: .oneAccountPerEmail)
            accounts.streamTail = 2
            accounts.snapshotInterval = 8
            return accounts
        }

        func snapshot() async throws -> (version: Int, format: Int)? {
            try await owner.query("SELECT version, format FROM account_snapshots WHERE user_id = \(userId)").first.map {
                (try $0.decode("version"), try $0.decode("format"))
            }
        }

        /// The user's state folded from their whole stream: their snapshot is set aside for the read, then put back.
        func foldedWhole() async throws -> UserAccount {
            try await owner.query("CREATE TEMP TABLE IF NOT EXISTS set_aside AS SELECT * FROM account_snapshots WITH NO DATA")
            try await owner.query("WITH gone AS (DELETE FROM account_snapshots WHERE user_id = \(userId) RETURNING *) INSERT INTO set_aside SELECT * FROM gone")
            let whole: Result<UserAccount, any Error>
            do { whole = .success(try await freshService().read(userId)) } catch { whole = .failure(error) }
            try await owner.query("WITH back AS (DELETE FROM set_aside RETURNING *) INSERT INTO account_snapshots SELECT * FROM back")
            return try whole.get()
        }

        func damageFirstEvent() async throws {
            try await owner.withTransaction { connection in
                try await connection.query("ALTER TABLE events DISABLE TRIGGER events_no_update_or_delete")
                try await connection.query("""
                    UPDATE events SET data = '{"unreadable": true}' WHERE stream = \(StreamName.user(userId).rawValue) AND version = 1
                    """)
                try await connection.query("ALTER TABLE events ENABLE TRIGGER events_no_update_or_delete")
            }
        }
    }

    private func withLongUser(_ body: (LongUser) async throws -> Void) async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 2)
        let owner = database.client(asServiceRole: false, maxConnections: 1)
        defer { client.shutdown(); owner.shutdown() }
        // The default interval: none of these commands decodes enough to write a snapshot.
        let accounts = AccountService(database: client, emailPolicy: .oneAccountPerEmail)
        let userId = try await accounts.signIn(apple, session: session(), context: CommandContext()).userId
        try await accounts.link(google, to: userId, context: CommandContext())
        for _ in 0..<6 { _ = try await accounts.signIn(google, session: session(), context: CommandContext()) }
        try await body(LongUser(client: client, owner: owner, userId: userId))
    }

    /// The first command of a server that keeps no state of the user decodes the whole stream and writes the
    /// state it folded as the snapshot; the next such server starts from the snapshot and decodes only the
    /// events after it.
    @Test func aServerWithoutTheUsersStateStartsFromTheirSnapshot() async throws {
        try await withLongUser { user in
            #expect(try await user.snapshot() == nil)
            let firstServer = user.freshService()
            let first = try await firstServer.signIn(google, session: session(), context: CommandContext())
            #expect(first.account?.version == 19, "registered (4), linked (1), seven sign-ins of two events")
            #expect(try await user.snapshot()! == (17, AccountSnapshot.format), "the state the command started from")
            #expect(firstServer.cache.loads[.log] == 1 && firstServer.cache.loads.snapshotsWritten.load(ordering: .relaxed) == 1)
            // Taken from the snapshot: the stream's first event, unreadable now, is not decoded.
            try await user.damageFirstEvent()
            let meter = PostgresMeter()
            let nextServer = user.freshService()
            let next = try await PostgresMeter.$current.withValue(meter) {
                try await nextServer.signIn(google, session: session(), context: CommandContext())
            }
            #expect(nextServer.cache.loads[.snapshot] == 1 && nextServer.cache.loads[.log] == 0)
            #expect(nextServer.cache.loads.snapshotsWritten.load(ordering: .relaxed) == 0)
            #expect(nextServer.cache.loads.snapshotsPassedOver.load(ordering: .relaxed) == 0)
            #expect(next.account?.version == 21 && next.account?.sessions.count == 9)
            #expect(meter.roundTrips == 3, "\(meter.statements)")
            #expect(meter.statements.contains { $0.contains("FROM account_snapshots") }, "\(meter.statements)")
            #expect(try await user.snapshot()! == (17, AccountSnapshot.format), "2 events decoded: no new snapshot")
            // The same state as the stream folded whole (the first event put back for it).
            let fromSnapshot = try await user.freshService().read(user.userId)
            await #expect(throws: (any Error).self) { try await user.foldedWhole() }
            #expect(fromSnapshot.version == 21 && fromSnapshot.identities.keys.sorted() == ["apple", "google"])
        }
    }

    /// The state a snapshot gives is the one the whole stream folds to.
    @Test func aStateFromASnapshotIsTheWholeStreamsState() async throws {
        try await withLongUser { user in
            _ = try await user.freshService().signIn(apple, session: session(), context: CommandContext())
            _ = try await user.freshService().signOut(
                userId: user.userId, sessionId: try await user.freshService().read(user.userId).sessions.keys.first!, context: CommandContext())
            #expect(try await user.snapshot()?.version == 17)
            let fromSnapshot = try await user.freshService().read(user.userId)
            let whole = try await user.foldedWhole()
            #expect(fromSnapshot.version == 20 && fromSnapshot == whole)

        }
    }

    /// A snapshot the log does not go on from (its transaction is not the one that wrote the event at its
    /// version: a log put back and written again; or ahead of the log), of another format, or that does not
    /// open, is passed over: the stream is read whole, and a command writes a good one in its place.
    @Test func aSnapshotTheLogDoesNotGoOnFromOrThatDoesNotOpenIsPassedOver() async throws {
        try await withLongUser { user in
            _ = try await user.freshService().signIn(google, session: session(), context: CommandContext())
            // With the round trips of a read: the snapshot and the events from it, then the whole stream; or, for a
            // snapshot of another format, which is not read, the whole stream at once.
            // A snapshot of another format is not read, so not counted as passed over either.
            let damages: [(damage: PostgresQuery, roundTrips: Int, passedOver: Int)] = [
                ("UPDATE account_snapshots SET tx = '3' WHERE user_id = \(user.userId)", 3, 1),
                ("UPDATE account_snapshots SET format = format + 1 WHERE user_id = \(user.userId)", 2, 0),
                ("UPDATE account_snapshots SET version = version + 1000 WHERE user_id = \(user.userId)", 3, 1),
                ("UPDATE account_snapshots SET state = set_byte(state, 20, get_byte(state, 20) # 1) WHERE user_id = \(user.userId)", 3, 1),
            ]
            for (damage, roundTrips, passedOver) in damages {
                try await user.owner.query(damage)
                let whole = try await user.foldedWhole()
                let meter = PostgresMeter()
                let server = user.freshService()
                let read = try await PostgresMeter.$current.withValue(meter) { try await server.read(user.userId) }
                #expect(read == whole, "\(damage.sql)")
                #expect(server.cache.loads.snapshotsPassedOver.load(ordering: .relaxed) == passedOver, "\(damage.sql)")
                #expect(server.cache.loads[.log] == 1, "\(damage.sql)")
                #expect(meter.roundTrips == roundTrips, "\(damage.sql): \(meter.statements)")
                let version = read.version
                let signedIn = try await user.freshService().signIn(google, session: session(), context: CommandContext())
                #expect(signedIn.account?.version == version + 2)
                #expect(try await user.snapshot()! == (version, AccountSnapshot.format), "written again: \(damage.sql)")
            }
        }
    }

    /// Erasure deletes the snapshot with the key it is sealed with; the erased user's next load folds the stream.
    @Test func erasureDeletesTheSnapshot() async throws {
        try await withLongUser { user in
            _ = try await user.freshService().signIn(google, session: session(), context: CommandContext())
            #expect(try await user.snapshot() != nil)
            let erased = try await user.freshService().erase(userId: user.userId, reason: "test", context: CommandContext())
            #expect(erased.isErased)
            #expect(try await user.snapshot() == nil)
            let read = try await user.freshService().read(user.userId)
            #expect(read.isErased && read.email == nil)
            #expect(try await user.snapshot() == nil, "an erased user gets no snapshot")
        }
    }
}
