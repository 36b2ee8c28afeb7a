import Foundation
import TetherCore
import TetherCrypto
import TetherPostgres

/// Hashes of recovery codes: HMAC-SHA256 under a key of its own (`hash_keys`, wrapped with the master
/// key, made on first use), so the hashes the log keeps cannot be searched offline for the 50 bits a
/// code has. Codes issued before keyed hashes keep their unkeyed SHA-256 and are still accepted until
/// they are used or replaced.
final class RecoveryCodeHasher: Sendable {
    static let keyName = "recovery-codes"
    private let key = LoadedHashKey(keyName)

    /// The stored form of a new code: `k1:` and the HMAC in hex.
    func hash(_ code: String, on database: PostgresClient) async throws -> String {
        "k1:" + HMAC.authenticationCode(for: Array(Self.normalized(code).utf8), key: try await key.bytes(on: database), digest: .sha256).hexString
    }

    /// What a presented code may be stored as: keyed, then unkeyed (codes from before keys).
    func candidates(_ code: String, on database: PostgresClient) async throws -> [String] {
        [try await hash(code, on: database), Self.unkeyed(code)]
    }

    /// The unkeyed hash of codes issued before keyed hashes.
    static func unkeyed(_ code: String) -> String {
        DigestAlgorithm.sha256.hash(Array(normalized(code).utf8)).hexString
    }

    /// Recovery codes are compared without case or separators.
    private static func normalized(_ code: String) -> String {
        "recovery:" + code.lowercased().filter { $0.isLetter || $0.isNumber }
    }
}
