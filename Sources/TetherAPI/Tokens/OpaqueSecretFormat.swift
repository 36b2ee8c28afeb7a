import TetherCrypto
import TetherJOSE

/// Secrets handed out once and stored only as their SHA-256: a fixed prefix, then
/// 256 random bits in base64url (43 characters).
///
/// The prefix lets secret scanners and logs recognise a leaked secret; the
/// format is fixed, so anything else is refused before a database lookup.
public struct OpaqueSecretFormat: Sendable {
    /// What every secret of this format starts with (`rt_`, `tadm_`).
    public let prefix: String
    /// The random part: 32 bytes.
    static let secretByteCount = 32

    public init(prefix: String) {
        self.prefix = prefix
    }

    /// The prefix plus 43 base64url characters.
    public var length: Int { prefix.utf8.count + 43 }

    /// A new secret from the system's secure random generator.
    public func generate() -> String {
        prefix + Base64URL.encode(SecureRandom.bytes(count: Self.secretByteCount))
    }

    /// The storage form of `secret`: SHA-256 of its UTF-8, lowercase hex (64 characters).
    public func hash(_ secret: String) -> String {
        DigestAlgorithm.sha256.hash(Array(secret.utf8)).hexString
    }

    /// Whether `presented` hashes to `storedHash`, compared in constant time.
    public func matches(_ presented: String, storedHash: String) -> Bool {
        ConstantTime.isEqual(Array(storedHash.utf8), Array(hash(presented).utf8))
    }

    /// Whether `secret` has the exact shape ``generate()`` produces.
    ///
    /// Only the length (which is public) may end the check early: every
    /// character of the secret is inspected the same way, without branching on
    /// its value, so timing reveals nothing about which character was wrong.
    public func isWellFormed(_ secret: String) -> Bool {
        let bytes = Array(secret.utf8)
        guard bytes.count == length else { return false }
        var isValid: UInt8 = 1
        for (offset, expected) in prefix.utf8.enumerated() {
            isValid &= bytes[offset] == expected ? 1 : 0
        }
        let random = bytes[prefix.utf8.count...]
        for byte in random {
            isValid &= Self.isBase64URLSymbol(byte)
        }
        // 43 characters carry 258 bits for 256: the last character's two low bits must be zero (canonical form).
        isValid &= Self.sextet(random.last!) & 0x03 == 0 ? 1 : 0
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
