/// Strict base64url without padding (RFC 7515 §2, RFC 4648 §5).
///
/// Decoding accepts exactly one spelling per byte string: only the URL-safe
/// alphabet, no `=`, no whitespace, no impossible lengths and no non-zero
/// trailing bits, so a token cannot be altered without changing its bytes.
public enum Base64URL: Sendable {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let invalid: UInt8 = 0xFF
    private static let decodingTable: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 256)
        for (index, symbol) in alphabet.enumerated() { table[Int(symbol)] = UInt8(index) }
        return table
    }()

    /// The unpadded base64url text of `bytes`.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        let input = Array(bytes)
        let length = (input.count * 4 + 2) / 3
        return String(unsafeUninitializedCapacity: length) { output in
            alphabet.withUnsafeBufferPointer { symbols in
                var written = 0
                var index = 0
                while index + 3 <= input.count {
                    let chunk = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
                    output[written] = symbols[Int(chunk >> 18 & 0x3F)]
                    output[written + 1] = symbols[Int(chunk >> 12 & 0x3F)]
                    output[written + 2] = symbols[Int(chunk >> 6 & 0x3F)]
                    output[written + 3] = symbols[Int(chunk & 0x3F)]
                    written += 4
                    index += 3
                }
                let remaining = input.count - index
                if remaining > 0 {
                    let chunk = UInt32(input[index]) << 16 | (remaining == 2 ? UInt32(input[index + 1]) << 8 : 0)
                    output[written] = symbols[Int(chunk >> 18 & 0x3F)]
                    output[written + 1] = symbols[Int(chunk >> 12 & 0x3F)]
                    written += 2
                    if remaining == 2 {
                        output[written] = symbols[Int(chunk >> 6 & 0x3F)]
                        written += 1
                    }
                }
                return written
            }
        }
    }

    /// The bytes `text` encodes; throws ``JOSEError/malformed`` on any non-canonical input.
    public static func decode(_ text: some StringProtocol) throws -> [UInt8] {
        let decoded = text.utf8.withContiguousStorageIfAvailable { decode(UnsafeRawBufferPointer($0)) }
            ?? Array(text.utf8).withUnsafeBytes { decode($0) }
        guard let decoded else { throw JOSEError.malformed.with(detail: "invalid base64url") }
        return decoded
    }

    /// The bytes `encoded` spells, or nil when it is not canonical base64url.
    static func decode(_ encoded: UnsafeRawBufferPointer) -> [UInt8]? {
        let remainder = encoded.count % 4
        guard remainder != 1 else { return nil }
        let outputCount = encoded.count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        return decodingTable.withUnsafeBufferPointer { table -> [UInt8]? in
            var isValid = true
            let output = [UInt8](unsafeUninitializedCapacity: outputCount) { output, initialized in
                var accumulator: UInt32 = 0
                var written = 0
                var index = 0
                let fullEnd = encoded.count - remainder
                while index < fullEnd {
                    let a = table[Int(encoded[index])], b = table[Int(encoded[index + 1])]
                    let c = table[Int(encoded[index + 2])], d = table[Int(encoded[index + 3])]
                    // Any invalid symbol (0xFF) sets a high bit in the OR.
                    if (a | b | c | d) & 0xC0 != 0 { isValid = false; break }
                    accumulator = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    output[written] = UInt8(truncatingIfNeeded: accumulator >> 16)
                    output[written + 1] = UInt8(truncatingIfNeeded: accumulator >> 8)
                    output[written + 2] = UInt8(truncatingIfNeeded: accumulator)
                    written += 3
                    index += 4
                }
                if isValid, remainder > 0 {
                    let a = table[Int(encoded[index])], b = table[Int(encoded[index + 1])]
                    let c = remainder == 3 ? table[Int(encoded[index + 2])] : 0
                    if (a | b | c) & 0xC0 != 0 {
                        isValid = false
                    } else if remainder == 2 {
                        // 12 bits carry one byte; the low 4 bits must be zero.
                        isValid = b & 0x0F == 0
                        output[written] = a << 2 | b >> 4
                        written += 1
                    } else {
                        // 18 bits carry two bytes; the low 2 bits must be zero.
                        isValid = c & 0x03 == 0
                        output[written] = a << 2 | b >> 4
                        output[written + 1] = b << 4 | c >> 2
                        written += 2
                    }
                }
                initialized = isValid ? written : 0
            }
            return isValid ? output : nil
        }
    }
}
