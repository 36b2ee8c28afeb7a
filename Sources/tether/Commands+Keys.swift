import Foundation
import TetherAPI
import TetherCore
import TetherCrypto
import TetherPostgres

/// `tether keys`: the master key that wraps every user's personal-data key.
extension Commands {
    static func keys(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config", "new"], switchFlags: [])
        // The action and its options are checked before the database is reached: a mistake is a usage error.
        switch options.positionals {
        case ["check"]: try options.refusingOptions(but: [], of: "tether keys check")
        case ["rotate-master"]: try options.refusingOptions(but: ["new"], of: "tether keys rotate-master")
        default: throw UsageError("tether keys takes check, or rotate-master --new FILE")
        }
        let configuration = try loadConfiguration(options)
        guard let url = configuration.databaseURL else { throw CommandFailure("TETHER_DATABASE_URL is not set: tether keys works on the database") }
        let ring = try masterKeys(configuration)
        let database = PostgresClient(configuration: .init(url: url, maxConnections: 1, applicationName: "tether keys", masterKeys: ring))
        defer { database.shutdown() }
        switch options.positionals {
        case ["check"]:
            let report = try await explainingMissingTables { try await MasterKeyRotation.check(on: database, ring: ring) }
            print("""
                \(report.current) wrapped by the current master key, \(report.older) by an older one, \
                \(report.unknown) by an unknown master key, \(report.unwrapped) not wrapped, \(report.destroyed) destroyed (by erasures, or day keys past their 30 days)
                """)
            if report.unknown > 0 {
                // Without a key file every wrapped key is one "this configuration does not have": say which it is.
                throw CommandFailure(ring == nil
                    ? "TETHER_MASTER_KEY_FILE is not set, and \(report.unknown) stored keys are wrapped by a master key: name its file"
                    : "\(report.unknown) stored keys are wrapped by a master key this configuration does not have")
            }
        case ["rotate-master"]:
            guard let path = options["new"] else { throw UsageError("tether keys rotate-master needs --new FILE (make one: head -c 32 /dev/urandom | base64 > FILE)") }
            let new: MasterKey
            do { new = try MasterKey(file: path) } catch { throw CommandFailure("--new \(path): \(sentence(error))") }
            let count = try await explainingMissingTables { try await MasterKeyRotation.rotate(on: database, from: ring, to: new) }
            print("re-wrapped \(count) keys with the master key of \(path)")
            // A server still run with the old key alone wraps the keys of new users with it: the old file may go
            // only once none is left (found by a review: the message said it could go at once).
            print("""
                keep the old key file until every server runs with \(path) first (TETHER_MASTER_KEY_FILE=\(path),OLD) \
                and `tether keys check` with \(path) alone finds no key wrapped by an unknown master key: \
                a server run with the old key alone goes on wrapping new keys with it
                """)
        default:
            throw UsageError("tether keys takes check, or rotate-master --new FILE")
        }
    }
}
