import Foundation
import TetherPostgres

/// A primary of Debian's PostgreSQL with Tether's schema in database `tether`, and a streaming hot
/// standby of it: synchronous (commits wait for it) or asynchronous. For the failover and
/// read-replica suites; ``stop()`` stops both and removes their files.
final class ReplicatedPostgres: @unchecked Sendable {
    let base: URL
    let primary: LocalPostgresServer
    let standby: LocalPostgresServer

    static func start(_ name: String, synchronous: Bool) async throws -> ReplicatedPostgres {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("tether-\(name)-\(UUID().uuidString.prefix(8))")
        let primary = try await startWithSchema(
            at: base.appendingPathComponent("primary"), settings: ["synchronous_commit=on", "wal_level=replica", "max_wal_senders=4"])
        do {
            let standby = try primary.makeStandby(at: base.appendingPathComponent("standby"), name: "standby")
            let replicated = ReplicatedPostgres(base: base, primary: primary, standby: standby)
            try standby.start()
            if synchronous { try await replicated.waitUntilSynchronous() }
            return replicated
        } catch {
            try? primary.stop()
            try? FileManager.default.removeItem(at: base)
            throw error
        }
    }

    /// A started cluster in `directory` with Tether's schema in database `tether` (stopped again if that fails).
    static func startWithSchema(at directory: URL, settings: [String] = []) async throws -> LocalPostgresServer {
        var server = try LocalPostgresServer(dataDirectory: directory)
        server.extraSettings = settings
        try server.start()
        do {
            let setup = PostgresClient(url: server.url, maxConnections: 1)
            try await setup.query("CREATE DATABASE tether")
            setup.shutdown()
            _ = try await MigrationRunner(directory: try MigrationRunner.locateSchemaDirectory())
                .migrate(PostgresClient.Configuration(url: server.url(database: "tether"), maxConnections: 1))
            return server
        } catch {
            try? server.stop()
            throw error
        }
    }

    private init(base: URL, primary: LocalPostgresServer, standby: LocalPostgresServer) {
        self.base = base
        self.primary = primary
        self.standby = standby
    }

    /// Makes commits wait for the standby, and returns once it streams synchronously.
    private func waitUntilSynchronous() async throws {
        let admin = PostgresClient(url: primary.url, maxConnections: 1)
        defer { admin.shutdown() }
        try await admin.query("ALTER SYSTEM SET synchronous_standby_names = 'standby'")
        try await admin.query("SELECT pg_reload_conf()")
        for _ in 0..<200 {
            if !(try await admin.query("SELECT 1 FROM pg_stat_replication WHERE application_name = 'standby' AND sync_state = 'sync'")).isEmpty {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw HarnessError("the standby did not replicate synchronously within 10 s")
    }

    /// The URL of database `tether` on `server`.
    func url(of server: LocalPostgresServer) -> String { "postgresql://postgres@127.0.0.1:\(server.port)/tether" }

    func stop() {
        try? standby.stop()
        try? primary.stop()
        try? FileManager.default.removeItem(at: base)
    }
}
