import Foundation
import TetherCrypto
import TetherJOSE

/// The Standard Webhooks signature (standardwebhooks.com): headers `webhook-id`, `webhook-timestamp`
/// (Unix seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, keyed
/// with the base64 part of a `whsec_` secret; during a rotation both secrets sign, space-separated.
public enum WebhookSignature {
    /// A new signing secret: `whsec_` and 32 random bytes in base64.
    public static func newSecret() -> String {
        "whsec_" + Data(SecureRandom.bytes(count: 32)).base64EncodedString()
    }

    /// Whether `text` is a secret of this shape.
    public static func isSecret(_ text: String) -> Bool {
        key(of: text) != nil
    }

    /// The HMAC key of a `whsec_` secret.
    static func key(of secret: String) -> [UInt8]? {
        guard secret.hasPrefix("whsec_"), let key = Data(base64Encoded: String(secret.dropFirst(6))), key.count >= 24 else { return nil }
        return Array(key)
    }

    /// The `webhook-signature` value for `body` with each of `secrets`.
    public static func header(id: String, timestamp: Int, body: [UInt8], secrets: [String]) -> String {
        let signed = Array("\(id).\(timestamp).".utf8) + body
        return secrets.compactMap(key(of:)).map { key in
            "v1," + Data(HMAC.authenticationCode(for: signed, key: key, digest: .sha256)).base64EncodedString()
        }.joined(separator: " ")
    }

    /// The three headers of a delivery.
    public static func headers(id: String, timestamp: Int, body: [UInt8], secrets: [String]) -> [String: String] {
        [
            "webhook-id": id, "webhook-timestamp": String(timestamp),
            "webhook-signature": header(id: id, timestamp: timestamp, body: body, secrets: secrets),
        ]
    }
}
