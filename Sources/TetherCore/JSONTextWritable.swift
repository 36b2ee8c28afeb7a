import Foundation

/// A value that writes its own JSON text: compact, its members in UTF-8 order of their names, the
/// bytes ``JSONValue/jsonBytes()`` writes for the same value. For answers written on every request,
/// such as a sign-in's, where an `Encoder` would build a tree of members and sort it each time.
public protocol JSONTextWritable {
    /// Appends the value's JSON text to `output`.
    func writeJSON(to output: inout [UInt8])
}

extension JSONTextWritable {
    /// The value's JSON text.
    public var jsonText: [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(512)
        writeJSON(to: &output)
        return output
    }

    /// The value the text holds, for a caller that puts it into a larger ``JSONValue``.
    public var jsonValue: JSONValue {
        get throws { try CompactJSONDecoder().decode(JSONValue.self, from: jsonText) }
    }
}

extension JSONTextWritable where Self: Encodable {
    /// Encodes the value of the written text: for a type that is also a member of larger `Encodable`
    /// answers, so that ``writeJSON(to:)`` stays its one description.
    public func encodeWrittenJSON(to encoder: any Encoder) throws {
        try jsonValue.encode(to: encoder)
    }
}

extension JSONText {
    /// Writes `value` as a JSON string, or `null` for nil.
    public static func writeString(_ value: String?, to output: inout [UInt8]) {
        if let value { writeString(value, to: &output) } else { writeVerbatim("null", to: &output) }
    }

    /// Writes `true` or `false`.
    public static func writeBool(_ value: Bool, to output: inout [UInt8]) {
        if value { writeVerbatim("true", to: &output) } else { writeVerbatim("false", to: &output) }
    }

    /// Writes an integer in decimal.
    public static func writeInteger(_ value: Int, to output: inout [UInt8]) {
        output += String(value).utf8
    }

    /// Writes an object member's name: `{"name":` for the object's first member (`isFirst`, which it
    /// clears), `,"name":` for a later one. For objects whose optional members are left out when absent;
    /// ``writeObjectEnd(isEmpty:to:)`` closes them.
    public static func writeMemberName(_ name: StaticString, isFirst: inout Bool, to output: inout [UInt8]) {
        output.append(isFirst ? UInt8(ascii: "{") : UInt8(ascii: ","))
        isFirst = false
        output.append(UInt8(ascii: "\""))
        writeVerbatim(name, to: &output)
        output += [UInt8(ascii: "\""), UInt8(ascii: ":")]
    }

    /// Writes the member `"name":"value"` (see ``writeMemberName(_:isFirst:to:)``) when there is a value,
    /// nothing when there is none: an optional member left out when absent.
    public static func writeMember(_ name: StaticString, ifPresent value: String?, isFirst: inout Bool, to output: inout [UInt8]) {
        guard let value else { return }
        writeMemberName(name, isFirst: &isFirst, to: &output)
        writeString(value, to: &output)
    }

    /// Writes the member `"name":"ID"` (upper case, as `JSONEncoder` writes a `UUID`) when there is an id.
    public static func writeMember(_ name: StaticString, ifPresent id: UUID?, isFirst: inout Bool, to output: inout [UInt8]) {
        guard let id else { return }
        writeMemberName(name, isFirst: &isFirst, to: &output)
        writeUppercased(id, to: &output)
    }

    /// Writes the member `"name":123` when there is a number.
    public static func writeMember(_ name: StaticString, ifPresent value: Int?, isFirst: inout Bool, to output: inout [UInt8]) {
        guard let value else { return }
        writeMemberName(name, isFirst: &isFirst, to: &output)
        writeInteger(value, to: &output)
    }

    /// Closes an object written with ``writeMemberName(_:isFirst:to:)``: `{}` when it had no member.
    public static func writeObjectEnd(isEmpty: Bool, to output: inout [UInt8]) {
        if isEmpty { output.append(UInt8(ascii: "{")) }
        output.append(UInt8(ascii: "}"))
    }

    /// Writes `id` as a JSON string of its upper-case text, as `JSONEncoder` writes a `UUID`.
    public static func writeUppercased(_ id: UUID, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        id.writeUppercased(to: &output)
        output.append(UInt8(ascii: "\""))
    }

    /// Writes `id` as a JSON string of its lower-case text.
    public static func writeLowercased(_ id: UUID, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        id.writeLowercased(to: &output)
        output.append(UInt8(ascii: "\""))
    }

    /// Writes `strings` as a JSON array of strings.
    public static func writeStrings(_ strings: [String], to output: inout [UInt8]) {
        writeArray(strings, to: &output) { writeString($0, to: &$1) }
    }

    /// The text of a JSON array of `strings`: a session's `amr`, stored with each session a command or a replay writes.
    public static func strings(_ strings: [String]) -> [UInt8] {
        var output: [UInt8] = []
        writeStrings(strings, to: &output)
        return output
    }

    /// Writes `elements` as a JSON array, each written by `write`. Inlinable, so that it is specialised
    /// where it is called: unspecialised, a generic call from another module costs more than the writing.
    @inlinable
    public static func writeArray<Element>(_ elements: [Element], to output: inout [UInt8], _ write: (Element, inout [UInt8]) -> Void) {
        output.append(UInt8(ascii: "["))
        var isFirst = true
        for element in elements {
            if !isFirst { output.append(UInt8(ascii: ",")) }
            isFirst = false
            write(element, &output)
        }
        output.append(UInt8(ascii: "]"))
    }
}
