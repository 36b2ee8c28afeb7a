import Foundation
import Testing
import TetherPostgres

@Suite("Surviving a database restart")
struct DatabaseRestartTests {
    @Test func aRequestAfterTheServerRestartsSucceedsAndTheOneInFlightFailsCleanly() async throws {
        let directory = URL(fileURLWithPath: "/tmp/tether-restart-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try LocalPostgresServer(dataDirectory: directory.appendingPathComponent("pg"), isThrowaway: true)
        try await Task.detached { try server.start() }.value
        let client = PostgresClient(url: server.url, maxConnections: 2)
        defer {
            client.shutdown()
            try? server.stop()
        }
        let before = try await client.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int.self)

        // Restart between two requests: the pooled connection is dead, the next request must not see it.
        try await Task.detached {
            try server.stop()
            try server.start()
        }.value
        let after = try await client.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int.self)
        #expect(after != before)

        // A statement running while the server stops fails with an "unavailable" error, and the next one works.
        let inFlight = Task { try await client.query("SELECT pg_sleep(30)") }
        try await Task.sleep(for: .milliseconds(300))
        try await Task.detached { try server.stop() }.value
        let error = await #expect(throws: PostgresError.self) { try await inFlight.value }
        #expect(error?.isUnavailable == true)
        let whileDown = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
        #expect(whileDown?.isUnavailable == true)
        try await Task.detached { try server.start() }.value
        #expect(try await client.query("SELECT 1 AS one")[0].decode("one", as: Int.self) == 1)
    }
}
