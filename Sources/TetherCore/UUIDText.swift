import Foundation

extension UUID {
    /// Parses the 36-character form `8-4-4-4-12` of hex digits in either case, without the `sscanf`
    /// of `UUID(uuidString:)`: reading a page of events parses several ids per event (event, user,
    /// command, correlation), and that cost showed in profiles. It answers as `UUID(uuidString:)`
    /// does, except that it refuses spaces, which `sscanf` lets through before a digit pair, and anything
    /// after the 36th character: `UUID(uuidString:)` reads a C string, so an id followed by a NUL and
    /// more passed as the id. Every id a request or a command line names is read with this.
    public init?(text: some StringProtocol) {
        guard let parsed = text.utf8.withContiguousStorageIfAvailable({ UUID(utf8: $0) })
            ?? Array(text.utf8).withUnsafeBufferPointer({ UUID(utf8: $0) }) else { return nil }
        self = parsed
    }

    /// ``init(text:)`` of the UTF-8 bytes of the text.
    public init?(utf8: UnsafeBufferPointer<UInt8>) {
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        guard withUnsafeMutableBytes(of: &bytes, { UUID.parse(utf8, into: $0) }) else { return nil }
        self.init(uuid: bytes)
    }

    /// A random (version 4) UUID, as `UUID.random()` makes, from one `arc4random_buf` call (one `getrandom`
    /// system call). `UUID.random()` on Linux opens, reads and closes `/dev/urandom` for each id, about eight
    /// times the cost, and a sign-in makes several ids (the command, its events, the session).
    public static func random() -> UUID {
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { buffer in
            arc4random_buf(buffer.baseAddress!, buffer.count)
            buffer[6] = buffer[6] & 0x0f | 0x40 // version 4 (RFC 9562, section 5.4)
            buffer[8] = buffer[8] & 0x3f | 0x80 // the variant of RFC 9562
        }
        return UUID(uuid: bytes)
    }

    /// The 36-character lowercase form, `lowercasedText` without its two passes and formatted
    /// print: ids are written this way into every statement's parameters, stream names and row texts.
    public var lowercasedText: String { text(digits: "0123456789abcdef") }

    /// The 36-character uppercase form `uuidString` gives (and `JSONEncoder` writes), without the
    /// `snprintf` of each byte that `uuidString` runs.
    public var uppercasedText: String { text(digits: "0123456789ABCDEF") }

    /// Whether this id sorts before `other` in the order of their texts (in either case): the order of
    /// their bytes, compared without making either text.
    public func sortsBefore(_ other: UUID) -> Bool {
        withUnsafeBytes(of: uuid) { left in
            withUnsafeBytes(of: other.uuid) { right in left.lexicographicallyPrecedes(right) }
        }
    }

    /// Appends the text of ``lowercasedText`` to `bytes`, with no `String` between.
    public func writeLowercased(to bytes: inout [UInt8]) {
        append(digits: "0123456789abcdef", to: &bytes)
    }

    /// Appends the text of ``uppercasedText`` to `bytes`, with no `String` between.
    public func writeUppercased(to bytes: inout [UInt8]) {
        append(digits: "0123456789ABCDEF", to: &bytes)
    }

    private func append(digits: StaticString, to bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: 36))
        bytes.withUnsafeMutableBufferPointer { write(digits: digits, into: UnsafeMutableBufferPointer(rebasing: $0[start...])) }
    }

    private func text(digits: StaticString) -> String {
        String(unsafeUninitializedCapacity: 36) { output in
            write(digits: digits, into: output)
            return 36
        }
    }

    /// The 36 characters of the text into the start of `output`.
    private func write(digits: StaticString, into output: UnsafeMutableBufferPointer<UInt8>) {
        withUnsafeBytes(of: uuid) { bytes in
            var index = 0
            for (slot, byte) in bytes.enumerated() {
                if slot == 4 || slot == 6 || slot == 8 || slot == 10 {
                    output[index] = UInt8(ascii: "-")
                    index += 1
                }
                output[index] = digits.utf8Start[Int(byte >> 4)]
                output[index + 1] = digits.utf8Start[Int(byte & 0x0f)]
                index += 2
            }
        }
    }

    private static func parse(_ utf8: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableRawBufferPointer) -> Bool {
        guard utf8.count == 36, utf8[8] == UInt8(ascii: "-"), utf8[13] == UInt8(ascii: "-"), utf8[18] == UInt8(ascii: "-"),
              utf8[23] == UInt8(ascii: "-") else { return false }
        // Each digit by table, with no branch: a byte that is no hex digit reads 0xFF, and one is enough to refuse.
        return hexValues.withUnsafeBufferPointer { values in
            var seen: UInt8 = 0
            for slot in 0..<16 {
                let offset = 2 * slot + (slot >= 4 ? 1 : 0) + (slot >= 6 ? 1 : 0) + (slot >= 8 ? 1 : 0) + (slot >= 10 ? 1 : 0)
                let high = values[Int(utf8[offset])]
                let low = values[Int(utf8[offset + 1])]
                seen |= high | low
                output[slot] = high << 4 | low
            }
            return seen < 16
        }
    }

    /// The value of each byte as a hex digit in either case; 0xFF for other bytes.
    private static let hexValues: [UInt8] = (0...255).map { byte -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(byte) - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt8(byte) - UInt8(ascii: "A") + 10
        default: 0xFF
        }
    }
}
