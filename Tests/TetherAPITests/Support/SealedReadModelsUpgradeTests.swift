import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherPostgres
import TetherTesting

/// A database from before the read models were sealed (`027_sealed_read_models.sql`) holds emails, names
/// and uids in clear, which sealed lookups do not find: it is rebuilt from the log before serving again.
@Suite("Upgrading to sealed read models: the rebuild a migration asks for")
struct SealedReadModelsUpgradeTests {
    @Test func readModelsInClearAreRebuiltSealedByMigrateAndNothingServesThemBefore() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tether-master-\(UUID().uuidString).key").path
        _ = try MasterKey.create(at: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await DevService.run(settings: ["TETHER_MASTER_KEY_FILE": path]) { service in
            let uma = try await service.signedIn(try await service.apple("apple-uma-1", email: "uma@example.com", extra: [:]))
            let signedUp = try await service.client.post(
                "/v1/sign-up", json: ["email": "Ulla@Example.com", "password": "a long password", "displayName": "Ulla Upgrade"])
            #expect(signedUp.status == 201)

            // The read models as a build before 027 left them: values in clear, no search words; and the
            // request 027 makes on a database with users.
            try await service.admin.query("""
                UPDATE users SET email = 'Ulla@Example.com', email_normalized = 'ulla@example.com', display_name = 'Ulla Upgrade',
                                 email_terms = NULL, name_terms = NULL
                WHERE id = \(UUID(uuidString: try signedUp.decodeJSON(SignedIn.self).user.id)!)
                """)
            try await service.admin.query("""
                UPDATE identities SET provider_uid = 'apple-uma-1', email = 'uma@example.com', search_terms = NULL WHERE provider = 'apple'
                """)
            try await service.admin.query("""
                INSERT INTO read_model_rebuilds (projection, reason) VALUES ('accounts', '027: personal data in the read models is sealed')
                """)

            // Nothing serves them: readiness says why, and a server's pool will not seal lookups against them.
            let waiting = try await service.client.get("/readyz")
            #expect(waiting.status == 503)
            #expect(waiting.bodyText.contains("wait for the rebuild a migration asked for (run tether migrate)"), "\(waiting.bodyText)")
            let starting = PostgresClient(configuration: service.database.configuration(asServiceRole: true, maxConnections: 1))
            defer { starting.shutdown() }
            await #expect(throws: RebuildPending.self) { _ = try await starting.readModelSeal() }

            let migrate = try await TetherCommandLine.run(["migrate"], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": path])
            #expect(migrate.status == 0, "\(migrate.stderr)")
            #expect(migrate.stdout.contains("rebuilt accounts from "), "\(migrate.stdout)")
            #expect(try await service.client.get("/readyz").status == 200)
            let again = try await TetherCommandLine.run(["migrate"], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": path])
            #expect(again.status == 0 && !again.stdout.contains("rebuilt"), "done once: \(again.stdout)")

            // Sealed now, and found again: Uma signs in as herself, support finds Ulla by a word of her name.
            for row in try await service.admin.query("SELECT email, display_name FROM users WHERE email IS NOT NULL") {
                #expect(try row.decode("email", as: String.self).hasPrefix("rm1:"))
            }
            let uid: String = try await service.admin.query("SELECT provider_uid FROM identities WHERE provider = 'apple'")[0].decode("provider_uid")
            #expect(uid.hasPrefix("rm1:"))
            let returning = try await service.signedIn(try await service.apple("apple-uma-1", email: "uma@example.com", extra: [:]))
            #expect(returning.user.id == uma.user.id, "the same user, not a new one")
            let support = try await service.adminKey(.support)
            let found = try await service.adminGet("/v1/admin/users?q=upgrade", key: support.secret)
            #expect(found.status == 200)
            #expect(found.bodyText.contains("Ulla@Example.com"), "\(found.bodyText)")
            var ringed = service.database.configuration(asServiceRole: false, maxConnections: 3)
            ringed.masterKeys = MasterKeyRing(current: try MasterKey(file: path))
            let owner = PostgresClient(configuration: ringed)
            defer { owner.shutdown() }
            #expect(try await ProjectionReplay(projection: .accounts, database: owner).run(.verify).drift.isEmpty)
        }
    }
}
