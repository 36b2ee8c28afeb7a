import Foundation
import Testing
@testable import TetherPostgres
import TetherCore
import TetherCrypto
import TetherTesting

@Suite("Read-model seal: personal data in the read models, sealed deterministically")
struct ReadModelSealTests {
    @Test func aValueSealsToTheSameTextUnderOneKeyOpensBackAndTellsNothing() throws {
        let seal = try ReadModelSeal(key: SecureRandom.bytes(count: 32))
        let sealed = try seal.seal("Ada.Lovelace@example.com")
        #expect(sealed.hasPrefix("rm1:"))
        #expect(!sealed.lowercased().contains("ada") && !sealed.contains("example"))
        #expect(try seal.seal("Ada.Lovelace@example.com") == sealed, "deterministic: equality and unique constraints still work")
        #expect(try seal.seal("ada.lovelace@example.com") != sealed)
        #expect(try seal.open(sealed) == "Ada.Lovelace@example.com")
        #expect(try seal.seal(nil as String?) == nil && (try seal.open(nil)) == nil, "NULL stays NULL")
        #expect(try seal.open(try seal.seal("")) == "", "an empty text is a value too")
        let unicode = "Zoë 🦄 Łukasiewicz"
        #expect(try seal.open(try seal.seal(unicode)) == unicode)

        let other = try ReadModelSeal(key: SecureRandom.bytes(count: 32))
        #expect(try other.seal("Ada.Lovelace@example.com") != sealed, "another database's key seals differently")
        #expect(throws: (any Error).self, "another key does not open it") { try other.open(sealed) }
    }

    @Test func valuesInClearAlteredOrTruncatedAreRefusedNotRead() throws {
        let seal = try ReadModelSeal(key: SecureRandom.bytes(count: 32))
        #expect(throws: (any Error).self, "a value in clear was written around the projections") { try seal.open("ada@example.com") }
        let sealed = try seal.seal("ada@example.com")
        var bytes = Array(Data(base64Encoded: String(sealed.dropFirst(4)))!)
        bytes[bytes.count / 2] ^= 1
        #expect(throws: (any Error).self) { try seal.open("rm1:" + Data(bytes).base64EncodedString()) }
        #expect(throws: (any Error).self) { try seal.open(String(sealed.prefix(12))) }
        #expect(throws: (any Error).self) { try seal.open("rm1:not base64!") }
        #expect(throws: (any Error).self, "keys are 32 bytes") { try ReadModelSeal(key: SecureRandom.bytes(count: 16)) }
    }

    @Test func theKeyIsMadeOnceWrappedWithTheMasterKeyAndSharedByEveryPool() async throws {
        let database = try await TestDatabase.make()
        let master = MasterKey.generate()
        var configuration = database.configuration(asServiceRole: false, maxConnections: 2)
        configuration.masterKeys = MasterKeyRing(current: master)
        let first = PostgresClient(configuration: configuration)
        let second = PostgresClient(configuration: configuration)
        defer { first.shutdown(); second.shutdown() }
        #expect(throws: (any Error).self, "nothing loaded yet") { try first.loadedReadModelSeal() }
        async let a = first.readModelSeal()
        async let b = second.readModelSeal()
        let (sealA, sealB) = try await (a, b)
        #expect(sealA == sealB, "two pools racing to make the key end up with the one stored")
        #expect(try first.loadedReadModelSeal() == sealA)
        let stored: String = try await first.query("SELECT key FROM hash_keys WHERE name = 'read-models'")[0].decode("key")
        #expect(stored.hasPrefix("tmk1:"), "stored wrapped")
        #expect(try await MasterKeyRotation.check(on: first, ring: MasterKeyRing(current: master)).current == 1)

        // A rotation re-wraps it: the new master key opens the same seal.
        let new = MasterKey.generate()
        _ = try await MasterKeyRotation.rotate(on: first, from: MasterKeyRing(current: master), to: new)
        var rotated = configuration
        rotated.masterKeys = MasterKeyRing(current: new)
        let after = PostgresClient(configuration: rotated)
        defer { after.shutdown() }
        #expect(try await after.readModelSeal() == sealA)
        let stale = PostgresClient(configuration: configuration)
        defer { stale.shutdown() }
        await #expect(throws: (any Error).self, "the old master key no longer opens it") {
            _ = try await ReadModelSeal.load(on: stale)
        }
    }

    @Test func aPendingRebuildKeepsTheSealFromServersButNotFromTheReplay() async throws {
        let database = try await TestDatabase.make()
        let owner = PostgresClient(configuration: database.configuration(asServiceRole: false, maxConnections: 2))
        defer { owner.shutdown() }
        try await owner.query("INSERT INTO read_model_rebuilds (projection, reason) VALUES ('accounts', 'a test')")
        await #expect(throws: RebuildPending.self) { _ = try await owner.readModelSeal() }
        let forReplay = try await ReadModelSeal.load(on: owner, whileRebuildPending: true)
        let outcomes = try await ProjectionReplay.runPendingRebuilds(on: owner)
        #expect(outcomes.map(\.projection) == ["accounts"])
        #expect(try await owner.query(RebuildPending.statement).isEmpty, "the swap took the request with it")
        #expect(try await owner.readModelSeal() == forReplay)
        #expect(try await ProjectionReplay.runPendingRebuilds(on: owner).isEmpty, "nothing left to do")
    }
}
