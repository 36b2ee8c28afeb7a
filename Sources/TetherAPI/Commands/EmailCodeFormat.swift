import Foundation
import TetherCore
import TetherCrypto
import TetherJOSE

/// The codes mailed to people: 54 base64url characters of 40 bytes, the user's id (16) followed by
/// 24 random bytes (192 bits). The id tells the command layer whose stream to read; the random part
/// is what proves the code. Only its SHA-256 is kept, sealed in the user's `EmailCodeIssued`.
///
/// The shape matches Firebase's `oobCode` (54 base64url characters), and fits a URL query as is.
public enum EmailCodeFormat {
    /// Characters of a code.
    public static let length = 54

    /// A new code for `userId`, and its hash.
    public static func make(for userId: UUID) -> (code: String, hash: String) {
        let id = userId.uuid
        let idBytes = [id.0, id.1, id.2, id.3, id.4, id.5, id.6, id.7, id.8, id.9, id.10, id.11, id.12, id.13, id.14, id.15]
        let code = Base64URL.encode(idBytes + SecureRandom.bytes(count: 24))
        return (code, hash(code))
    }

    /// The user a code names; nil for text that is not a code of this shape.
    public static func userId(of code: String) -> UUID? {
        guard code.utf8.count == length, let bytes = try? Base64URL.decode(code), bytes.count == 40 else { return nil }
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// What is kept of a code: SHA-256, hex, of a prefix and the code.
    public static func hash(_ code: String) -> String {
        DigestAlgorithm.sha256.hash(Array("tether email code:\(code)".utf8)).hexString
    }

    /// 400 `invalid_request` for text that is not a code at all (a truncated or mangled link).
    static let malformed = AccountError.invalidRequest("code is not a code Tether sent: copy the whole link or code from the mail.")
}
