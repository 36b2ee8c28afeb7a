import TetherCrypto
import TetherJOSE

/// Opaque refresh tokens: `rt_` followed by 256 random bits in base64url; only their SHA-256 is stored.
///
/// The prefix lets secret scanners and logs recognise a leaked token; the
/// format is fixed (46 characters, canonical base64url), so anything else is
/// refused before a database lookup.
public enum RefreshTokens: Sendable {
    /// What every refresh token starts with.
    public static let prefix = "rt_"
    /// The random part: 32 bytes.
    static let secretByteCount = 32
    /// `rt_` plus 43 base64url characters.
    public static let length = prefix.utf8.count + 43

    /// A new token from the system's secure random generator.
    public static func generate() -> String {
        prefix + Base64URL.encode(SecureRandom.bytes(count: secretByteCount))
    }

    /// The storage form of `token`: SHA-256 of its UTF-8, lowercase hex (64 characters).
    public static func hash(_ token: String) -> String {
        let digest = DigestAlgorithm.sha256.hash(Array(token.utf8))
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: digest.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
    }

    /// The storage hash to look a presented token up by, or `invalid_token` when it is not a refresh token at all.
    public static func lookupHash(of presented: String) throws(TokenError) -> String {
        guard isWellFormed(presented) else { throw TokenError.invalidToken.with(detail: "The refresh token is malformed.") }
        return hash(presented)
    }

    /// Whether `presented` hashes to `storedHash`, compared in constant time.
    public static func matches(_ presented: String, storedHash: String) -> Bool {
        ConstantTime.isEqual(Array(storedHash.utf8), Array(hash(presented).utf8))
    }

    /// Whether `token` has the exact shape `generate()` produces.
    ///
    /// Only the length (which is public) may end the check early: every
    /// character of the secret is inspected the same way, without branching on
    /// its value, so timing reveals nothing about which character was wrong.
    public static func isWellFormed(_ token: String) -> Bool {
        let bytes = Array(token.utf8)
        guard bytes.count == length else { return false }
        var isValid: UInt8 = 1
        for (offset, expected) in prefix.utf8.enumerated() {
            isValid &= bytes[offset] == expected ? 1 : 0
        }
        let secret = bytes[prefix.utf8.count...]
        for byte in secret {
            isValid &= isBase64URLSymbol(byte)
        }
        // 43 characters carry 258 bits for 256: the last character's two low bits must be zero (canonical form).
        isValid &= sextet(secret.last!) & 0x03 == 0 ? 1 : 0
        return isValid == 1
    }

    /// 1 when `byte` is in the base64url alphabet, else 0, computed with masks rather than branches.
    private static func isBase64URLSymbol(_ byte: UInt8) -> UInt8 {
        inRange(byte, 0x41, 0x5A) | inRange(byte, 0x61, 0x7A) | inRange(byte, 0x30, 0x39)
            | equal(byte, 0x2D) | equal(byte, 0x5F)
    }

    /// The 6-bit value of a base64url symbol (garbage for other bytes, which are refused anyway).
    private static func sextet(_ byte: UInt8) -> UInt8 {
        let upper = inRange(byte, 0x41, 0x5A) &* (byte &- 0x41)
        let lower = inRange(byte, 0x61, 0x7A) &* (byte &- 0x61 &+ 26)
        let digit = inRange(byte, 0x30, 0x39) &* (byte &- 0x30 &+ 52)
        return upper | lower | digit | equal(byte, 0x2D) &* 62 | equal(byte, 0x5F) &* 63
    }

    private static func inRange(_ byte: UInt8, _ low: UInt8, _ high: UInt8) -> UInt8 {
        // Both differences are non-negative exactly when low <= byte <= high; the sign bit of each says so.
        let value = Int16(byte)
        return UInt8(truncatingIfNeeded: ~((value - Int16(low)) | (Int16(high) - value)) >> 15) & 1
    }

    private static func equal(_ byte: UInt8, _ expected: UInt8) -> UInt8 {
        inRange(byte, expected, expected)
    }
}
