import Foundation
import Testing
import TetherCore
import TetherPostgres
import TetherTesting

@Suite("Used nonces in PostgreSQL, as the service role")
struct PostgresNonceStoreTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    private func withStore(_ body: (PostgresNonceStore, PostgresClient) async throws -> Void) async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 8)
        do {
            try await body(PostgresNonceStore(client: client), client)
        } catch {
            client.shutdown()
            try? await database.drop()
            throw error
        }
        client.shutdown()
        try await database.drop()
    }

    private func nonce(_ hash: String = UUID().uuidString, scope: String = "apple", expiresIn: TimeInterval = 600) -> UsedNonce {
        UsedNonce(scope: scope, hash: hash, expiresAt: now.addingTimeInterval(expiresIn))
    }

    @Test func aNonceIsAcceptedOnceWhileItsRecordLives() async throws {
        try await withStore { (store, _) async throws in
            let used = nonce()
            #expect(try await store.consume(used, now: now) == .accepted)
            #expect(try await store.consume(used, now: now) == .alreadyUsed)
            #expect(try await store.consume(used, now: now.addingTimeInterval(599)) == .alreadyUsed)
        }
    }

    @Test func theSameHashInAnotherScopeIsAnotherNonce() async throws {
        try await withStore { (store, _) async throws in
            #expect(try await store.consume(nonce("same", scope: "apple"), now: now) == .accepted)
            #expect(try await store.consume(nonce("same", scope: "google"), now: now) == .accepted)
        }
    }

    @Test func anExpiredRecordNoLongerBlocksItsNonce() async throws {
        try await withStore { (store, _) async throws in
            #expect(try await store.consume(nonce("late", expiresIn: 10), now: now) == .accepted)
            let later = now.addingTimeInterval(11)
            #expect(try await store.consume(UsedNonce(scope: "apple", hash: "late", expiresAt: later.addingTimeInterval(600)), now: later) == .accepted)
            #expect(try await store.consume(nonce("late"), now: later) == .alreadyUsed)
        }
    }

    @Test func purgeDeletesExpiredRecordsOnly() async throws {
        try await withStore { (store, client) async throws in
            for index in 0..<5 { _ = try await store.consume(nonce("old-\(index)", expiresIn: 5), now: now) }
            for index in 0..<3 { _ = try await store.consume(nonce("new-\(index)", expiresIn: 600), now: now) }
            #expect(try await store.purgeExpired(now: now.addingTimeInterval(6)) == 5)
            let remaining: Int = try await client.query("SELECT count(*) AS n FROM used_nonces")[0].decode("n")
            #expect(remaining == 3)
        }
    }

    @Test func consumingPurgesExpiredRecordsOfOtherNoncesOncePerInterval() async throws {
        try await withStore { (store, client) async throws in
            _ = try await store.consume(nonce("short", expiresIn: 5), now: now)
            _ = try await store.consume(nonce("within-interval"), now: now.addingTimeInterval(30))
            var count: Int = try await client.query("SELECT count(*) AS n FROM used_nonces")[0].decode("n")
            #expect(count == 2, "the first call purged; the next purge waits for the interval")
            _ = try await store.consume(nonce("after-interval"), now: now.addingTimeInterval(61))
            count = try await client.query("SELECT count(*) AS n FROM used_nonces WHERE nonce_hash = 'short'")[0].decode("n")
            #expect(count == 0)
        }
    }

    @Test func ofConcurrentRequestsWithOneNonceExactlyOneIsAccepted() async throws {
        try await withStore { (store, _) async throws in
            let used = nonce()
            let now = now
            let outcomes = try await withThrowingTaskGroup(of: NonceConsumption.self) { group in
                for _ in 0..<16 { group.addTask { try await store.consume(used, now: now) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == .accepted }.count == 1)
            #expect(outcomes.filter { $0 == .alreadyUsed }.count == 15)
        }
    }

    @Test func theServiceRoleMayNotRewriteRecords() async throws {
        try await withStore { (store, client) async throws in
            _ = try await store.consume(nonce("kept"), now: now)
            await #expect(throws: PostgresError.self) {
                try await client.query("UPDATE used_nonces SET expires_at = now() WHERE nonce_hash = 'kept'")
            }
        }
    }
}
