import Foundation
import TetherAPI
import TetherHTTP
import TetherPostgres
import TetherProviders

/// The commands of `tether`; each throws `UsageError` or `CommandFailure` on failure.
enum Commands {
    static func serve(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config"], switchFlags: [], positionals: 0)
        let configuration = try loadConfiguration(options)
        guard let url = configuration.databaseURL else {
            throw CommandFailure("TETHER_DATABASE_URL is not set: tether serve needs a database (tether dev starts its own)")
        }
        guard configuration.masterKey != nil else {
            throw CommandFailure("TETHER_MASTER_KEY_FILE is not set: tether serve wraps every stored key with it (make one: head -c 32 /dev/urandom | base64 > master.key)")
        }
        let logger = Logger(minimumLevel: configuration.logLevel)
        try await requireMasterKeyOpensStoredKeys(url: url, configuration, logger: logger)
        try await requireReadURLCopiesThePrimary(url: url, configuration, logger: logger)
        let service = try TetherService(configuration: configuration, databaseURL: url, logger: logger)
        try await run(service, logger: logger)
    }

    static func dev(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config", "data"], switchFlags: ["no-seeds"], positionals: 0)
        var configuration = try loadConfiguration(options)
        let logger = Logger(minimumLevel: configuration.logLevel)
        guard configuration.listen.isLoopback else {
            throw CommandFailure(
                "TETHER_LISTEN: tether dev binds only to loopback (it serves a development identity provider), got \(configuration.listen)")
        }
        // Its identity provider's key sets and Graph API are named by this address: a port the kernel picks is not known.
        guard configuration.listen.port != 0 else {
            throw CommandFailure("TETHER_LISTEN: tether dev needs a fixed port (its identity provider's URLs name it), got \(configuration.listen)")
        }
        // The Apple key its dev identity provider signs client secrets with is a temporary file: gone with the process.
        defer { try? FileManager.default.removeItem(atPath: DevIdentityProvider.appleTeam.file) }
        var localServer: LocalPostgresServer?
        let url: String
        if let configured = configuration.databaseURL {
            url = configured
        } else {
            let data = URL(fileURLWithPath: options["data"] ?? ".tether/pg")
            let server = try LocalPostgresServer(dataDirectory: data)
            if server.isRunning {
                // Another tether dev's, most likely: used, and left running when this one stops (stopping it
                // would take the database from under the other).
                logger.info("PostgreSQL already runs on this data directory: using it, and leaving it running",
                            [("dataDirectory", server.dataDirectory.path), ("port", String(server.port))])
            } else {
                logger.info("starting PostgreSQL", [("dataDirectory", server.dataDirectory.path), ("port", String(server.port))])
                try server.start()
                localServer = server
            }
            url = server.url(database: "tether")
            try await createDatabaseIfMissing("tether", adminURL: server.url)
            configuration.databaseURL = url
            logger.info("PostgreSQL ready", [("url", url)])
        }
        do {
            let report = try await MigrationRunner(
                directory: try MigrationRunner.locateSchemaDirectory(explicit: configuration.schemaDirectory)
            ).migrate(.init(url: url))
            logger.info("migrations applied", [("applied", String(report.applied.count)), ("alreadyApplied", String(report.alreadyApplied))])
            // The dev identity provider answers on the same loopback server; provider
            // settings point at it unless the environment says otherwise.
            let base = URL(string: "http://\(configuration.listen)/dev-idp")!
            let devIdP = try DevIdentityProvider(keyDirectory: URL(fileURLWithPath: ".tether/dev-idp"))
            var own = configuration.values
            if configuration.masterKey == nil {
                // Development keeps its master key beside its database; `tether serve` is given one.
                let path = developmentMasterKeyFile
                if !FileManager.default.fileExists(atPath: path) {
                    _ = try MasterKey.create(at: path)
                    logger.info("made a master key for development", [("file", path)])
                }
                own["TETHER_MASTER_KEY_FILE"] = path
            }
            let values = DevIdentityProvider.configuration(baseURL: base).merging(own) { _, own in own }
            configuration = try TetherConfiguration(values: values)
            try await requireMasterKeyOpensStoredKeys(url: url, configuration, logger: logger)
            try await requireReadURLCopiesThePrimary(url: url, configuration, logger: logger)
            for outcome in try await runPendingRebuilds(url: url, configuration: configuration) {
                logger.info("read models rebuilt, as a migration asked", [("projection", outcome.projection), ("events", String(outcome.events))])
            }
            var devRoutes = Router()
            devRoutes.mount("/dev-idp", devIdP.routes(baseURL: base))
            let service = try TetherService(
                configuration: configuration, databaseURL: url, logger: logger, extraRoutes: devRoutes, sms: devIdP.smsOutbox,
                mail: configuration.mailWebhookURL == nil ? devIdP.mailOutbox : nil,
                development: true)
            logger.info("dev identity provider", [("url", base.absoluteString)])
            // Seeds go in once the server answers: their tokens are verified against the
            // dev identity provider's key sets and Graph API, over HTTP like any other.
            try await run(service, logger: logger) {
                guard !options.has("no-seeds") else { return }
                try await loadSeeds(service: service, devIdP: devIdP, configuration: configuration, logger: logger)
            }
        } catch {
            try? localServer?.stop()
            throw error
        }
        if let localServer {
            // Another tether dev that joined this cluster (or a psql) still uses it: stopping it would take the
            // database from under them. It is left running, and stays running once they leave too (a tether dev
            // that joined a cluster never stops it): `tether postgres stop` stops it, as the log line says.
            let others = await otherClients(of: localServer)
            if others > 0 {
                logger.info("PostgreSQL left running: other clients still use it", [
                    ("connections", String(others)),
                    ("stop", "tether postgres stop --data \(localServer.dataDirectory.path)"),
                ])
            } else {
                logger.info("stopping PostgreSQL")
                try localServer.stop()
            }
        }
    }

    /// How many client connections other than this process's own the cluster has, once this process's
    /// (closed just before) are gone: their backends exit a moment after the close. 0 when it cannot tell.
    private static func otherClients(of server: LocalPostgresServer) async -> Int {
        let probe = PostgresClient(url: server.url, maxConnections: 1)
        defer { probe.shutdown() }
        var count = 0
        for _ in 0..<20 {
            guard let rows = try? await probe.query("""
                SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
                """), let n: Int = try? rows[0].decode("n")
            else { return 0 }
            count = n
            if count == 0 { return 0 }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return count
    }

    static func migrate(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config"], switchFlags: ["status"], positionals: 0)
        let configuration = try loadConfiguration(options)
        guard let url = configuration.databaseURL else {
            throw CommandFailure("TETHER_DATABASE_URL is not set: tether migrate needs the database to migrate")
        }
        let runner = try MigrationRunner(directory: try MigrationRunner.locateSchemaDirectory(explicit: configuration.schemaDirectory))
        if options.has("status") {
            let client = PostgresClient(url: url, maxConnections: 1)
            defer { client.shutdown() }
            let status = try await runner.status(client)
            for migration in runner.migrations {
                let state = status.pending.contains(migration.fileName) ? "pending"
                    : status.changed.contains(migration.fileName) ? "CHANGED after being applied" : "applied"
                print("\(migration.fileName)  \(state)")
            }
            for version in status.unknown {
                print("version \(version)  applied, but no file (the database is newer than this build)")
            }
            if !status.isCurrent { throw CommandFailure("migrations are not current", status: 1) }
            // Applied migrations may still wait for the rebuild they asked for (one run without the master key):
            // servers answer 503 until it runs, so a deploy that waits on this must not go ahead.
            // (Every file is applied: the table of migration 027 is there.)
            if let pending = try RebuildPending(try await client.query(RebuildPending.statement)) {
                throw CommandFailure("\(pending) with TETHER_MASTER_KEY_FILE set; servers answer 503 until then", status: 1)
            }
            return
        }
        let report = try await runner.migrate(.init(url: url)) { notice in print(notice) }
        for migration in report.applied {
            print("applied \(migration.fileName)")
        }
        print("\(report.applied.count) applied, \(report.alreadyApplied) already applied")
        let outcomes: [ReplayOutcome]
        do {
            outcomes = try await runPendingRebuilds(url: url, configuration: configuration)
        } catch {
            // The migrations stand; the rebuild they asked for waits, and servers answer 503 until it runs.
            throw CommandFailure(
                "the migrations are applied, but the read-model rebuild they ask for did not run: \(sentence(error)); "
                    + "run tether migrate again (with TETHER_MASTER_KEY_FILE set); servers answer 503 until it has run")
        }
        for outcome in outcomes {
            print("rebuilt \(outcome.projection) from \(outcome.events) events, as a migration asked")
        }
    }

    /// Runs the read-model rebuilds migrations asked for (``ProjectionReplay/runPendingRebuilds(on:progress:)``),
    /// as the login role, which owns the tables, with the master keys that open the log.
    static func runPendingRebuilds(url: String, configuration: TetherConfiguration) async throws -> [ReplayOutcome] {
        let database = PostgresClient(configuration: .init(
            url: url, maxConnections: 3, applicationName: "tether migrate", masterKeys: try masterKeys(configuration)))
        defer { database.shutdown() }
        return try await ProjectionReplay.runPendingRebuilds(on: database)
    }

    static func postgres(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["data", "port"], switchFlags: ["throwaway"])
        guard let action = options.positionals.first, options.positionals.count == 1 else {
            throw UsageError("tether postgres needs one action: start or stop")
        }
        guard let data = options["data"], !data.isEmpty else { throw UsageError("tether postgres \(action) needs --data DIR") }
        // stop finds the cluster's port in its directory, and stops it whatever it was started as.
        if action == "stop" { try options.refusingOptions(but: ["data"], of: "tether postgres stop") }
        var port = 0
        if let text = options["port"] {
            guard let value = Int(text), (1...65535).contains(value) else { throw UsageError("--port must be a port number") }
            port = value
        }
        let server = try LocalPostgresServer(
            dataDirectory: URL(fileURLWithPath: data), port: port, isThrowaway: options.has("throwaway"))
        switch action {
        case "start":
            try server.start()
            print(server.url)
        case "stop":
            guard FileManager.default.fileExists(atPath: server.dataDirectory.appendingPathComponent("PG_VERSION").path) else {
                throw CommandFailure("no PostgreSQL cluster at \(data) (no PG_VERSION there): nothing was stopped")
            }
            try server.stop()
        default:
            throw UsageError("unknown action \"\(action)\" (start or stop)")
        }
    }

    static func loadConfiguration(_ options: Arguments) throws -> TetherConfiguration {
        do {
            return try TetherConfiguration.load(configFile: options["config"])
        } catch {
            throw CommandFailure(error.description)
        }
    }

    /// The master keys a command opens stored keys with: `TETHER_MASTER_KEY_FILE`'s. There is no
    /// fallback to `tether dev`'s file: a command run from a checkout against another database must not
    /// wrap that database's keys with the checkout's development key.
    static func masterKeys(_ configuration: TetherConfiguration) throws -> MasterKeyRing? {
        configuration.masterKeys
    }

    /// Refuses a configured master key that does not open what the database already holds: a wrong key file
    /// would otherwise wrap new secrets no other process can open (a webhook's, a service account's), and a
    /// server would answer ready and fail every sign-in. Without a master key, a command `storingSecrets` (a webhook's,
    /// a service account's) refuses a database whose keys are wrapped: it would store them in clear beside those.
    static func requireMasterKeyOpensStoredKeys(
        _ database: PostgresClient, _ configuration: TetherConfiguration, storingSecrets: Bool = false
    ) async throws {
        guard configuration.masterKeys != nil || storingSecrets else { return }
        let report = try await MasterKeyRotation.check(on: database, ring: configuration.masterKeys)
        guard configuration.masterKeys != nil else {
            guard report.unknown == 0 else {
                throw CommandFailure(
                    "TETHER_MASTER_KEY_FILE is not set, but \(report.unknown) stored keys are wrapped by a master key: "
                        + "set it to that key's file; nothing was changed (the secrets this command stores or reads are wrapped by it)")
            }
            return
        }
        guard report.unknown == 0 else {
            throw CommandFailure(
                "TETHER_MASTER_KEY_FILE: \(report.unknown) stored keys are wrapped by a master key this configuration lacks "
                    + "(a wrong key file?); nothing was changed (tether keys check counts them)")
        }
    }

    /// The same check for a server about to start: a database it cannot reach yet, or not migrated yet, is
    /// left to `/readyz` and the server's own retries.
    static func requireMasterKeyOpensStoredKeys(url: String, _ configuration: TetherConfiguration, logger: Logger) async throws {
        let database = PostgresClient(configuration: .init(url: url, maxConnections: 1, applicationName: "tether", masterKeys: configuration.masterKeys))
        defer { database.shutdown() }
        do {
            try await requireMasterKeyOpensStoredKeys(database, configuration)
        } catch let error as PostgresError {
            logger.warn("the master key could not be checked against the stored keys yet", [("error", error.description)])
        }
    }

    /// Refuses a `TETHER_DATABASE_READ_URL` that reaches no copy of the primary's database: another cluster, or
    /// another database of it, would answer support reads, history and the feed with another database's rows.
    /// A standby has its primary's system identifier and database names; the primary itself passes too. A
    /// database that cannot be reached or queried is a warning, naming which, and left to the server's own retries.
    static func requireReadURLCopiesThePrimary(url: String, _ configuration: TetherConfiguration, logger: Logger) async throws {
        guard let readURL = configuration.databaseReadURL else { return }
        func identity(_ url: String) async throws -> (system: String, database: String) {
            let client = PostgresClient(configuration: .init(url: url, maxConnections: 1))
            defer { client.shutdown() }
            let rows = try await client.query("SELECT system_identifier::text AS system, current_database() AS database FROM pg_control_system()")
            return (try rows[0].decode("system"), try rows[0].decode("database"))
        }
        var found: [(system: String, database: String)] = []
        for (name, url) in [("TETHER_DATABASE_URL", url), ("TETHER_DATABASE_READ_URL", readURL)] {
            do {
                found.append(try await identity(url))
            } catch let error as PostgresError {
                logger.warn("TETHER_DATABASE_READ_URL could not be checked against the primary", [("url", name), ("error", error.description)])
                return
            }
        }
        let (primary, standby) = (found[0], found[1])
        guard primary == standby else {
            throw CommandFailure(
                "TETHER_DATABASE_READ_URL reaches database \"\(standby.database)\" of PostgreSQL cluster \(standby.system), not a copy of "
                    + "TETHER_DATABASE_URL's database \"\(primary.database)\" of cluster \(primary.system) (a standby has its primary's "
                    + "system identifier and database names); nothing was started")
        }
    }

    /// Where `tether dev` keeps its master key.
    static let developmentMasterKeyFile = ".tether/master.key"

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully; `started` runs once the server listens.
    private static func run(_ service: TetherService, logger: Logger, started: () async throws -> Void = {}) async throws {
        let signals = ShutdownSignal.listen()
        try service.start()
        do {
            try await started()
        } catch {
            await service.stop()
            throw error
        }
        _ = await signals.wait()
        // A stop takes 45 s at most when every step uses its own bound (20 s for requests in flight,
        // 5 s for each background loop). Past a minute something ignores its bound: the process
        // ends anyway, naming the step, since every command it acknowledged is committed already.
        // The watchdog runs on a dispatch thread, so it fires even if Swift's task threads are stuck.
        let watchdog = DispatchWorkItem {
            logger.error("shutdown did not finish within 60 s; exiting", [("step", service.stoppingStep.withLock { $0 } ?? "none")])
            exit(1)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
        await service.stop()
        watchdog.cancel()
    }

    /// Loads `seeds/` (beside the migrations' `schema/`) through the service's own accounts and providers.
    private static func loadSeeds(
        service: TetherService, devIdP: DevIdentityProvider, configuration: TetherConfiguration, logger: Logger
    ) async throws {
        let directory = Seed.directory(besideSchema: try MigrationRunner.locateSchemaDirectory(explicit: configuration.schemaDirectory))
        guard FileManager.default.fileExists(atPath: directory.path) else {
            logger.warn("no seeds loaded: no seeds/ directory beside schema/", [("directory", directory.path)])
            return
        }
        let outcomes: [SeedLoader.Outcome]
        do {
            outcomes = try await SeedLoader(service: service, devIdP: devIdP).load(directory: directory)
        } catch {
            throw CommandFailure("\(error.description) (tether dev --no-seeds starts without seeds)")
        }
        logger.info("seeds loaded", [
            ("users", outcomes.map(\.seed).joined(separator: ",")),
            ("applied", String(outcomes.reduce(0) { $0 + $1.applied })),
            ("alreadyLoaded", String(outcomes.reduce(0) { $0 + $1.skipped })),
        ])
    }

    private static func createDatabaseIfMissing(_ name: String, adminURL: String) async throws {
        let admin = PostgresClient(url: adminURL, maxConnections: 1)
        defer { admin.shutdown() }
        let exists = try await admin.query("SELECT 1 FROM pg_database WHERE datname = \(name)")
        if exists.isEmpty {
            try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
    }
}
