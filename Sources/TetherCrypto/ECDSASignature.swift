/// Conversion between the raw `r‖s` form JWS uses (RFC 7518 §3.4) and the
/// DER `ECDSA-Sig-Value` that OpenSSL produces and consumes.
enum ECDSASignature {
    /// The DER form of a raw signature whose halves are `scalarByteCount` long, or nil on a wrong length.
    static func der(fromRaw raw: UnsafeRawBufferPointer, scalarByteCount: Int = 32) -> [UInt8]? {
        guard raw.count == 2 * scalarByteCount else { return nil }
        let r = integer(UnsafeRawBufferPointer(rebasing: raw[..<scalarByteCount]))
        let s = integer(UnsafeRawBufferPointer(rebasing: raw[scalarByteCount...]))
        // Both integers are at most 33 bytes, so every length fits the short form.
        return [0x30, UInt8(r.count + s.count)] + r + s
    }

    /// The raw form of a strict DER signature, each half left-padded to `scalarByteCount`.
    static func raw(fromDER der: [UInt8], scalarByteCount: Int = 32) -> [UInt8]? {
        guard der.count >= 8, der[0] == 0x30, Int(der[1]) == der.count - 2, der[1] < 0x80 else { return nil }
        var index = 2
        var output: [UInt8] = []
        output.reserveCapacity(2 * scalarByteCount)
        for _ in 0..<2 {
            guard index + 2 <= der.count, der[index] == 0x02 else { return nil }
            let length = Int(der[index + 1])
            index += 2
            guard length >= 1, length < 0x80, index + length <= der.count else { return nil }
            var value = der[index..<(index + length)]
            index += length
            guard value.first! & 0x80 == 0 else { return nil }
            if value.count > 1, value.first == 0 {
                guard value[value.startIndex + 1] & 0x80 != 0 else { return nil }
                value = value.dropFirst()
            }
            guard value.count <= scalarByteCount else { return nil }
            output += repeatElement(0, count: scalarByteCount - value.count)
            output += value
        }
        return index == der.count ? output : nil
    }

    /// A DER INTEGER holding the unsigned big-endian `magnitude`.
    private static func integer(_ magnitude: UnsafeRawBufferPointer) -> [UInt8] {
        var digits = Array(magnitude.drop { $0 == 0 })
        if digits.isEmpty { digits = [0] }
        let needsSignByte = digits.first! & 0x80 != 0
        return [0x02, UInt8(digits.count + (needsSignByte ? 1 : 0))] + (needsSignByte ? [0] : []) + digits
    }
}
