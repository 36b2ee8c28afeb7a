import Foundation
import TetherCrypto

/// Keys of their own for keyed hashes and the read models' seal (`hash_keys`, `021_hash_keys.sql`): 32
/// random bytes a name, stored as base64 wrapped with the master key, made on first use.
public enum HashKeys {
    /// What the row `name` is bound to when wrapped.
    public static func wrappingContext(_ name: String) -> String { "hash_keys:" + name }

    /// The key stored as `name`. Read first, so a read replica's pool reads it and never tries to make
    /// it; made when missing (whoever inserts first wins, and everyone reads what was stored).
    public static func key(_ name: String, on client: PostgresClient) async throws -> [UInt8] {
        let masterKeys = client.configuration.masterKeys
        let read: PostgresQuery = "SELECT key FROM hash_keys WHERE name = \(name)"
        var rows = try await client.query(read)
        if rows.isEmpty {
            let made = try masterKeys.wrapText(Data(SecureRandom.bytes(count: 32)).base64EncodedString(), context: wrappingContext(name))
            rows = try await client.withConnection { connection in
                try await connection.run { job in
                    try job.pipeline(["INSERT INTO hash_keys (name, key) VALUES (\(name), \(made)) ON CONFLICT (name) DO NOTHING", read])
                }
            }[1]
        }
        let stored: String = try rows[0].decode("key")
        guard let bytes = Data(base64Encoded: try masterKeys.unwrapText(stored, context: wrappingContext(name))), bytes.count == 32 else {
            throw CryptoError.invalidInput.with(detail: "the stored key \(name) is not 32 bytes in base64")
        }
        return Array(bytes)
    }
}
