import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherPostgres
import TetherTesting

@Suite("The master key on a running service: dumps, checks, serve's refusal")
struct MasterKeyServiceTests {
    private func keyFile() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tether-master-\(UUID().uuidString).key").path
        _ = try MasterKey.create(at: path)
        return path
    }

    @Test func aDumpWithoutTheKeyFileHoldsNoUsableKeyAndTheLogStaysSealed() async throws {
        let path = try keyFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await DevService.run(settings: ["TETHER_MASTER_KEY_FILE": path]) { service in
            let signedUp = try await service.client.post(
                "/v1/sign-up", json: ["email": "dora@example.com", "password": "a long password", "displayName": "Dora Explorer"])
            #expect(signedUp.status == 201)
            let user = try signedUp.decodeJSON(SignedIn.self).user.id
            let stored: [UInt8] = try #require(try await service.admin.query(
                "SELECT key FROM personal_data_keys WHERE user_id = \(user)::uuid")[0].decode("key", as: [UInt8]?.self))
            #expect(MasterKeyRing.isWrapped(stored), "the key is stored wrapped")
            let key = try MasterKeyRing(current: try MasterKey(file: path)).unwrap(stored, context: PersonalDataVault.wrappingContext(UUID(uuidString: user)!))
            #expect(try await service.me(try signedUp.decodeJSON(SignedIn.self).session.accessToken).bodyText.contains("dora@example.com"),
                    "the service reads her data")

            let text = try service.dump()
            #expect(text.contains("personal_data_keys"))
            #expect(!text.contains(key.hexString), "the dump holds the wrapped key only")
            // What the log says is sealed, and its key wrapped. (The read models still hold addresses and names in
            // clear for lookups: the master key does not cover them yet.)
            let events = try await service.admin.query("SELECT count(*)::int AS n FROM events WHERE data::text LIKE '%Dora%'")[0].decode("n", as: Int.self)
            #expect(events == 0)
            await #expect(throws: (any Error).self, "without the master key the log's personal data cannot be opened") {
                _ = try await PostgresEventStore(client: service.admin).readUser(UUID(uuidString: user)!)
            }

            // The other stored secrets are wrapped too: the access-token signing key, a webhook's secret.
            let pem: String = try await service.admin.query("SELECT private_key_pem FROM signing_keys LIMIT 1")[0].decode("private_key_pem")
            #expect(pem.hasPrefix("tmk1:") && !pem.contains("PRIVATE KEY"))
            var ringed = service.database.configuration(asServiceRole: false, maxConnections: 1)
            ringed.masterKeys = MasterKeyRing(current: try MasterKey(file: path))
            let owner = PostgresClient(configuration: ringed)
            defer { owner.shutdown() }
            let (hook, secret) = try await WebhookStore(database: owner, policy: WebhookTargetPolicy(allowsHTTP: false, allowedHosts: []))
                .create(url: "https://93.184.215.14/hook", eventTypes: ["*"])
            let storedSecret: String = try await service.admin.query("SELECT secret FROM webhook_subscriptions")[0].decode("secret")
            #expect(storedSecret.hasPrefix("tmk1:") && !storedSecret.contains(secret.dropFirst(6)))

            let check = try await TetherCommandLine.run(["keys", "check"], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": path])
            #expect(check.status == 0, "\(check.stderr)")
            #expect(check.stdout.hasPrefix("1 wrapped by the current master key"), "\(check.stdout)")
            let other = try keyFile()
            defer { try? FileManager.default.removeItem(atPath: other) }
            let unknown = try await TetherCommandLine.run(["keys", "check"], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": other])
            #expect(unknown.status != 0)
            #expect(unknown.stderr.contains("master key this configuration does not have"))
            let rotated = try await TetherCommandLine.run(
                ["keys", "rotate-master", "--new", other], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": path])
            #expect(rotated.status == 0, "\(rotated.stderr)")
            let afterRotation = try await TetherCommandLine.run(["keys", "check"], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": other])
            #expect(afterRotation.stdout.hasPrefix("1 wrapped by the current master key"), "\(afterRotation.stdout)")
            var rotatedConfiguration = ringed
            rotatedConfiguration.masterKeys = MasterKeyRing(current: try MasterKey(file: other))
            let rotatedOwner = PostgresClient(configuration: rotatedConfiguration)
            defer { rotatedOwner.shutdown() }
            let reread = try await WebhookStore(database: rotatedOwner, policy: WebhookTargetPolicy(allowsHTTP: false, allowedHosts: [])).subscription(hook.id)
            #expect(reread?.signingSecrets(at: Date()) == [secret], "the webhook secret was re-wrapped with the new key")
        }
    }

    @Test func serveRefusesToStartWithoutAMasterKey() async throws {
        let database = try await TestDatabase.make()
        let run = try await TetherCommandLine.run(["serve"], databaseURL: database.url)
        #expect(run.status != 0)
        #expect(run.stderr.contains("TETHER_MASTER_KEY_FILE"))
        #expect(run.stderr.dropLast().contains("\n") == false, "one line")
    }
}
