import Foundation
import Synchronization
import Testing
@testable import TetherPostgres
import TetherTesting

@Suite("Migrations against a real server")
struct MigrationRunnerTests {
    private func runner(_ files: [(String, String)]) throws -> MigrationRunner {
        try MigrationRunner(migrations: files.map { name, sql in
            Migration(version: Int(name.prefix(3))!, fileName: name, sql: sql)
        })
    }

    private func appliedVersions(_ database: TestDatabase) async throws -> [Int] {
        let client = database.client(asServiceRole: false, maxConnections: 1)
        defer { client.shutdown() }
        return try await client.query("SELECT version FROM schema_migrations ORDER BY version").map { try $0.decode("version") }
    }

    @Test func theRealMigrationsApplyOnceAndReRunningIsANoOp() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let runner = try MigrationRunner(directory: try MigrationRunner.locateSchemaDirectory())
        let first = try await runner.migrate(database.configuration())
        #expect(first.applied.map(\.version) == runner.migrations.map(\.version))
        let second = try await runner.migrate(database.configuration())
        #expect(second.applied.isEmpty)
        #expect(second.alreadyApplied == runner.migrations.count)
        let client = database.client()
        defer { client.shutdown() }
        #expect(try await runner.status(client).isCurrent)
    }

    /// A schema directory that is not one was reported as an unreadable directory, without the setting's name.
    @Test func aSchemaDirectoryThatIsNoneNamesItsSetting() throws {
        for path in ["/nonexistent-tether-schema", "/etc/hostname"] {
            let error = #expect(throws: MigrationError.self) { try MigrationRunner.locateSchemaDirectory(explicit: path) }
            #expect(error?.message == "TETHER_SCHEMA_DIR: \(path) is not a directory (it holds the migrations, NNN_name.sql)")
        }
    }

    @Test func aChangedAppliedMigrationIsRefused() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let original = try runner([("001_notes.sql", "CREATE TABLE notes (body text);")])
        _ = try await original.migrate(database.configuration())
        let edited = try runner([("001_notes.sql", "CREATE TABLE notes (body text, extra int);")])
        let error = await #expect(throws: MigrationError.self) { try await edited.migrate(database.configuration()) }
        #expect(error?.message.contains("001_notes.sql changed after it was applied") == true)
        let client = database.client(asServiceRole: false)
        defer { client.shutdown() }
        let status = try await edited.status(client)
        #expect(status.changed == ["001_notes.sql"])
        #expect(!status.isCurrent)
    }

    @Test func aFailingMigrationIsRolledBackAndNotRecorded() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let migrations = try runner([
            ("001_notes.sql", "CREATE TABLE notes (body text);"),
            ("002_broken.sql", "CREATE TABLE half (id int); SELECT no_such_function();"),
        ])
        let error = await #expect(throws: MigrationError.self) { try await migrations.migrate(database.configuration()) }
        #expect(error?.message.contains("002_broken.sql failed and was rolled back") == true)
        #expect(try await appliedVersions(database) == [1])
        let client = database.client(asServiceRole: false)
        defer { client.shutdown() }
        let half = try await client.query("SELECT to_regclass('half') IS NULL AS missing")
        #expect(try half[0].decode("missing", as: Bool.self))
        #expect(try await migrations.status(client).pending == ["002_broken.sql"])
    }

    @Test func concurrentMigrateRunsApplyEachFileOnce() async throws {
        let database = try await TestDatabase.make(migrated: false)
        // Not idempotent on purpose: applying any file twice would fail.
        let migrations = try runner([
            ("001_a.sql", "CREATE TABLE a (id int); SELECT pg_sleep(0.2);"),
            ("002_b.sql", "CREATE TABLE b (id int);"),
            ("003_c.sql", "CREATE TABLE c (id int);"),
        ])
        let reports = try await withThrowingTaskGroup(of: MigrationReport.self) { group in
            for _ in 0..<2 {
                group.addTask { try await migrations.migrate(database.configuration()) }
            }
            var reports: [MigrationReport] = []
            for try await report in group { reports.append(report) }
            return reports
        }
        #expect(reports.map(\.applied.count).sorted() == [0, 3])
        #expect(try await appliedVersions(database) == [1, 2, 3])
    }

    /// A replay swaps in copies of the tables made when it began: a migration applied meanwhile would be undone.
    @Test func pendingMigrationsWaitForARunningReplay() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let migrations = try runner([("001_a.sql", "CREATE TABLE a (id int);")])
        let client = database.client(asServiceRole: false, maxConnections: 2)
        defer { client.shutdown() }
        func waiting() async throws -> Int {
            // This test's database only: the suites beside it wait for advisory locks of their own (a user's, the gate).
            try await client.query("""
                SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """)[0].decode("n")
        }
        try await client.withConnection { replay in
            try await replay.query("SELECT pg_advisory_lock(\(ProjectionReplay.runLockKey))")
            let notices = Mutex<[String]>([])
            let migrating = Task { try await migrations.migrate(database.configuration()) { notice in notices.withLock { $0.append(notice) } } }
            let deadline = ContinuousClock.now + .seconds(30)
            while try await waiting() == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(try await waiting() == 1, "migrate waits for the replay's lock")
            #expect(notices.withLock { $0 } == ["a tether replay is running: the pending migrations wait for it to finish"], "and says so")
            #expect(try await appliedVersions(database) == [])
            try await replay.query("SELECT pg_advisory_unlock(\(ProjectionReplay.runLockKey))")
            #expect(try await migrating.value.applied.map(\.version) == [1])
        }
        #expect(try await appliedVersions(database) == [1])
        // With nothing pending, migrate does not wait for a replay.
        try await client.withConnection { replay in
            try await replay.query("SELECT pg_advisory_lock(\(ProjectionReplay.runLockKey))")
            #expect(try await migrations.migrate(database.configuration()) { notice in Issue.record("no wait to tell: \(notice)") }.applied.isEmpty)
            try await replay.query("SELECT pg_advisory_unlock(\(ProjectionReplay.runLockKey))")
        }
    }

    @Test func badlyNamedOrDuplicateFilesAreRefused() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-migrations-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "SELECT 1;".write(to: directory.appendingPathComponent("001_one.sql"), atomically: true, encoding: .utf8)
        try "SELECT 1;".write(to: directory.appendingPathComponent("001_again.sql"), atomically: true, encoding: .utf8)
        #expect(throws: MigrationError.self) { try MigrationRunner(directory: directory) }
        try FileManager.default.removeItem(at: directory.appendingPathComponent("001_again.sql"))
        try "SELECT 1;".write(to: directory.appendingPathComponent("two.sql"), atomically: true, encoding: .utf8)
        #expect(throws: MigrationError.self) { try MigrationRunner(directory: directory) }
    }
}
