/// HMAC-based one-time passwords (RFC 4226).
public enum HOTP: Sendable {
    /// The `digits`-long code (6…8) for `counter`, zero-padded.
    public static func code(secret: [UInt8], counter: UInt64, digits: Int = 6, algorithm: DigestAlgorithm = .sha1) -> String {
        precondition((6...8).contains(digits), "HOTP codes have 6 to 8 digits")
        let message = withUnsafeBytes(of: counter.bigEndian) { Array($0) }
        let mac = HMAC.authenticationCode(for: message, key: secret, digest: algorithm)
        // Dynamic truncation, RFC 4226 §5.3.
        let offset = Int(mac[mac.count - 1] & 0x0F)
        let binary = UInt32(mac[offset] & 0x7F) << 24 | UInt32(mac[offset + 1]) << 16
            | UInt32(mac[offset + 2]) << 8 | UInt32(mac[offset + 3])
        var modulus: UInt32 = 1
        for _ in 0..<digits { modulus *= 10 }
        let value = String(binary % modulus)
        return String(repeating: "0", count: digits - value.count) + value
    }
}
