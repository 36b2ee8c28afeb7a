import Foundation

/// One numbered SQL file of `schema/`, such as `001_event_log.sql`.
public struct Migration: Sendable, Hashable {
    /// The number the file name starts with; migrations apply in this order.
    public let version: Int
    /// The file name.
    public let fileName: String
    /// The SQL the file holds.
    public let sql: String

    /// A migration read from `fileName`, applied in `version` order.
    public init(version: Int, fileName: String, sql: String) {
        self.version = version
        self.fileName = fileName
        self.sql = sql
    }
}

/// Why migrations could not be loaded or applied.
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    /// One line saying what is wrong and what to do.
    public let message: String

    init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// What `migrate` did.
public struct MigrationReport: Sendable {
    /// Migrations applied by this run, in order.
    public var applied: [Migration]
    /// How many were already applied before this run.
    public var alreadyApplied: Int
}

/// Whether a database is at the schema the code expects.
public struct MigrationStatus: Sendable, Hashable {
    /// Files not yet applied.
    public var pending: [String]
    /// Applied files whose text has changed since.
    public var changed: [String]
    /// Versions recorded in the database with no file (a newer build migrated it).
    public var unknown: [Int]

    /// True when every file is applied unchanged.
    public var isCurrent: Bool { pending.isEmpty && changed.isEmpty }
}

/// Applies the numbered SQL files of `schema/` in order, each in its own transaction,
/// recorded with a checksum in `schema_migrations`.
///
/// Concurrent runs are serialised by a PostgreSQL advisory lock, so two processes
/// migrating at once apply each file exactly once. A file changed after it was
/// applied is refused: history is fixed by adding a new migration.
public struct MigrationRunner: Sendable {
    /// Advisory lock key: the ASCII of "tether" plus a kind byte.
    static let lockKey: Int64 = 0x7465_7468_6572_0001

    /// The migrations found, in version order.
    public let migrations: [Migration]

    /// Uses the given migrations (tests build their own).
    public init(migrations: [Migration]) throws {
        let sorted = migrations.sorted { $0.version < $1.version }
        for (previous, next) in zip(sorted, sorted.dropFirst()) where previous.version == next.version {
            throw MigrationError("two migrations share number \(next.version): \(previous.fileName) and \(next.fileName)")
        }
        self.migrations = sorted
    }

    /// Loads every `NNN_name.sql` file of `directory`.
    public init(directory: URL) throws {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MigrationError("cannot read the migrations directory \(directory.path): \(error.localizedDescription)")
        }
        var migrations: [Migration] = []
        for name in names where name.hasSuffix(".sql") {
            guard let match = name.wholeMatch(of: /([0-9]+)_[A-Za-z0-9_\-]+\.sql/), let version = Int(match.1) else {
                throw MigrationError("\(directory.path)/\(name) is not named NNN_description.sql")
            }
            let url = directory.appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: url.path) else {
                throw MigrationError("cannot read \(url.path)")
            }
            migrations.append(Migration(version: version, fileName: name, sql: String(decoding: data, as: UTF8.self)))
        }
        guard !migrations.isEmpty else {
            throw MigrationError("no migrations (NNN_name.sql files) in \(directory.path)")
        }
        try self.init(migrations: migrations)
    }

    /// Finds `schema/`: an explicit path, then `TETHER_SCHEMA_DIR`, then the nearest
    /// `schema/` above the working directory or above the executable.
    public static func locateSchemaDirectory(explicit: String? = nil) throws -> URL {
        if let explicit = explicit ?? ProcessInfo.processInfo.environment["TETHER_SCHEMA_DIR"], !explicit.isEmpty {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: explicit, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw MigrationError("TETHER_SCHEMA_DIR: \(explicit) is not a directory (it holds the migrations, NNN_name.sql)")
            }
            return URL(fileURLWithPath: explicit)
        }
        let starts = [
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
            URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent(),
        ]
        for start in starts {
            var directory = start.standardizedFileURL
            for _ in 0..<6 {
                let candidate = directory.appendingPathComponent("schema")
                if FileManager.default.fileExists(atPath: candidate.appendingPathComponent("001_event_log.sql").path) {
                    return candidate
                }
                directory.deleteLastPathComponent()
            }
        }
        throw MigrationError("cannot find the schema/ directory with the migrations; set TETHER_SCHEMA_DIR")
    }

    /// Applies every pending migration through a connection of its own.
    ///
    /// - Parameter waiting: told, once, when pending migrations wait for a running `tether replay` to finish (it
    ///   may run for minutes: an operator is not left looking at a command that says nothing).
    public func migrate(
        _ configuration: PostgresClient.Configuration, waiting: @Sendable (String) -> Void = { _ in }
    ) async throws -> MigrationReport {
        var ownerConfiguration = configuration
        ownerConfiguration.role = nil // migrations run as the login role, which owns the tables
        let connection = try await PostgresConnection.connect(ownerConfiguration)
        return try await connection.around("SELECT pg_advisory_lock(\(Self.lockKey))", "SELECT pg_advisory_unlock(\(Self.lockKey))") {
            try await migrateHoldingLock(connection, waiting: waiting)
        }
    }

    private func migrateHoldingLock(_ connection: PostgresConnection, waiting: @Sendable (String) -> Void) async throws -> MigrationReport {
        try await connection.execute(simple: """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version    integer PRIMARY KEY,
                file_name  text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let status = try await status(on: connection)
        if !status.changed.isEmpty {
            throw MigrationError(
                "\(status.changed.joined(separator: ", ")) changed after it was applied; "
                    + "applied migrations are never edited: restore the file and add a new migration")
        }
        guard !status.pending.isEmpty else { return MigrationReport(applied: [], alreadyApplied: migrations.count) }
        // A replay running now would swap in copies of the tables as they were when it began: a migration of
        // them (029 dropped two foreign keys) would be undone by its swap. Migrations wait for it to finish,
        // and a replay does not start while they are applied.
        let replays = ProjectionReplay.runLockKey
        let held: Bool = try await connection.query("SELECT pg_try_advisory_lock(\(replays)) AS held")[0].decode("held")
        if !held { waiting("a tether replay is running: the pending migrations wait for it to finish") }
        let lock: PostgresQuery = held ? "SELECT 1" : "SELECT pg_advisory_lock(\(replays))"
        return try await connection.around(lock, "SELECT pg_advisory_unlock(\(replays))") {
            try await apply(status.pending, on: connection)
        }
    }

    /// Applies the `pending` migrations in order, each in its own transaction.
    private func apply(_ pending: [String], on connection: PostgresConnection) async throws -> MigrationReport {
        var applied: [Migration] = []
        for migration in migrations where pending.contains(migration.fileName) {
            do {
                try await connection.withTransaction { connection in
                    try await connection.execute(simple: migration.sql)
                    try await connection.query("""
                        INSERT INTO schema_migrations (version, file_name, checksum)
                        VALUES (\(migration.version), \(migration.fileName), encode(sha256(convert_to(\(migration.sql), 'UTF8')), 'hex'))
                        """)
                }
            } catch let error as PostgresError {
                throw MigrationError("migration \(migration.fileName) failed and was rolled back: \(error.description)")
            }
            applied.append(migration)
        }
        return MigrationReport(applied: applied, alreadyApplied: migrations.count - pending.count)
    }

    /// Compares the files with what the database recorded.
    public func status(_ client: PostgresClient) async throws -> MigrationStatus {
        try await client.withConnection { try await status(on: $0) }
    }

    private func status(on connection: PostgresConnection) async throws -> MigrationStatus {
        let exists = try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
        guard try exists[0].decode("present", as: Bool.self) else {
            return MigrationStatus(pending: migrations.map(\.fileName), changed: [], unknown: [])
        }
        var recorded: [Int: String] = [:]
        for row in try await connection.query("SELECT version, checksum FROM schema_migrations") {
            recorded[try row.decode("version")] = try row.decode("checksum", as: String.self)
        }
        var status = MigrationStatus(pending: [], changed: [], unknown: [])
        let checksums = try await checksums(on: connection)
        for migration in migrations {
            guard let stored = recorded.removeValue(forKey: migration.version) else {
                status.pending.append(migration.fileName)
                continue
            }
            if stored != checksums[migration.version] {
                status.changed.append(migration.fileName)
            }
        }
        status.unknown = recorded.keys.sorted()
        return status
    }

    /// SHA-256 of each file, computed by the server (in one query) so this target needs no crypto library.
    private func checksums(on connection: PostgresConnection) async throws -> [Int: String] {
        let rows = try await connection.query("""
            SELECT ordinality AS index, encode(sha256(convert_to(sql, 'UTF8')), 'hex') AS checksum
            FROM unnest(\(PostgresArray(migrations.map(\.sql)))::text[]) WITH ORDINALITY AS files(sql, ordinality)
            """)
        var result: [Int: String] = [:]
        for row in rows {
            result[migrations[try row.decode("index", as: Int.self) - 1].version] = try row.decode("checksum", as: String.self)
        }
        return result
    }
}
