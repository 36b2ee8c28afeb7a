/// The conservative syntax Tether accepts for `kid` values in headers and key sets.
enum KeyID {
    /// Longer identifiers are a sign of abuse (they end up in logs and cache keys).
    static let maximumLength = 256

    /// Whether `kid` is 1…256 printable ASCII characters without quotes or backslash.
    static func isAcceptable(_ kid: String) -> Bool {
        var count = 0
        for byte in kid.utf8 {
            count += 1
            guard count <= maximumLength, (0x20...0x7E).contains(byte),
                  byte != UInt8(ascii: "\""), byte != UInt8(ascii: "'"), byte != UInt8(ascii: "\\") else { return false }
        }
        return count > 0
    }
}
