import Foundation

/// Reads one JSON object's members straight from its text, without a tree of values or a `Decoder`: for
/// the payloads decoded most often. Every sign-in writes a `SignedIn` and a `SessionStarted`, every refresh
/// a `SessionRefreshed`, every sign-out a `SessionEnded`, and replay and the kept users' states decode each
/// of them again.
///
/// It reads only the plain form these payloads' writers give (EventText.swift), and gives up (nil) at
/// anything else: a member's name with an escape or outside ASCII, a known member given twice, a value of
/// another type, an id or a date written otherwise, text after the object, invalid JSON. The caller then
/// decodes the payload with ``CompactJSONDecoder``, which decides what such text means or says what is
/// wrong with it, so a payload means the same whichever of the two reads it. Members the reader does not
/// know are checked as JSON and passed over, as the `Decoder` passes over them.
struct JSONObjectReader {
    private var parser: ParsedJSON.Parser
    /// The known members read so far, by their index in the caller's list of names.
    private var seen: UInt64 = 0
    private var isFirstMember = true
    private var isClosed = false

    /// What the reader throws to give up; ``read(_:_:)`` turns it into nil.
    private struct GiveUp: Error {}

    private init(bytes: UnsafeRawBufferPointer) {
        parser = ParsedJSON.Parser(bytes: bytes)
    }

    /// `read`'s answer over the object that is the whole of `data`, after `read` has taken every member
    /// (``nextMember(_:)`` answered nil); nil when the text is anything else, or when `read` answered nil.
    static func read<T>(_ data: Data, _ read: (inout JSONObjectReader) throws -> T?) -> T? {
        data.withUnsafeBytes { bytes in
            var reader = JSONObjectReader(bytes: bytes)
            reader.parser.lexer.skipWhitespace()
            guard reader.parser.lexer.current == UInt8(ascii: "{") else { return nil }
            reader.parser.lexer.index += 1
            reader.parser.depth = 1  // as the `Decoder`'s parser counts the object's members' nesting
            guard let value = try? read(&reader), reader.isClosed else { return nil }
            reader.parser.lexer.skipWhitespace()
            return reader.parser.lexer.current == nil ? value : nil
        }
    }

    /// The index in `names` (at most 64 of them) of the next member the caller knows, whose value the caller
    /// reads next; nil after the object's last member. Members of other names are checked and passed over.
    mutating func nextMember(_ names: [StaticString]) throws -> Int? {
        precondition(names.count <= 64, "a reader knows at most 64 names")
        while true {
            parser.lexer.skipWhitespace()
            if isFirstMember {
                isFirstMember = false
                if parser.lexer.current == UInt8(ascii: "}") { return close() }
            } else {
                switch parser.lexer.current {
                case UInt8(ascii: ","): parser.lexer.index += 1
                case UInt8(ascii: "}"): return close()
                default: throw GiveUp()
                }
                parser.lexer.skipWhitespace()
            }
            guard parser.lexer.current == UInt8(ascii: "\""), let name = parser.lexer.plainASCIIString() else { throw GiveUp() }
            parser.lexer.skipWhitespace()
            guard parser.lexer.current == UInt8(ascii: ":") else { throw GiveUp() }
            parser.lexer.index += 1
            parser.lexer.skipWhitespace()
            if let known = names.firstIndex(where: { $0.utf8CodeUnitCount == name.count && memcmp($0.utf8Start, name.baseAddress!, name.count) == 0 }) {
                // A name given twice: the `Decoder` keeps the first value, and says so.
                guard seen & (1 << known) == 0 else { throw GiveUp() }
                seen |= 1 << known
                return known
            }
            _ = try parser.parseValue()
        }
    }

    private mutating func close() -> Int? {
        parser.lexer.index += 1
        isClosed = true
        return nil
    }

    /// Consumes `null`, answering true, when the value is null; false, consuming nothing, otherwise.
    mutating func null() throws -> Bool {
        guard parser.lexer.current == UInt8(ascii: "n") else { return false }
        try parser.lexer.expectLiteral("null")
        return true
    }

    /// The value, a string.
    mutating func string() throws -> String {
        guard parser.lexer.current == UInt8(ascii: "\"") else { throw GiveUp() }
        return try parser.lexer.string()
    }

    /// The value, a string or null (nil).
    mutating func optionalString() throws -> String? {
        try null() ? nil : try string()
    }

    /// The value, an id in its 36-character text.
    mutating func id() throws -> UUID {
        guard let text = try plainString(), let id = UUID(utf8: text.assumingMemoryBound(to: UInt8.self)) else { throw GiveUp() }
        return id
    }

    /// The value, a date in ISO 8601 text, as ``ISO8601Milliseconds/parse(_:)`` reads one.
    mutating func date() throws -> Date {
        guard let text = try plainString(), let date = ISO8601Milliseconds.parse(utf8: text.assumingMemoryBound(to: UInt8.self)) else {
            throw GiveUp()
        }
        return date
    }

    /// The value, a date or null (nil).
    mutating func optionalDate() throws -> Date? {
        try null() ? nil : try date()
    }

    /// The value, an array of strings.
    mutating func strings() throws -> [String] {
        guard parser.lexer.current == UInt8(ascii: "[") else { throw GiveUp() }
        parser.lexer.index += 1
        var strings: [String] = []
        parser.lexer.skipWhitespace()
        if parser.lexer.current == UInt8(ascii: "]") {
            parser.lexer.index += 1
            return strings
        }
        while true {
            parser.lexer.skipWhitespace()
            strings.append(try string())
            parser.lexer.skipWhitespace()
            switch parser.lexer.current {
            case UInt8(ascii: ","): parser.lexer.index += 1
            case UInt8(ascii: "]"):
                parser.lexer.index += 1
                return strings
            default: throw GiveUp()
            }
        }
    }

    /// The value, a number that is an `Int` (``Swift/FixedWidthInteger/init(integerText:)``).
    mutating func integer() throws -> Int {
        guard let value = Int(integerText: String(decoding: try parser.lexer.number().text, as: UTF8.self)) else { throw GiveUp() }
        return value
    }

    /// A string value's text, when it is plain ASCII.
    private mutating func plainString() throws -> UnsafeRawBufferPointer? {
        guard parser.lexer.current == UInt8(ascii: "\"") else { throw GiveUp() }
        return parser.lexer.plainASCIIString()
    }
}
