import Synchronization
import TetherPostgres

/// A key of the database's `hash_keys` (``HashKeys``: wrapped with the master key, made on first use), loaded
/// on first use and kept for the life of the process.
final class LoadedHashKey: Sendable {
    /// Its row's name in `hash_keys`.
    let name: String
    private let key = Mutex<[UInt8]?>(nil)

    init(_ name: String) { self.name = name }

    /// The key, read from `database` the first time.
    func bytes(on database: PostgresClient) async throws -> [UInt8] {
        if let known = key.withLock({ $0 }) { return known }
        let loaded = try await HashKeys.key(name, on: database)
        key.withLock { $0 = loaded }
        return loaded
    }
}
