import Foundation

/// Decodes `Decodable` values from JSON text without Foundation's `JSONDecoder`: replay and the
/// kept users' states decode every event's payload, and `JSONDecoder` was the largest part of
/// a replay's CPU (about a third). The text is parsed strictly (RFC 8259: valid UTF-8, no trailing
/// content, bounded nesting) into a small tree of members in arrays, then read by a `Decoder` over it.
///
/// It reads what `JSONDecoder` reads: `Date` from ISO 8601 text with or without a fraction
/// (``ISO8601Milliseconds/parse(_:)``) or from a number of seconds since 2001-01-01 (as `Date` encodes
/// itself), `URL` from its string, `Data` from base64 and ``JSONValue`` as itself; a number is decoded
/// exactly into the type asked for. Errors are `DecodingError`s with the coding path, as `JSONDecoder`
/// throws. A name given twice keeps its first value, as in `JSONDecoder`, unless the decoder refuses
/// such text (``refusesDuplicateNames``).
public struct CompactJSONDecoder: Sendable {
    /// Whether an object that names a member twice is refused as invalid JSON. Requests are read so: parsers
    /// disagree on which of the two counts (`JSON.parse` keeps the last, this one the first), and a body that a
    /// proxy in front reads one way must not mean another thing here. Text Tether wrote itself is not checked.
    public var refusesDuplicateNames = false

    public init(refusesDuplicateNames: Bool = false) {
        self.refusesDuplicateNames = refusesDuplicateNames
    }

    public func decode<T: Decodable>(_ type: T.Type, from data: some ContiguousBytes) throws -> T {
        let node = try data.withUnsafeBytes { bytes in
            var parser = ParsedJSON.Parser(bytes: bytes, refusesDuplicateNames: refusesDuplicateNames)
            return try parser.parseDocument()
        }
        return try NodeDecoder(node: node, parent: nil, key: nil).decodeValue(T.self)
    }
}

/// A parsed JSON value; numbers keep their text, so that each is read exactly as the type asked for.
enum ParsedJSON {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([ParsedJSON])
    case object([(name: String, value: ParsedJSON)])

    var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a Boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// A recursive-descent parser over ``JSONLexer``.
    struct Parser {
        static let maximumDepth = 512

        var lexer: JSONLexer
        var depth = 0
        let refusesDuplicateNames: Bool

        init(bytes: UnsafeRawBufferPointer, refusesDuplicateNames: Bool = false) {
            lexer = JSONLexer(bytes: bytes)
            self.refusesDuplicateNames = refusesDuplicateNames
        }

        mutating func parseDocument() throws -> ParsedJSON {
            do {
                let value = try parseValue()
                lexer.skipWhitespace()
                guard lexer.current == nil else { throw lexer.failure("unexpected text after the value") }
                return value
            } catch let error as JSONSyntaxError {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "The given data was not valid JSON: \(error)."))
            }
        }

        mutating func parseValue() throws -> ParsedJSON {
            lexer.skipWhitespace()
            switch lexer.current {
            case nil: throw lexer.failure("unexpected end")
            case UInt8(ascii: "{"): return try nested { try $0.parseObject() }
            case UInt8(ascii: "["): return try nested { try $0.parseArray() }
            case UInt8(ascii: "\""): return .string(try lexer.string())
            case UInt8(ascii: "t"): try lexer.expectLiteral("true"); return .bool(true)
            case UInt8(ascii: "f"): try lexer.expectLiteral("false"); return .bool(false)
            case UInt8(ascii: "n"): try lexer.expectLiteral("null"); return .null
            default: return .number(String(decoding: try lexer.number().text, as: UTF8.self))
            }
        }

        private mutating func nested(_ parse: (inout Parser) throws -> ParsedJSON) throws -> ParsedJSON {
            depth += 1
            guard depth <= Self.maximumDepth else { throw lexer.failure("nesting too deep") }
            defer { depth -= 1 }
            lexer.index += 1
            return try parse(&self)
        }

        private mutating func parseObject() throws -> ParsedJSON {
            var members: [(name: String, value: ParsedJSON)] = []
            // The names seen, when duplicates are refused (a set: a hostile body may hold many thousands).
            var names = Set<String>()
            lexer.skipWhitespace()
            if lexer.current == UInt8(ascii: "}") {
                lexer.index += 1
                return .object(members)
            }
            while true {
                lexer.skipWhitespace()
                guard lexer.current == UInt8(ascii: "\"") else { throw lexer.failure("expected member name") }
                let start = lexer.index
                let name = try lexer.string()
                if refusesDuplicateNames, !names.insert(name).inserted {
                    lexer.index = start
                    throw lexer.failure("the member name \"\(name.prefix(64))\" given twice")
                }
                lexer.skipWhitespace()
                guard lexer.current == UInt8(ascii: ":") else { throw lexer.failure("expected ':'") }
                lexer.index += 1
                members.append((name, try parseValue()))
                lexer.skipWhitespace()
                switch lexer.current {
                case UInt8(ascii: ","): lexer.index += 1
                case UInt8(ascii: "}"):
                    lexer.index += 1
                    return .object(members)
                default: throw lexer.failure("expected ',' or '}'")
                }
            }
        }

        private mutating func parseArray() throws -> ParsedJSON {
            var elements: [ParsedJSON] = []
            lexer.skipWhitespace()
            if lexer.current == UInt8(ascii: "]") {
                lexer.index += 1
                return .array(elements)
            }
            while true {
                elements.append(try parseValue())
                lexer.skipWhitespace()
                switch lexer.current {
                case UInt8(ascii: ","): lexer.index += 1
                case UInt8(ascii: "]"):
                    lexer.index += 1
                    return .array(elements)
                default: throw lexer.failure("expected ',' or ']'")
                }
            }
        }
    }
}

/// The `Decoder` over one parsed value; the coding path is put together only for an error.
private final class NodeDecoder: Decoder {
    let node: ParsedJSON
    let parent: NodeDecoder?
    let key: (any CodingKey)?
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(node: ParsedJSON, parent: NodeDecoder?, key: (any CodingKey)?) {
        self.node = node
        self.parent = parent
        self.key = key
    }

    var codingPath: [any CodingKey] {
        var path: [any CodingKey] = []
        var decoder: NodeDecoder? = self
        while let current = decoder {
            if let key = current.key { path.append(key) }
            decoder = current.parent
        }
        return path.reversed()
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = node else { throw mismatch([String: Any].self) }
        return KeyedDecodingContainer(KeyedNodeContainer(decoder: self, members: members))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = node else { throw mismatch([Any].self) }
        return UnkeyedNodeContainer(decoder: self, elements: elements)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleNodeContainer(decoder: self) }

    func mismatch(_ type: Any.Type) -> DecodingError {
        if case .null = node {
            return .valueNotFound(type, .init(codingPath: codingPath, debugDescription: "Expected \(type) but found null instead."))
        }
        return .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "Expected to decode \(type) but found \(node.kind) instead."))
    }

    func corrupted(_ detail: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: codingPath, debugDescription: detail))
    }

    /// A child decoder for a member or element.
    func child(_ node: ParsedJSON, key: (any CodingKey)?) -> NodeDecoder {
        NodeDecoder(node: node, parent: self, key: key)
    }

    // MARK: Reading this decoder's node as one value

    func decodeNil() -> Bool {
        if case .null = node { true } else { false }
    }

    func decodeBool() throws -> Bool {
        guard case .bool(let value) = node else { throw mismatch(Bool.self) }
        return value
    }

    func decodeString() throws -> String {
        guard case .string(let value) = node else { throw mismatch(String.self) }
        return value
    }

    func decodeInteger<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        guard case .number(let text) = node else { throw mismatch(type) }
        if let value = I(integerText: text) { return value }
        throw corrupted("Number \(text) does not fit in \(type).")
    }

    /// The node as a ``JSONValue``, as `JSONValue(from:)` reads it through `JSONDecoder`: a number that
    /// is an exact `Int` is an integer, any other finite one a double; a number beyond `Double`
    /// (`1e400`) is refused, at its own path. A name given twice keeps its first value.
    func decodeJSONValue() throws -> JSONValue {
        switch node {
        case .null: return .null
        case .bool(let value): return .bool(value)
        case .number(let text):
            if let value = Int(integerText: text) { return .int(value) }
            return .double(try decodeFloat(Double.self))
        case .string(let value): return .string(value)
        case .array(let elements):
            var values: [JSONValue] = []
            values.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                values.append(try child(element, key: IndexKey(index)).decodeJSONValue())
            }
            return .array(values)
        case .object(let members):
            var values: [String: JSONValue] = Dictionary(minimumCapacity: members.count)
            for member in members where values[member.name] == nil {
                values[member.name] = try child(member.value, key: SuperKey(stringValue: member.name)).decodeJSONValue()
            }
            return .object(values)
        }
    }

    func decodeFloat<F: BinaryFloatingPoint & LosslessStringConvertible>(_ type: F.Type) throws -> F {
        guard case .number(let text) = node else { throw mismatch(type) }
        guard let value = F(text), value.isFinite else { throw corrupted("Number \(text) does not fit in \(type).") }
        return value
    }

    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        // The types `JSONDecoder` reads its own way, and those it reads through a string.
        if T.self == String.self { return try decodeString() as! T }
        if T.self == UUID.self {
            let text = try decodeString()
            guard let id = UUID(text: text) else { throw corrupted("Attempted to decode UUID from invalid UUID string.") }
            return id as! T
        }
        if T.self == Date.self {
            // A number is the seconds since 2001-01-01 (``CompactJSONEncoder/DateFormat/secondsSinceReferenceDate``).
            if case .number = node { return Date(timeIntervalSinceReferenceDate: try decodeFloat(Double.self)) as! T }
            let text = try decodeString()
            guard let date = ISO8601Milliseconds.parse(text) else { throw corrupted("Expected date string to be ISO8601-formatted.") }
            return date as! T
        }
        if T.self == URL.self {
            guard let url = URL(string: try decodeString()) else { throw corrupted("Invalid URL string.") }
            return url as! T
        }
        if T.self == Data.self {
            guard let data = Data(base64Encoded: try decodeString()) else { throw corrupted("Encountered Data is not valid Base64.") }
            return data as! T
        }
        if T.self == JSONValue.self { return try decodeJSONValue() as! T }
        return try T(from: self)
    }
}

private struct KeyedNodeContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: NodeDecoder
    let members: [(name: String, value: ParsedJSON)]
    var codingPath: [any CodingKey] { decoder.codingPath }

    var allKeys: [Key] { members.compactMap { Key(stringValue: $0.name) } }

    /// The member's value; the first one of a name given twice, as `JSONDecoder` reads it. Objects
    /// here have a handful of members.
    private func value(_ key: Key) -> ParsedJSON? {
        let name = key.stringValue
        let length = name.utf8.count
        for member in members where member.name.utf8.count == length && member.name == name { return member.value }
        return nil
    }

    private func member(_ key: Key) throws -> NodeDecoder {
        guard let value = value(key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value associated with key \(key.stringValue)."))
        }
        return decoder.child(value, key: key)
    }

    /// The member's value, which must be there.
    private func required(_ key: Key) throws -> ParsedJSON {
        guard let value = value(key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value associated with key \(key.stringValue)."))
        }
        return value
    }

    /// The member's value read as `T`. Strings, Booleans, `Int`s, ids, dates and arrays of strings are read
    /// straight from the parsed value; anything else, and any error (which needs the member's coding path),
    /// through a child decoder, as before.
    private func read<T: Decodable>(_ type: T.Type, _ value: ParsedJSON, _ key: Key) throws -> T {
        switch value {
        case .string(let text):
            if T.self == String.self { return text as! T }
            if T.self == UUID.self, let id = UUID(text: text) { return id as! T }
            if T.self == Date.self, let date = ISO8601Milliseconds.parse(text) { return date as! T }
        case .bool(let flag):
            if T.self == Bool.self { return flag as! T }
        case .number(let text):
            if T.self == Int.self, let number = Int(integerText: text) { return number as! T }
        case .array(let elements):
            if T.self == [String].self {
                var texts: [String] = []
                texts.reserveCapacity(elements.count)
                for element in elements {
                    guard case .string(let text) = element else { break }
                    texts.append(text)
                }
                if texts.count == elements.count { return texts as! T }
            }
        default:
            break
        }
        return try decoder.child(value, key: key).decodeValue(type)
    }

    /// The member's value read as `T`, or nil when the member is missing or null (as the default
    /// `decodeIfPresent` reads it, with one look-up instead of three).
    private func readIfPresent<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        guard let value = value(key) else { return nil }
        if case .null = value { return nil }
        return try read(type, value, key)
    }

    func contains(_ key: Key) -> Bool { value(key) != nil }
    func decodeNil(forKey key: Key) throws -> Bool { try member(key).decodeNil() }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try read(type, try required(key), key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try read(type, try required(key), key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try member(key).decodeFloat(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try member(key).decodeFloat(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try member(key).decodeInteger(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try member(key).decodeInteger(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try member(key).decodeInteger(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try member(key).decodeInteger(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try member(key).decodeInteger(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try member(key).decodeInteger(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try member(key).decodeInteger(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try member(key).decodeInteger(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try member(key).decodeInteger(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try member(key).decodeInteger(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try read(type, try required(key), key) }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try readIfPresent(type, key) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try readIfPresent(type, key) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try member(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try member(key).unkeyedContainer() }
    func superDecoder() throws -> any Decoder {
        decoder.child(members.last { $0.name == SuperKey.key.stringValue }?.value ?? .null, key: SuperKey.key)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder { decoder.child(value(key) ?? .null, key: key) }
}

/// The key `JSONEncoder` and `JSONDecoder` use for a super encoder or decoder without a key, and a
/// ``JSONValue`` object's member in a coding path.
private struct SuperKey: CodingKey {
    static let key = SuperKey(stringValue: "super")
    let stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

private struct UnkeyedNodeContainer: UnkeyedDecodingContainer {
    let decoder: NodeDecoder
    let elements: [ParsedJSON]
    var currentIndex = 0
    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    init(decoder: NodeDecoder, elements: [ParsedJSON]) {
        self.decoder = decoder
        self.elements = elements
    }

    /// The next element's decoder; the index moves on only when `read` succeeds, as in `JSONDecoder`.
    private mutating func next<T>(_ type: T.Type, _ read: (NodeDecoder) throws -> T) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: codingPath + [IndexKey(currentIndex)], debugDescription: "Unkeyed container is at end."))
        }
        let value = try read(decoder.child(elements[currentIndex], key: IndexKey(currentIndex)))
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, case .null = elements[currentIndex] else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) { try $0.decodeBool() } }
    mutating func decode(_ type: String.Type) throws -> String { try next(type) { try $0.decodeString() } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type) { try $0.decodeFloat(type) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type) { try $0.decodeFloat(type) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) { try $0.decodeInteger(type) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) { try $0.decodeValue(type) } }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next(KeyedDecodingContainer<NestedKey>.self) { try $0.container(keyedBy: type) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next((any UnkeyedDecodingContainer).self) { try $0.unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder { try next(NodeDecoder.self) { $0 } }
}

/// An array element's place in a coding path.
private struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

private struct SingleNodeContainer: SingleValueDecodingContainer {
    let decoder: NodeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.decodeNil() }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.decodeBool() }
    func decode(_ type: String.Type) throws -> String { try decoder.decodeString() }
    func decode(_ type: Double.Type) throws -> Double { try decoder.decodeFloat(type) }
    func decode(_ type: Float.Type) throws -> Float { try decoder.decodeFloat(type) }
    func decode(_ type: Int.Type) throws -> Int { try decoder.decodeInteger(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.decodeInteger(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.decodeInteger(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.decodeInteger(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.decodeInteger(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.decodeInteger(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decodeValue(type) }
}

extension FixedWidthInteger {
    /// A JSON number's integer, as `JSONDecoder` reads one: its digits, or, for a number written with
    /// a fraction or an exponent (`2.0`, `1e3`), its exact value when it has no fraction and fits.
    /// Digits beyond the type's range are refused, not rounded through `Double`.
    init?(integerText text: String) {
        if let value = Self(text) {
            self = value
            return
        }
        guard text.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 | 0x20 == UInt8(ascii: "e") }),
              let double = Double(text), let value = Self(exactly: double) else { return nil }
        self = value
    }
}
