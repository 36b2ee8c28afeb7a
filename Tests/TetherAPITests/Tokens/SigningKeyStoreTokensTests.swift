import Foundation
import Testing
import TetherTesting
import TetherAPI
import TetherJOSE
import TetherPostgres

@Suite("Signing keys: creation, caching and rotation")
struct SigningKeyStoreTokensTests {
    static let day: TimeInterval = 86_400

    @Test func tenConcurrentProcessesCreateExactlyOneKey() async throws {
        let db = try await TokensDatabase.make(maxConnections: 10)
        // Ten connections open up front, so the stores' queries race instead of queueing behind connection set-up.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<10 { group.addTask { try await db.client.query("SELECT pg_sleep(0.05)") } }
            try await group.waitForAll()
        }
        // Separate stores have separate caches, as separate processes would: only the database can arbitrate.
        let keyIDs = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<10 {
                group.addTask { try await SigningKeyStore(client: db.client).currentSigningKey().keyID }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        let rows = try await db.adminQuery("SELECT kid, algorithm FROM signing_keys")
        #expect(rows.count == 1)
        #expect(keyIDs == [try rows[0].decode("kid", as: String.self)])
        #expect(try rows[0].decode("algorithm", as: String.self) == "ES256")
        try await db.close()
    }

    @Test func concurrentCallersOfOneStoreShareOneKey() async throws {
        let db = try await TokensDatabase.make()
        let store = SigningKeyStore(client: db.client)
        let keyIDs = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<10 { group.addTask { try await store.currentSigningKey().keyID } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(keyIDs.count == 1)
        #expect(try await db.adminQuery("SELECT count(*) AS n FROM signing_keys")[0].decode("n", as: Int.self) == 1)
        try await db.close()
    }

    @Test func firstKeyMadeByAProcessWhoseClockRunsAheadIsUsedNotDuplicated() async throws {
        let db = try await TokensDatabase.make()
        let now = Date()
        let ahead = try await SigningKeyStore(client: db.client, clock: ManualClock(now.addingTimeInterval(30))).currentSigningKey()
        let behind = try await SigningKeyStore(client: db.client, clock: ManualClock(now)).currentSigningKey()
        #expect(behind.keyID == ahead.keyID)
        #expect(try await db.adminQuery("SELECT count(*) AS n FROM signing_keys")[0].decode("n", as: Int.self) == 1)
        try await db.close()
    }

    @Test func keyIDIsTheRFC7638ThumbprintAndThePublishedKeyHasNoPrivateMembers() async throws {
        let db = try await TokensDatabase.make()
        let key = try await SigningKeyStore(client: db.client).currentSigningKey()
        #expect(key.keyID == key.publicJWK.thumbprint())
        let stored = try await db.adminQuery("SELECT public_jwk::text AS jwk FROM signing_keys")[0].decode("jwk", as: String.self)
        let jwk = try JOSEObject(parsing: Array(stored.utf8))
        #expect(jwk["d"] == nil)
        #expect(jwk["kid"] == .string(key.keyID))
        #expect(jwk["alg"] == "ES256")
        #expect(try JWK(object: jwk).thumbprint() == key.keyID)
        try await db.close()
    }

    @Test func signingUsesTheCachedKeyWithoutReadingTheTableAgain() async throws {
        let db = try await TokensDatabase.make()
        let clock = ManualClock()
        let store = SigningKeyStore(client: db.client, clock: clock)
        let first = try await store.currentSigningKey()
        // Behind the cache's back: were the table read again, a second key would be made.
        try await db.adminQuery("DELETE FROM signing_keys")
        clock.advance(by: 30)
        #expect(try await store.currentSigningKey().keyID == first.keyID)
        #expect(try await db.adminQuery("SELECT kid FROM signing_keys").isEmpty)
        clock.advance(by: 31)
        #expect(try await store.currentSigningKey().keyID != first.keyID)
        try await db.close()
    }

    @Test func rotationPublishesTheSuccessorFirstThenSwitchesThenRetiresThePredecessor() async throws {
        let db = try await TokensDatabase.make()
        let clock = ManualClock()
        let configuration = SigningKeyStore.Configuration()
        let store = SigningKeyStore(client: db.client, configuration: configuration, clock: clock)
        let start = clock.now()
        let old = try await store.currentSigningKey()

        clock.advance(by: 29 * Self.day)
        #expect(try await store.currentSigningKey().keyID == old.keyID)
        #expect(try await store.publishedKeys().keys.compactMap(\.keyID) == [old.keyID])

        // Within the pre-publication interval of the 30th day: a successor is published but does not sign yet.
        clock.advance(by: Self.day - configuration.prepublicationInterval + 1)
        #expect(try await store.currentSigningKey().keyID == old.keyID)
        let published = try await store.publishedKeys().keys.compactMap(\.keyID)
        #expect(published.count == 2)
        let new = try #require(published.first { $0 != old.keyID })

        clock.advance(by: configuration.prepublicationInterval)
        #expect(try await store.currentSigningKey().keyID == new)
        #expect(Set(try await store.publishedKeys().keys.compactMap(\.keyID)) == [old.keyID, new])

        // The old key's last token may have been signed up to one cache lifetime after the switch.
        clock.advance(by: configuration.retention - 1)
        #expect(Set(try await store.publishedKeys().keys.compactMap(\.keyID)) == [old.keyID, new])
        clock.advance(by: 1)
        #expect(try await store.publishedKeys().keys.compactMap(\.keyID) == [new])
        #expect(clock.now().timeIntervalSince(start) == 30 * Self.day + 1 + configuration.retention)
        clock.advance(by: configuration.cacheTimeToLive) // the next load erases what the retired key could sign with
        #expect(try await store.publishedKeys().keys.compactMap(\.keyID) == [new])

        let rows = try await db.adminQuery("""
            SELECT kid, private_key_pem IS NULL AS erased, retired_at IS NOT NULL AS retired FROM signing_keys ORDER BY activated_at
            """)
        #expect(rows.count == 2)
        #expect(try rows[0].decode("kid", as: String.self) == old.keyID)
        #expect(try rows[0].decode("erased", as: Bool.self))
        #expect(try !rows[1].decode("erased", as: Bool.self))
        #expect(try !rows[1].decode("retired", as: Bool.self))
        try await db.close()
    }

    /// Firebase's ring signs session cookies of up to two weeks: a cookie made just before a rotation stays
    /// verifiable by the published keys until it expires, not for the hour an ID token lives.
    @Test func firebasesRingKeepsAKeyPublishedAsLongAsTheLongestSessionCookieItSigned() async throws {
        let db = try await TokensDatabase.make()
        let clock = ManualClock()
        let configuration = FirebaseIDTokens.keyConfiguration
        let store = SigningKeyStore(client: db.client, configuration: configuration, clock: clock, algorithm: .rs256)
        let signer = try await store.currentSigningKey().keyID
        // The successor is published; the key still signs (a cookie made now lives two weeks), then stops.
        clock.advance(by: configuration.rotationInterval - configuration.prepublicationInterval + 1)
        #expect(try await store.currentSigningKey().keyID == signer)
        #expect(try await store.publishedKeys().keys.count == 2)
        clock.advance(by: configuration.prepublicationInterval - 1)
        #expect(try await store.currentSigningKey().keyID == signer)
        clock.advance(by: 1)
        #expect(try await store.currentSigningKey().keyID != signer, "the successor signs")
        clock.advance(by: 14 * Self.day - 60)
        #expect(try await store.publishedKeys().keys.contains { $0.keyID == signer }, "a two-week cookie it signed is still live")
        clock.advance(by: configuration.retention)
        #expect(try await !store.publishedKeys().keys.contains { $0.keyID == signer })
        try await db.close()
    }

    @Test func aStoreThatWaitedBehindAnotherProcessesRotationDoesNotRotateAgain() async throws {
        let db = try await TokensDatabase.make()
        let clock = ManualClock()
        let first = SigningKeyStore(client: db.client, clock: clock)
        let second = SigningKeyStore(client: db.client, clock: clock)
        _ = try await first.currentSigningKey()
        _ = try await second.currentSigningKey()
        clock.advance(by: 30 * Self.day)
        async let a = first.publishedKeys()
        async let b = second.publishedKeys()
        let (keysA, keysB) = try await (a, b)
        #expect(Set(keysA.keys.compactMap(\.keyID)) == Set(keysB.keys.compactMap(\.keyID)))
        #expect(try await db.adminQuery("SELECT count(*) AS n FROM signing_keys")[0].decode("n", as: Int.self) == 2)
        try await db.close()
    }

    @Test func aLoadedKeyKeepsSigningWhileTheDatabaseIsUnreachable() async throws {
        let db = try await TokensDatabase.make()
        let clock = ManualClock()
        let store = SigningKeyStore(client: db.client, clock: clock)
        let key = try await store.currentSigningKey()
        db.client.shutdown() // every later query fails as an unreachable database does
        clock.advance(by: 3600)
        #expect(try await store.currentSigningKey().keyID == key.keyID)
        #expect(try await store.publishedKeys().keys.compactMap(\.keyID) == [key.keyID])
        try await db.database.drop()
    }

    @Test func withoutAnyLoadedKeyAnUnreachableDatabaseIsReportedAsSuch() async throws {
        let db = try await TokensDatabase.make()
        db.client.shutdown()
        await #expect(throws: PostgresError.self) { try await SigningKeyStore(client: db.client).currentSigningKey() }
        try await db.database.drop()
    }
}
