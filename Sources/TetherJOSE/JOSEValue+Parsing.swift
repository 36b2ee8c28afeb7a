import Foundation
import TetherCore

extension JOSEValue {
    /// Parses a complete JSON text strictly (RFC 8259): no duplicate member
    /// names, no trailing content, valid UTF-8 and surrogates, and bounded nesting.
    public init(parsing bytes: some Collection<UInt8>) throws {
        let parsed = try bytes.withContiguousStorageIfAvailable { try JOSEValue.parse(UnsafeRawBufferPointer($0)) }
        self = try parsed ?? Array(bytes).withUnsafeBytes { try JOSEValue.parse($0) }
    }

    static func parse(_ bytes: UnsafeRawBufferPointer) throws -> JOSEValue {
        var parser = JSONParser(bytes: bytes)
        return try parser.parseDocument()
    }
}

extension JOSEObject {
    /// Parses a JSON text that must be an object.
    public init(parsing bytes: some Collection<UInt8>) throws {
        guard case .object(let object) = try JOSEValue(parsing: bytes) else {
            throw JOSEError.malformed.with(detail: "expected a JSON object")
        }
        self = object
    }
}

/// A recursive-descent JSON parser over ``JSONLexer``: numbers as doubles, duplicate names refused.
private struct JSONParser {
    static let maximumDepth = 32

    var lexer: JSONLexer
    var depth = 0

    init(bytes: UnsafeRawBufferPointer) {
        lexer = JSONLexer(bytes: bytes)
    }

    mutating func parseDocument() throws -> JOSEValue {
        do {
            let value = try parseValue()
            lexer.skipWhitespace()
            guard lexer.current == nil else { throw lexer.failure("trailing content") }
            return value
        } catch let error as JSONSyntaxError {
            throw JOSEError.malformed.with(detail: "JSON: \(error)")
        }
    }

    private mutating func parseValue() throws -> JOSEValue {
        lexer.skipWhitespace()
        switch lexer.current {
        case nil: throw lexer.failure("unexpected end")
        case UInt8(ascii: "{"): return .object(try parseObject())
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try lexer.string())
        case UInt8(ascii: "t"): try lexer.expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try lexer.expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try lexer.expectLiteral("null"); return .null
        case let byte? where byte == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte):
            return .number(try parseNumber())
        default: throw lexer.failure("unexpected character")
        }
    }

    private mutating func enterContainer() throws {
        depth += 1
        guard depth <= Self.maximumDepth else { throw lexer.failure("nesting too deep") }
        lexer.index += 1
    }

    private mutating func parseObject() throws -> JOSEObject {
        try enterContainer()
        defer { depth -= 1 }
        var members: [(name: String, value: JOSEValue)] = []
        // Claim sets have about ten members; growing 1, 2, 4, 8, 16 would cost five allocations.
        members.reserveCapacity(12)
        var seen: Set<String>?
        lexer.skipWhitespace()
        if lexer.current == UInt8(ascii: "}") {
            lexer.index += 1
            return JOSEObject(uniqueMembers: members)
        }
        while true {
            lexer.skipWhitespace()
            guard lexer.current == UInt8(ascii: "\"") else { throw lexer.failure("expected member name") }
            let name = try lexer.string()
            // Duplicate names are how "alg" or "aud" get smuggled past one parser and not another.
            if members.count < 16 {
                let length = name.utf8.count
                guard !members.contains(where: { $0.name.utf8.count == length && $0.name == name }) else {
                    throw lexer.failure("duplicate member \(name)")
                }
            } else {
                if seen == nil { seen = Set(members.map(\.name)) }
                guard seen!.insert(name).inserted else { throw lexer.failure("duplicate member \(name)") }
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
                return JOSEObject(uniqueMembers: members)
            default: throw lexer.failure(lexer.current == nil ? "unterminated object" : "expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray() throws -> JOSEValue {
        try enterContainer()
        defer { depth -= 1 }
        var elements: [JOSEValue] = []
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
            default: throw lexer.failure(lexer.current == nil ? "unterminated array" : "expected ',' or ']'")
            }
        }
    }

    private mutating func parseNumber() throws -> Double {
        let (literal, isInteger) = try lexer.number()
        // Integers of up to 15 digits convert exactly without going through text.
        if isInteger, literal.count <= 16 {
            var value: Int64 = 0
            for byte in literal where byte != UInt8(ascii: "-") { value = value * 10 + Int64(byte - UInt8(ascii: "0")) }
            return literal.first == UInt8(ascii: "-") ? -Double(value) : Double(value)
        }
        guard let value = Double(String(decoding: literal, as: UTF8.self)), value.isFinite else {
            throw lexer.failure("number out of range")
        }
        return value
    }
}
