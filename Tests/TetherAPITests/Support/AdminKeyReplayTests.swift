import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres

@Suite("Admin keys are a read model tether replay rebuilds")
struct AdminKeyReplayTests {
    @Test func adminKeysRebuildFromTheirStreamsAndDriftIsFound() async throws {
        try await SupportHarness.run { harness in
            let support = try await harness.adminKey(.support)
            let admin = try await harness.adminKey(.admin)
            _ = try await AdminKeyStore(database: harness.owner).revoke(
                support.key.id, metadata: EventMetadata(actor: .operator("tester"), surface: "cli"))
            // Request events in the same streams change nothing in admin_keys.
            #expect(try await harness.adminGet("/v1/admin/users?q=ada", key: admin.secret).status == 200)

            func rows() async throws -> [String] {
                try await harness.owner.query("SELECT k::text AS row FROM admin_keys k ORDER BY id").map { try $0.decode("row") }
            }
            let live = try await rows()
            #expect(live.count == 2)
            let replay = ProjectionReplay(projection: .adminKeys, database: harness.owner)
            #expect(try await replay.run(.verify).drift.isEmpty)

            try await harness.owner.query("UPDATE admin_keys SET revoked_at = NULL WHERE id = \(support.key.id)")
            #expect(try await replay.run(.verify).drift.count == 1, "a key un-revoked by hand is drift")
            _ = try await replay.run(.replace)
            #expect(try await rows() == live, "the replay restores the revocation from the log")
            #expect(try await harness.adminGet("/v1/admin/users?q=ada", key: support.secret).status == 401)
        }
    }
}
