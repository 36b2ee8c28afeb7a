import Foundation
import TetherCore

extension EventMetadata {
    /// The metadata of a stored event, from its `metadata` column.
    ///
    /// Read in one pass over its text: every event read (a history page, a replay batch, a user's
    /// stream) decodes its metadata, and `JSONDecoder` cost more than the rest of the row, a parsed
    /// tree of its members still an eighth of a history page. A document of another shape than
    /// Tether writes (a member of the wrong type, an escaped name or id, a name given twice) goes to
    /// `JSONDecoder`, whose answer, or error, stays the reference.
    static func decodeStored(_ data: Data) throws -> EventMetadata {
        if let metadata = decodeWritten(data) { return metadata }
        return try PostgresJSON(data: data).decode(EventMetadata.self)
    }

    /// The metadata, when every member it knows has the type Tether writes; unknown members are
    /// skipped and `null` reads as absent, as the `Codable` conformance does.
    private static func decodeWritten(_ data: Data) -> EventMetadata? {
        data.withUnsafeBytes { bytes in
            var reader = WrittenMetadataReader(lexer: JSONLexer(bytes: bytes))
            return try? reader.document()
        }
    }
}

/// Reads metadata text member by member, without a tree; throws at anything of another shape than
/// Tether writes, for the caller to ask `JSONDecoder`.
private struct WrittenMetadataReader {
    struct OtherShape: Error {}

    var lexer: JSONLexer

    mutating func document() throws -> EventMetadata {
        var metadata = EventMetadata()
        var seen = 0
        try open()
        var count = 0
        while let name = try nextName(&count) {
            // Each known name once: a name given twice is for `JSONDecoder` to settle.
            let slot = Self.names.firstIndex { Self.matches(name, $0) }
            if let slot {
                guard seen & 1 << slot == 0 else { throw OtherShape() }
                seen |= 1 << slot
            }
            if try null() { continue }
            switch slot {
            case 0: metadata.commandId = try id()
            case 1: metadata.correlationId = try id()
            case 2: metadata.causationId = try id()
            case 3: metadata.clientIP = try text()
            case 4: metadata.userAgent = try text()
            case 5: metadata.surface = try text()
            case 6: metadata.actor = try actor()
            default: try skipValue(depth: 0)
            }
        }
        lexer.skipWhitespace()
        guard lexer.current == nil else { throw OtherShape() }
        return metadata
    }

    /// The members ``document()`` reads, by slot.
    private static let names: [StaticString] = ["commandId", "correlationId", "causationId", "clientIP", "userAgent", "surface", "actor"]

    /// `{"kind": text, "id": text or null}`, other members skipped.
    private mutating func actor() throws -> EventActor {
        var kind: String?
        var id: String?
        var seen = 0
        try open()
        var count = 0
        while let name = try nextName(&count) {
            if Self.matches(name, "kind") {
                guard seen & 1 == 0 else { throw OtherShape() }
                seen |= 1
                kind = try text()
            } else if Self.matches(name, "id") {
                guard seen & 2 == 0 else { throw OtherShape() }
                seen |= 2
                id = try null() ? nil : try text()
            } else {
                try skipValue(depth: 1)
            }
        }
        guard let kind else { throw OtherShape() }
        return EventActor(kind: kind, id: id)
    }

    private mutating func open() throws {
        lexer.skipWhitespace()
        guard lexer.current == UInt8(ascii: "{") else { throw OtherShape() }
        lexer.index += 1
    }

    /// In an object: the next member's name with its `:` read, or nil after the closing `}`.
    /// `count` counts the members read so far.
    private mutating func nextName(_ count: inout Int) throws -> UnsafeRawBufferPointer? {
        lexer.skipWhitespace()
        if lexer.current == UInt8(ascii: "}") {
            lexer.index += 1
            return nil
        }
        if count > 0 {
            guard lexer.current == UInt8(ascii: ",") else { throw OtherShape() }
            lexer.index += 1
            lexer.skipWhitespace()
        }
        count += 1
        let name = try plainString()
        lexer.skipWhitespace()
        guard lexer.current == UInt8(ascii: ":") else { throw OtherShape() }
        lexer.index += 1
        lexer.skipWhitespace()
        return name
    }

    /// The bytes between the quotes of a string of ASCII with no escape.
    private mutating func plainString() throws -> UnsafeRawBufferPointer {
        guard lexer.current == UInt8(ascii: "\"") else { throw OtherShape() }
        let start = lexer.index + 1
        var end = start
        while end < lexer.bytes.count {
            let byte = lexer.bytes[end]
            if byte == UInt8(ascii: "\"") {
                lexer.index = end + 1
                return UnsafeRawBufferPointer(rebasing: lexer.bytes[start..<end])
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { throw OtherShape() }
            end += 1
        }
        throw OtherShape()
    }

    /// Reads `null` when it comes next.
    private mutating func null() throws -> Bool {
        guard lexer.current == UInt8(ascii: "n") else { return false }
        try lexer.expectLiteral("null")
        return true
    }

    private mutating func id() throws -> UUID {
        guard let id = UUID(utf8: try plainString().assumingMemoryBound(to: UInt8.self)) else { throw OtherShape() }
        return id
    }

    private mutating func text() throws -> String {
        guard lexer.current == UInt8(ascii: "\"") else { throw OtherShape() }
        return try lexer.string()
    }

    /// Reads past a value of any shape, nested at most 64 deep.
    private mutating func skipValue(depth: Int) throws {
        lexer.skipWhitespace()
        switch lexer.current {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < 64 else { throw OtherShape() }
            let isObject = lexer.current == UInt8(ascii: "{")
            lexer.index += 1
            var count = 0
            while true {
                if isObject {
                    guard try nextName(&count) != nil else { return }
                } else {
                    lexer.skipWhitespace()
                    if lexer.current == UInt8(ascii: "]") {
                        lexer.index += 1
                        return
                    }
                    if count > 0 {
                        guard lexer.current == UInt8(ascii: ",") else { throw OtherShape() }
                        lexer.index += 1
                    }
                    count += 1
                }
                try skipValue(depth: depth + 1)
            }
        case UInt8(ascii: "\""): _ = try lexer.string()
        case UInt8(ascii: "t"): try lexer.expectLiteral("true")
        case UInt8(ascii: "f"): try lexer.expectLiteral("false")
        case UInt8(ascii: "n"): try lexer.expectLiteral("null")
        default: _ = try lexer.number()
        }
    }

    private static func matches(_ name: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
        name.count == literal.utf8CodeUnitCount && memcmp(name.baseAddress!, literal.utf8Start, name.count) == 0
    }
}
