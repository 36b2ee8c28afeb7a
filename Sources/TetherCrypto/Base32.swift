/// Strict RFC 4648 §6 base32, the encoding of TOTP secrets in `otpauth://` URIs.
public enum Base32: Sendable {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
    private static let padding = UInt8(ascii: "=")

    /// Encodes `bytes`; authenticator apps expect no padding, so it is off by default.
    public static func encode(_ bytes: [UInt8], padding isPadded: Bool = false) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 4) / 5 * 8)
        var buffer: UInt64 = 0
        var bitCount = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt64(byte)
            bitCount += 8
            while bitCount >= 5 {
                bitCount -= 5
                output.append(alphabet[Int(buffer >> UInt64(bitCount) & 0x1F)])
            }
        }
        if bitCount > 0 {
            output.append(alphabet[Int(buffer << UInt64(5 - bitCount) & 0x1F)])
        }
        if isPadded {
            while output.count % 8 != 0 { output.append(padding) }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes `text`, refusing lowercase, whitespace, wrong or partial padding,
    /// impossible lengths and non-zero trailing bits, so every byte string has
    /// exactly one accepted spelling (with or without padding).
    public static func decode(_ text: String) throws -> [UInt8] {
        var symbols = Array(text.utf8)
        let padded = symbols.count
        while symbols.last == padding { symbols.removeLast() }
        let paddingCount = padded - symbols.count
        // Characters in the last 8-character group, and the padding that completes it.
        let expectedPadding = [0: 0, 2: 6, 4: 4, 5: 3, 7: 1]
        guard let needed = expectedPadding[symbols.count % 8],
              paddingCount == 0 || paddingCount == needed else {
            throw CryptoError.invalidEncoding.with(detail: "base32 length or padding")
        }
        var output: [UInt8] = []
        output.reserveCapacity(symbols.count * 5 / 8)
        var buffer: UInt64 = 0
        var bitCount = 0
        for symbol in symbols {
            let value: UInt8
            switch symbol {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = symbol - UInt8(ascii: "A")
            case UInt8(ascii: "2")...UInt8(ascii: "7"): value = symbol - UInt8(ascii: "2") + 26
            default: throw CryptoError.invalidEncoding.with(detail: "base32 character")
            }
            buffer = buffer << 5 | UInt64(value)
            bitCount += 5
            if bitCount >= 8 {
                bitCount -= 8
                output.append(UInt8(truncatingIfNeeded: buffer >> UInt64(bitCount)))
            }
        }
        guard buffer & ((1 << UInt64(bitCount)) - 1) == 0 else {
            throw CryptoError.invalidEncoding.with(detail: "base32 trailing bits")
        }
        return output
    }
}
