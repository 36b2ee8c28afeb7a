import Foundation
import TetherAPI
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres

/// `tether history`, `tether admin-keys` and `tether sweep`: the support tools that work on the database directly.
extension Commands {
    static func history(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config", "since"], switchFlags: ["json"])
        guard options.positionals.count == 1, let text = options.positionals.first else {
            throw UsageError("tether history needs one USER, EMAIL or PROVIDER:UID")
        }
        let reference = try usage { try UserReference(parsing: text) }
        let since = try options["since"].map { value in try usage { try HistorySince.parse(value) } }
        try await withDatabase(options, for: "tether history") { database in
            let directory = AdminUserDirectory(database: database)
            let userId = try await reference.resolve(in: directory)
            let page = try await UserHistory(database: database).all(of: userId, since: since)
            guard try await directory.knows(userId) else {
                throw CommandFailure("no user has the \(reference), and no event of theirs names it")
            }
            if options.has("json") {
                print(try jsonText(page.json))
            } else {
                print(HistoryTable.render(page), terminator: "")
            }
        }
    }

    /// `tether export USER`: everything held about one person, as JSON on standard output; recorded as
    /// `UserDataExported` in the `operator` stream, naming the user, so their history shows it.
    static func export(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config"], switchFlags: [])
        guard options.positionals.count == 1, let text = options.positionals.first else {
            throw UsageError("tether export needs one USER, EMAIL or PROVIDER:UID")
        }
        let reference = try usage { try UserReference(parsing: text) }
        try await withDatabase(options, for: "tether export") { database in
            let userId = try await reference.resolve(in: AdminUserDirectory(database: database))
            guard let document = try await UserExport(database: database).document(userId) else {
                throw CommandFailure("no user has the \(reference), and no event of theirs names it")
            }
            let record = NewEvent(type: "UserDataExported", data: Data(#"{"by":"operator"}"#.utf8), userId: userId)
            try await PostgresEventStore(client: database).appendAtEnd([record], to: StreamName("operator"), metadata: operatorMetadata())
            print(try jsonText(document))
        }
    }

    static func adminKeys(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config", "role", "name"], switchFlags: ["json"])
        guard let action = options.positionals.first else {
            throw UsageError("tether admin-keys needs an action: create, list or revoke")
        }
        let taken: [String: Set<String>] = ["create": ["role", "name"], "list": ["json"]]
        if ["create", "list", "revoke"].contains(action) {
            try options.refusingOptions(but: taken[action] ?? [], of: "tether admin-keys \(action)")
        }
        switch action {
        case "create":
            guard options.positionals.count == 1 else { throw UsageError("tether admin-keys create takes no arguments besides its options") }
            guard let roleName = options["role"] else { throw UsageError("tether admin-keys create needs --role support or --role admin") }
            guard let role = AdminRole(rawValue: roleName) else { throw UsageError("--role is support or admin, not \"\(roleName)\"") }
            do { _ = try AdminKeyStore.checkedName(options["name"]) } catch { throw UsageError("--name: \(error.description)") }
            try await withDatabase(options, for: "tether admin-keys") { database in
                let store = AdminKeyStore(database: database)
                let (key, secret) = try await store.create(role: role, name: options["name"], metadata: operatorMetadata())
                print("created admin key \(key.id.lowercasedText) (role \(key.role.rawValue)\(key.name.map { ", name \"\($0)\"" } ?? ""))")
                print("store it now: it is shown this once, and Tether keeps only its SHA-256")
                print(secret)
                try await requireShown("admin key \(key.id.lowercasedText)", undoneBy: "revoked") {
                    _ = try await store.revoke(key.id, metadata: operatorMetadata())
                }
            }
        case "list":
            guard options.positionals.count == 1 else { throw UsageError("tether admin-keys list takes no arguments besides its options") }
            try await withDatabase(options, for: "tether admin-keys") { database in
                let keys = try await AdminKeyStore(database: database).list()
                if options.has("json") {
                    print(try jsonText(JSONValue.array(keys.map(\.json))))
                } else {
                    print(AdminKeyTable.render(keys), terminator: "")
                }
            }
        case "revoke":
            guard options.positionals.count == 2 else { throw UsageError("tether admin-keys revoke needs one key id") }
            guard let id = UUID(text: options.positionals[1]) else {
                throw UsageError("\"\(options.positionals[1])\" is not an admin key id: tether admin-keys list shows them")
            }
            try await withDatabase(options, for: "tether admin-keys") { database in
                let (key, wasRevoked) = try await AdminKeyStore(database: database).revoke(id, metadata: operatorMetadata())
                let revokedAt = key.revokedAt.map(ISO8601Milliseconds.format) ?? "?"
                print(wasRevoked
                      ? "revoked admin key \(id.lowercasedText); it stops working at once"
                      : "admin key \(id.lowercasedText) was already revoked at \(revokedAt)")
            }
        default:
            throw UsageError("unknown action \"\(action)\" (create, list or revoke)")
        }
    }

    static func firebase(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config"], switchFlags: [])
        guard options.positionals.first == "service-account", options.positionals.count >= 2 else {
            throw UsageError("tether firebase takes: service-account create, list or revoke KEY_ID")
        }
        let action = options.positionals[1]
        let configuration = try loadConfiguration(options)
        switch (action, options.positionals.count) {
        case ("create", 2):
            guard let projectID = configuration.firebaseProjectID else {
                throw CommandFailure("TETHER_FIREBASE_PROJECT_ID is not set: a service account belongs to the Firebase project Tether serves")
            }
            try await withDatabase(options, for: "tether firebase", storingSecrets: true) { database in
                let accounts = FirebaseServiceAccounts(database: database)
                let (email, keyID, json) = try await accounts.create(projectID: projectID)
                FileHandle.standardError.write(Data("""
                    created service account \(email); its private key is in the JSON below, shown this once (only the public key is kept)

                    """.utf8))
                print(json)
                try await requireShown("service account \(email)", undoneBy: "revoked") { _ = try await accounts.revoke(keyId: keyID) }
            }
        case ("list", 2):
            try await withDatabase(options, for: "tether firebase") { database in
                let accounts = try await FirebaseServiceAccounts(database: database).list()
                print("KEY ID                                    CLIENT EMAIL                                         CREATED                   REVOKED")
                for account in accounts {
                    let email = account.clientEmail.padding(toLength: max(52, account.clientEmail.count), withPad: " ", startingAt: 0)
                    print("\(account.keyId)  \(email) \(ISO8601Milliseconds.format(account.createdAt))  \(account.revokedAt.map(ISO8601Milliseconds.format) ?? "-")")
                }
            }
        case ("revoke", 3):
            let keyId = options.positionals[2]
            try await withDatabase(options, for: "tether firebase") { database in
                do {
                    let wasLive = try await FirebaseServiceAccounts(database: database).revoke(keyId: keyId)
                    print(wasLive ? "revoked service account \(keyId); tokens it signs are refused from now on"
                                  : "service account \(keyId) was already revoked")
                } catch let error as AccountError {
                    throw CommandFailure(error.detail)
                }
            }
        default:
            throw UsageError("tether firebase service-account takes create, list, or revoke KEY_ID")
        }
    }

    static func sweep(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config", "inactive-for"], switchFlags: ["dry-run"])
        guard options.positionals == ["anonymous"] else {
            throw UsageError("tether sweep takes what to sweep: anonymous")
        }
        guard let text = options["inactive-for"] else { throw UsageError("tether sweep anonymous needs --inactive-for, like 30d") }
        guard let span = HistorySince.seconds(inSpan: text), span >= 3600 else {
            throw UsageError("--inactive-for takes a span of at least an hour and at most 100 years (90m, 24h, 30d), not \"\(text)\"")
        }
        let configuration = try loadConfiguration(options)
        try await withDatabase(options, for: "tether sweep") { database in
            let accounts = AccountService(database: database, emailPolicy: configuration.emailPolicy)
            let cutoff = Date().addingTimeInterval(-span)
            if options.has("dry-run") {
                let count = try await accounts.inactiveAnonymousUsers(since: cutoff, limit: 1_000_000).count
                print("would erase \(count) anonymous user\(count == 1 ? "" : "s") unused since \(ISO8601Milliseconds.format(cutoff))")
                return
            }
            let erased = try await accounts.sweepAnonymousUsers(inactiveFor: span, metadata: operatorMetadata())
            print("erased \(erased) anonymous user\(erased == 1 ? "" : "s") unused since \(ISO8601Milliseconds.format(cutoff))")
        }
    }

    /// Runs `body` with a pool on TETHER_DATABASE_URL, and turns a missing table into advice. A command `storingSecrets`
    /// needs the master key of a database whose keys are wrapped.
    static func withDatabase(
        _ options: Arguments, for command: String, storingSecrets: Bool = false, _ body: (PostgresClient) async throws -> Void
    ) async throws {
        let configuration = try loadConfiguration(options)
        guard let url = configuration.databaseURL else {
            throw CommandFailure("TETHER_DATABASE_URL is not set: \(command) reads the database")
        }
        let database = PostgresClient(configuration: .init(url: url, maxConnections: 2, masterKeys: try masterKeys(configuration)))
        defer { database.shutdown() }
        try await explainingMissingTables {
            try await requireMasterKeyOpensStoredKeys(database, configuration, storingSecrets: storingSecrets)
            try await body(database)
        }
    }

    /// Runs `body`; a table it needs that the database lacks (not migrated) is said as such, with what to do.
    static func explainingMissingTables<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresError where error.sqlState == "42P01" {
            throw CommandFailure("the database lacks a table this command needs (\(error.message)); run tether migrate")
        }
    }

    /// What a command's failure says on standard error: its words, without the machine code (`invalid_input: …`)
    /// some errors carry for logs and API answers.
    static func sentence(_ error: any Error) -> String {
        if let error = error as? CryptoError, !error.detail.isEmpty { return error.detail }
        return String(describing: error)
    }

    /// Who acts at the command line, recorded on the events a command writes.
    private static func operatorMetadata() -> EventMetadata {
        let environment = ProcessInfo.processInfo.environment
        return EventMetadata(
            commandId: UUID.random(), actor: .operator(environment["SUDO_USER"] ?? environment["USER"] ?? environment["LOGNAME"]),
            surface: "cli")
    }

    /// An input mistake found by a library parser, as a usage error (exit status 2).
    private static func usage<T>(_ parse: () throws -> T) throws -> T {
        do {
            return try parse()
        } catch let error as AdminError {
            throw UsageError(error.description)
        }
    }

    static func jsonText(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
