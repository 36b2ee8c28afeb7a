import Foundation

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

/// A recursive-descent JSON parser over UTF-8 bytes.
private struct JSONParser {
    static let maximumDepth = 32

    let bytes: UnsafeRawBufferPointer
    var index = 0
    var depth = 0

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    mutating func parseDocument() throws -> JOSEValue {
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw failure("trailing content") }
        return value
    }

    private func failure(_ detail: String) -> JOSEError {
        JOSEError.malformed.with(detail: "JSON: \(detail) at byte \(index)")
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws -> JOSEValue {
        skipWhitespace()
        guard index < bytes.count else { throw failure("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return .object(try parseObject())
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw failure("unexpected character")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count,
              memcmp(bytes.baseAddress! + index, literal.utf8Start, count) == 0 else {
            throw failure("invalid literal")
        }
        index += count
    }

    private mutating func enterContainer() throws {
        depth += 1
        guard depth <= Self.maximumDepth else { throw failure("nesting too deep") }
        index += 1
    }

    private mutating func parseObject() throws -> JOSEObject {
        try enterContainer()
        defer { depth -= 1 }
        var members: [(name: String, value: JOSEValue)] = []
        // Claim sets have about ten members; growing 1, 2, 4, 8, 16 would cost five allocations.
        members.reserveCapacity(12)
        var seen: Set<String>?
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return JOSEObject(uniqueMembers: members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected member name") }
            let name = try parseString()
            // Duplicate names are how "alg" or "aud" get smuggled past one parser and not another.
            if members.count < 16 {
                let length = name.utf8.count
                guard !members.contains(where: { $0.name.utf8.count == length && $0.name == name }) else {
                    throw failure("duplicate member \(name)")
                }
            } else {
                if seen == nil { seen = Set(members.map(\.name)) }
                guard seen!.insert(name).inserted else { throw failure("duplicate member \(name)") }
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            members.append((name, try parseValue()))
            skipWhitespace()
            guard index < bytes.count else { throw failure("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return JOSEObject(uniqueMembers: members)
            } else {
                throw failure("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray() throws -> JOSEValue {
        try enterContainer()
        defer { depth -= 1 }
        var elements: [JOSEValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw failure("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            } else {
                throw failure("expected ',' or ']'")
            }
        }
    }

    /// Registered JOSE member names, handed out as literals instead of freshly decoded strings.
    private static let registeredNames: [StaticString] = [
        "alg", "kid", "typ", "iss", "sub", "aud", "exp", "nbf", "iat", "jti", "kty", "crv", "use",
    ]

    private mutating func parseString() throws -> String {
        index += 1
        let start = index
        // Fast path: plain ASCII without escapes, the shape of nearly every JOSE string.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                if text.count == 3 {
                    for name in Self.registeredNames where memcmp(name.utf8Start, text.baseAddress!, 3) == 0 {
                        return name.description
                    }
                }
                return String(decoding: text, as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { break }
            index += 1
        }
        var output = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                let text = String(decoding: output, as: UTF8.self)
                // String(decoding:) repairs invalid UTF-8 silently; a repaired string is a different string.
                guard text.utf8.elementsEqual(output) else { throw failure("invalid UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw failure("unterminated escape") }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(escaped)
                case UInt8(ascii: "b"): output.append(0x08)
                case UInt8(ascii: "f"): output.append(0x0C)
                case UInt8(ascii: "n"): output.append(0x0A)
                case UInt8(ascii: "r"): output.append(0x0D)
                case UInt8(ascii: "t"): output.append(0x09)
                case UInt8(ascii: "u"): output += try parseUnicodeEscape()
                default: throw failure("invalid escape")
                }
            case 0..<0x20:
                throw failure("control character in string")
            default:
                output.append(byte)
                index += 1
            }
        }
        throw failure("unterminated string")
    }

    /// Reads the hex digits after `\u` (and a following low surrogate) and returns the scalar as UTF-8.
    private mutating func parseUnicodeEscape() throws -> [UInt8] {
        var scalar = try parseHex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw failure("lone high surrogate")
            }
            index += 2
            let low = try parseHex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw failure("invalid low surrogate") }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw failure("lone low surrogate")
        }
        return Array(String(Character(Unicode.Scalar(scalar)!)).utf8)
    }

    private mutating func parseHex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("short unicode escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("invalid unicode escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    private mutating func parseNumber() throws -> Double {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            guard index >= bytes.count || !isDigit(bytes[index]) else { throw failure("leading zero") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid fraction") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let literal = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        // Integers of up to 15 digits convert exactly without going through text.
        if isInteger, literal.count <= 16 {
            var value: Int64 = 0
            for byte in literal where byte != UInt8(ascii: "-") { value = value * 10 + Int64(byte - UInt8(ascii: "0")) }
            return literal.first == UInt8(ascii: "-") ? -Double(value) : Double(value)
        }
        guard let value = Double(String(decoding: literal, as: UTF8.self)), value.isFinite else {
            throw failure("number out of range")
        }
        return value
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
