import Foundation
import Testing
@testable import TetherPostgres
import TetherCore
import TetherCrypto
import TetherTesting

@Suite("Master key: wrapping the stored personal-data keys, and rotating it")
struct MasterKeyTests {
    @Test func aWrappedKeyOpensOnlyWithItsMasterKeyAndForItsRow() throws {
        let master = MasterKey.generate()
        let ring = MasterKeyRing(current: master)
        let secret = SecureRandom.bytes(count: 32)
        let wrapped = try ring.wrap(secret, context: "personal_data_keys:a")
        #expect(MasterKeyRing.isWrapped(wrapped))
        #expect(MasterKeyRing.masterKeyID(of: wrapped) == master.id)
        #expect(try ring.unwrap(wrapped, context: "personal_data_keys:a") == secret)
        #expect(throws: (any Error).self, "moved to another row") { try ring.unwrap(wrapped, context: "personal_data_keys:b") }
        #expect(throws: (any Error).self, "another master key") { try MasterKeyRing(current: .generate()).unwrap(wrapped, context: "personal_data_keys:a") }
        let none: MasterKeyRing? = nil
        #expect(throws: (any Error).self, "no master key at all") { try none.unwrap(wrapped, context: "personal_data_keys:a") }
        #expect(try none.unwrap(secret, context: "personal_data_keys:a") == secret, "a key from before wrapping reads as it is")
        let rotating = MasterKeyRing(current: .generate(), others: [master])
        #expect(try rotating.unwrap(wrapped, context: "personal_data_keys:a") == secret, "an older key still unwraps")
    }

    @Test func aKeyFileIsBase64OfThirtyTwoBytesAndIsNotOverwritten() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tether-master-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let made = try MasterKey.create(at: path)
        #expect(try MasterKey(file: path) == made)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        #expect(throws: (any Error).self) { try MasterKey.create(at: path) }
        try Data("not a key".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: (any Error).self) { try MasterKey(file: path) }
    }

    @Test func aRotationThatFailsHalfwayChangesNothingAndOneThatCommitsRewrapsEveryKey() async throws {
        let database = try await TestDatabase.make()
        let old = MasterKeyRing(current: .generate())
        var configuration = database.configuration(asServiceRole: false, maxConnections: 2)
        configuration.masterKeys = old
        let client = PostgresClient(configuration: configuration)
        defer { client.shutdown() }
        let store = PostgresEventStore(client: client)
        var users: [UUID] = []
        for index in 0..<1_200 {
            let user = UUID()
            users.append(user)
            let data = Data(#"{"personal":{"email":"user\#(index)@example.com"}}"#.utf8)
            _ = try await store.append([NewEvent(type: "Noted", data: data, userId: user)], to: .user(user), expected: .noStream, metadata: EventMetadata())
        }
        // One user from before wrapping.
        let legacy = UUID()
        try await client.query("INSERT INTO personal_data_keys (user_id, key) VALUES (\(legacy), \(SecureRandom.bytes(count: 32)))")
        var report = try await MasterKeyRotation.check(on: client, ring: old)
        #expect(report.current == 1_200 && report.unwrapped == 1 && report.unknown == 0)

        let new = MasterKey.generate()
        struct Crash: Error {}
        await #expect(throws: Crash.self) {
            _ = try await MasterKeyRotation.rotate(on: client, from: old, to: new) { throw Crash() }
        }
        report = try await MasterKeyRotation.check(on: client, ring: old)
        #expect(report.current == 1_200 && report.unwrapped == 1, "nothing is half-wrapped")
        #expect(try await store.readStream(.user(users[0]), after: 0).first.map { String(decoding: $0.data, as: UTF8.self) }?
            .contains("user0@example.com") == true, "the old key still opens everything")

        #expect(try await MasterKeyRotation.rotate(on: client, from: old, to: new) == 1_201)
        report = try await MasterKeyRotation.check(on: client, ring: MasterKeyRing(current: new))
        #expect(report.current == 1_201 && report.unwrapped == 0 && report.unknown == 0)
        #expect(try await MasterKeyRotation.check(on: client, ring: old).unknown == 1_201, "the old key opens nothing now")
        var rotated = configuration
        rotated.masterKeys = MasterKeyRing(current: new)
        let after = PostgresClient(configuration: rotated)
        defer { after.shutdown() }
        let event = try #require(try await PostgresEventStore(client: after).readStream(.user(users[1_199]), after: 0).first)
        #expect(String(decoding: event.data, as: UTF8.self).contains("user1199@example.com"))
        await #expect(throws: (any Error).self, "the old ring reads nothing") {
            _ = try await store.readStream(.user(users[1_199]), after: 0)
        }
    }
}
