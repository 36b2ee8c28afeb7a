import Foundation
import TetherPostgres

/// A throwaway PostgreSQL database of its own for one test, on the test cluster.
///
/// `make test` starts a private cluster and exports `TETHER_TEST_DATABASE_URL`
/// (a superuser URL). Without it, the first test starts a cluster under
/// `.tether/test-pg` itself, so `swift test` works alone too. Migrated databases
/// are cloned from a template built once per schema version, which takes a few
/// milliseconds instead of a migration run per test. `TETHER_TEST_POOLER_URL` sends the tests'
/// connections through a connection pooler (`scripts/test.sh` runs the API suites once more that way).
public struct TestDatabase: Sendable {
    /// The database's name.
    public let name: String
    /// A superuser URL for this database.
    public let url: String

    /// Creates a fresh database; with `migrated` it has every migration of `schema/` applied.
    public static func make(migrated: Bool = true) async throws -> TestDatabase {
        let cluster = try await TestCluster.shared.adminURL()
        let name = "tether_test_" + UUID.random().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let admin = PostgresClient(url: cluster, maxConnections: 1)
        defer { admin.shutdown() }
        if migrated {
            let template = try await TestCluster.shared.template()
            try await createDatabase(name, template: template, admin: admin)
        } else {
            try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        // With `TETHER_TEST_POOLER_URL` (a PgBouncer in front of the cluster), the database is reached through
        // it; creating and dropping databases still goes straight to the cluster.
        let pooler = ProcessInfo.processInfo.environment["TETHER_TEST_POOLER_URL"].flatMap { $0.isEmpty ? nil : $0 }
        return TestDatabase(name: name, url: try TestCluster.replacingDatabase(in: pooler ?? cluster, with: name))
    }

    /// A pool on this database; by default it acts as the service role, like the server.
    public func client(asServiceRole: Bool = true, maxConnections: Int = 8) -> PostgresClient {
        PostgresClient(configuration: configuration(asServiceRole: asServiceRole, maxConnections: maxConnections))
    }

    /// The pool configuration for this database.
    public func configuration(asServiceRole: Bool = true, maxConnections: Int = 8) -> PostgresClient.Configuration {
        // Suites run in parallel on two cores: a pool may wait long for a connection without anything being wrong.
        PostgresClient.Configuration(
            url: url, maxConnections: maxConnections, acquireTimeout: .seconds(60), role: asServiceRole ? "tether_service" : nil)
    }

    /// Drops the database (connections to it are terminated).
    public func drop() async throws {
        let admin = PostgresClient(url: try await TestCluster.shared.adminURL(), maxConnections: 1)
        defer { admin.shutdown() }
        try await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
    }

    private static func createDatabase(_ name: String, template: String, admin: PostgresClient) async throws {
        // CREATE DATABASE … TEMPLATE fails while another session copies the same template; retry briefly.
        for attempt in 1...20 {
            do {
                try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name) TEMPLATE \(template)"))
                return
            } catch let error as PostgresError where error.sqlState == "55006" && attempt < 20 {
                try await Task.sleep(for: .milliseconds(50 * attempt))
            }
        }
    }
}

/// The cluster tests run against, and the migrated template database.
actor TestCluster {
    static let shared = TestCluster()

    private var url: String?
    private var templateName: String?

    func adminURL() throws -> String {
        if let url { return url }
        if let configured = ProcessInfo.processInfo.environment["TETHER_TEST_DATABASE_URL"], !configured.isEmpty {
            url = configured
            return configured
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let server = try LocalPostgresServer(
            dataDirectory: root.appendingPathComponent(".tether/test-pg"), isThrowaway: true)
        try server.start()
        url = server.url
        return server.url
    }

    /// The name of a template database migrated to the current `schema/` files.
    func template() async throws -> String {
        if let templateName { return templateName }
        let runner = try MigrationRunner(directory: try MigrationRunner.locateSchemaDirectory())
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 // FNV-1a over every migration
        for migration in runner.migrations {
            for byte in Array(migration.fileName.utf8) + Array(migration.sql.utf8) {
                hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
            }
        }
        let name = "tether_template_" + String(hash, radix: 16)
        let admin = PostgresClient(url: try adminURL(), maxConnections: 1)
        defer { admin.shutdown() }
        try await admin.withConnection { connection in
            // Several test processes may build the template at once: one does, the others wait.
            try await connection.query("SELECT pg_advisory_lock(7001)")
            do {
                let exists = try await connection.query("SELECT 1 FROM pg_database WHERE datname = \(name)")
                if exists.isEmpty {
                    let building = name + "_building"
                    try await connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(building) WITH (FORCE)"))
                    try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(building)"))
                    let buildingURL = try Self.replacingDatabase(in: try adminURL(), with: building)
                    _ = try await runner.migrate(PostgresClient.Configuration(url: buildingURL, maxConnections: 1))
                    try await connection.query(PostgresQuery(unsafeSQL: "ALTER DATABASE \(building) RENAME TO \(name)"))
                }
                try await connection.query("SELECT pg_advisory_unlock(7001)")
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(7001)")
                throw error
            }
        }
        templateName = name
        return name
    }

    /// The same URL with another database name.
    static func replacingDatabase(in url: String, with database: String) throws -> String {
        guard var components = URLComponents(string: url), components.scheme?.hasPrefix("postgres") == true else {
            throw LocalPostgresError("TETHER_TEST_DATABASE_URL must be a postgresql:// URL, got \(url)")
        }
        components.path = "/" + database
        return components.string!
    }
}
