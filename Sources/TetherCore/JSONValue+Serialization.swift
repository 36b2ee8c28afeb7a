/// Writing JSON text without `JSONEncoder`: its generic machinery costs more than the
/// value itself on hot paths (a history page of 500 events, a token's claims).
public enum JSONText {
    /// Appends `text` as it is: JSON that a writer knows whole, such as `,"name":`.
    @inlinable
    public static func writeVerbatim(_ text: StaticString, to output: inout [UInt8]) {
        output.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Writes `value` as a JSON string, escaping only what RFC 8259 requires (`"`, `\` and
    /// the controls below U+0020; `/` and everything else as it is). `JSONEncoder` with
    /// `.withoutEscapingSlashes` writes the same bytes, and JWK thumbprint input stays
    /// canonical (RFC 7638 §3.3).
    public static func writeString(_ value: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var text = value
        text.withUTF8 { bytes in
            // Runs of bytes that need no escape are copied whole.
            var runStart = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): output += [UInt8(ascii: "\\"), byte]
                case 0x08: output += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
                case 0x0C: output += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
                case 0x0A: output += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                case 0x0D: output += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
                case 0x09: output += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
                default:
                    output += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
                }
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        output.append(UInt8(ascii: "\""))
    }

    /// Writes a finite number in Swift's shortest round-tripping form, without the `.0` of whole
    /// numbers (as `JSONEncoder` writes).
    ///
    /// - Throws: ``JSONWritingError`` for a non-finite number, as `JSONEncoder` throws.
    public static func writeNumber<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F, to output: inout [UInt8]) throws(JSONWritingError) {
        guard value.isFinite else { throw JSONWritingError() }
        let text = value.description
        output += (text.hasSuffix(".0") ? text.dropLast(2) : Substring(text)).utf8
    }

    private static let hex = Array("0123456789abcdef".utf8)
}

/// A ``JSONValue`` that JSON cannot represent: a non-finite double.
public struct JSONWritingError: Error, CustomStringConvertible {
    public let description = "JSON has no form for a non-finite number"
}

extension JSONValue {
    /// Compact JSON text with object members in UTF-8 order of their names: byte for byte what
    /// `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` writes for the same value
    /// (swift-foundation's, on Linux).
    ///
    /// - Throws: ``JSONWritingError`` for a non-finite double, as `JSONEncoder` throws.
    public func jsonBytes() throws(JSONWritingError) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        try writeJSON(to: &output)
        return output
    }

    /// Appends the text of ``jsonBytes()`` to `output`.
    public func writeJSON(to output: inout [UInt8]) throws(JSONWritingError) {
        switch self {
        case .null: output += [UInt8(ascii: "n"), UInt8(ascii: "u"), UInt8(ascii: "l"), UInt8(ascii: "l")]
        case .bool(let value): output += (value ? "true" : "false").utf8
        case .int(let value): output += String(value).utf8
        case .double(let value): try JSONText.writeNumber(value, to: &output)
        case .string(let value): JSONText.writeString(value, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                if offset > 0 { output.append(UInt8(ascii: ",")) }
                try element.writeJSON(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            try JSONText.writeObject(
                members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { ($0.key, $0.value) }, to: &output)
        }
    }
}

extension JSONText {
    /// Writes an object of `members` as given: in UTF-8 order of their names, that is the text of
    /// ``JSONValue/jsonBytes()`` for the same object, without building its dictionary first.
    public static func writeObject(_ members: [(name: String, value: JSONValue)], to output: inout [UInt8]) throws(JSONWritingError) {
        output.append(UInt8(ascii: "{"))
        for (offset, member) in members.enumerated() {
            if offset > 0 { output.append(UInt8(ascii: ",")) }
            writeString(member.name, to: &output)
            output.append(UInt8(ascii: ":"))
            try member.value.writeJSON(to: &output)
        }
        output.append(UInt8(ascii: "}"))
    }
}
