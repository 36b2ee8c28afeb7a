import Foundation
import TetherCrypto

extension CommandContext {
    /// The command id for a request: derived from its `Idempotency-Key` within `scope`
    /// (caller, method and route), so a retry names the same command; random without a key.
    static func commandID(idempotencyKey: String?, scope: String) -> UUID {
        guard let key = idempotencyKey, !key.isEmpty else { return UUID() }
        let digest = DigestAlgorithm.sha256.hash(Array("\(scope) \(key)".utf8))
        return UUID(uuid: (digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], digest[6], digest[7],
                           digest[8], digest[9], digest[10], digest[11], digest[12], digest[13], digest[14], digest[15]))
    }
}
