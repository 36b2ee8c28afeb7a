import Foundation
import TetherCore

/// A value that can be sent to PostgreSQL as a query parameter.
public protocol PostgresEncodable: Sendable {
    /// The parameter as PostgreSQL reads it; `nil` is SQL NULL.
    var postgresParameter: PostgresParameter { get }
}

/// One bound parameter: text (type left to the server to infer) or binary bytea.
public struct PostgresParameter: Sendable, Hashable {
    enum Storage: Sendable, Hashable {
        case null
        case text(String)
        case bytea([UInt8])
    }

    let storage: Storage

    /// SQL NULL.
    public static let null = PostgresParameter(storage: .null)
    /// A value in PostgreSQL's text input format; the server infers its type from the query.
    public static func text(_ value: String) -> PostgresParameter { .init(storage: .text(value)) }
    /// Raw bytes for a `bytea` parameter, sent in binary format.
    public static func bytea(_ value: [UInt8]) -> PostgresParameter { .init(storage: .bytea(value)) }

    /// Whether the parameter is sent in binary (a `bytea`), which fixes its type when a statement is prepared.
    var isBinary: Bool {
        if case .bytea = storage { true } else { false }
    }
}

/// A SQL statement whose interpolated values become `$n` parameters.
///
/// ```swift
/// let query: PostgresQuery = "SELECT * FROM events WHERE stream = \(stream) AND version > \(version)"
/// ```
/// Interpolated values are never spliced into the SQL text. Raw SQL (an identifier
/// chosen by code, never by input) must be spelled `\(unsafeSQL: name)`.
public struct PostgresQuery: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The SQL text with `$1`, `$2`, … placeholders.
    public private(set) var sql: String
    /// The parameters in placeholder order.
    public private(set) var parameters: [PostgresParameter]

    public init(stringLiteral value: String) {
        sql = value
        parameters = []
    }

    public init(stringInterpolation: StringInterpolation) {
        sql = stringInterpolation.sql
        parameters = stringInterpolation.parameters
    }

    /// Wraps SQL that carries no input at all; prefer string interpolation.
    public init(unsafeSQL sql: String) {
        self.sql = sql
        parameters = []
    }

    /// Appends another query, renumbering its placeholders.
    public mutating func append(_ other: PostgresQuery) {
        StringInterpolation.append(other, toSQL: &sql, parameters: &parameters)
    }

    public var description: String { sql }

    /// Builds the SQL text and parameter list of a ``PostgresQuery``.
    public struct StringInterpolation: StringInterpolationProtocol, Sendable {
        var sql: String
        var parameters: [PostgresParameter]

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql = ""
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            parameters = []
            parameters.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) {
            sql += literal
        }

        /// Binds a value as the next `$n` parameter.
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            parameters.append(value.postgresParameter)
            sql += "$\(parameters.count)"
        }

        /// Binds an optional value; `nil` becomes SQL NULL.
        public mutating func appendInterpolation(_ value: (some PostgresEncodable)?) {
            parameters.append(value?.postgresParameter ?? .null)
            sql += "$\(parameters.count)"
        }

        /// Splices an integer as an SQL literal, for a value fixed by the code or its configuration (a window,
        /// a page size), not one that changes from call to call. PostgreSQL plans a prepared statement for
        /// each execution while a plan for its parameters' values looks cheaper than its generic plan, which a
        /// parameter in `OFFSET`, `LIMIT` or `make_interval` makes it: a sign-in's limits statement cost 140 µs
        /// of planning for 14 µs of execution. As literals, the generic plan is the custom one, made once.
        public mutating func appendInterpolation(literal value: Int) {
            sql += String(value)
        }

        /// Splices raw SQL. Only for text chosen by code (identifiers, keywords), never input.
        public mutating func appendInterpolation(unsafeSQL raw: String) {
            sql += raw
        }

        /// Splices another query, renumbering its placeholders after this one's.
        public mutating func appendInterpolation(_ query: PostgresQuery) {
            Self.append(query, toSQL: &sql, parameters: &parameters)
        }

        /// Appends `query` in place (no copy of what is already built), its placeholders shifted
        /// past `parameters`.
        static func append(_ query: PostgresQuery, toSQL sql: inout String, parameters: inout [PostgresParameter]) {
            if parameters.isEmpty || query.parameters.isEmpty {
                sql += query.sql
            } else {
                sql += renumber(query.sql, by: parameters.count)
            }
            parameters += query.parameters
        }

        /// Shifts every `$n` placeholder outside quotes by `offset`. It reads the UTF-8 bytes: a
        /// quote, `$` or digit is one byte, never part of a longer character.
        static func renumber(_ sql: String, by offset: Int) -> String {
            let source = Array(sql.utf8)
            var result: [UInt8] = []
            result.reserveCapacity(source.count + 16)
            var quote: UInt8?
            var index = 0
            while index < source.count {
                let byte = source[index]
                index += 1
                if let open = quote {
                    if byte == open { quote = nil }
                } else if byte == UInt8(ascii: "'") || byte == UInt8(ascii: "\"") {
                    quote = byte
                } else if byte == UInt8(ascii: "$"), index < source.count, source[index].isASCIIDigit {
                    var number = 0
                    while index < source.count, source[index].isASCIIDigit {
                        number = number * 10 + Int(source[index] - UInt8(ascii: "0"))
                        index += 1
                    }
                    result.append(byte)
                    result.append(contentsOf: String(number + offset).utf8)
                    continue
                }
                result.append(byte)
            }
            return String(decoding: result, as: UTF8.self)
        }
    }
}

private extension UInt8 {
    var isASCIIDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
}

extension String: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(self) }
}

extension Substring: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
}

extension Int: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
}

extension Int32: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
}

extension Int64: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
}

extension UInt64: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
}

extension Double: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
}

extension Bool: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(self ? "true" : "false") }
}

extension UUID: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(lowercasedText) }
}

extension Date: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(PostgresTimestamp.format(self)) }
}

extension Array: PostgresEncodable where Element == UInt8 {
    public var postgresParameter: PostgresParameter { .bytea(self) }
}

extension Data: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .bytea([UInt8](self)) }
}

/// A `json`/`jsonb` value, kept as its JSON text.
public struct PostgresJSON: PostgresEncodable, Hashable {
    /// The JSON document as UTF-8 bytes.
    public var data: Data

    /// Wraps JSON bytes that are already encoded.
    public init(data: Data) {
        self.data = data
    }

    /// Encodes a value as JSON with sorted keys and dates in whole seconds (`CompactJSONEncoder`).
    public init(encoding value: some Encodable) throws {
        data = try CompactJSONEncoder(dates: .iso8601Seconds).encodeData(value)
    }

    /// The text a value writes itself (``JSONTextWritable``).
    public init(writing value: some JSONTextWritable) {
        data = Data(value.jsonText)
    }

    /// Decodes the document into `type`.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(type, from: data)
    }

    public var postgresParameter: PostgresParameter { .text(String(decoding: data, as: UTF8.self)) }
}

/// A list of text values sent as a PostgreSQL array literal (`text[]`, `uuid[]`, …).
public struct PostgresArray: PostgresEncodable, Hashable {
    /// The elements in text form.
    public var elements: [String]

    public init(_ elements: [String]) {
        self.elements = elements
    }

    /// An array of UUIDs.
    public init(_ uuids: [UUID]) {
        self.elements = uuids.map { $0.lowercasedText }
    }

    public var postgresParameter: PostgresParameter {
        .text(literal)
    }

    /// The array's text form, as PostgreSQL reads an array literal (`{"a","b"}`): each element quoted,
    /// with a backslash before each quote and backslash in it. Written in one pass over the UTF-8
    /// bytes (both characters are ASCII, never part of a longer character): a new user's search terms
    /// go through here, and Foundation's `replacingOccurrences`, twice an element, was 5% of a sign-up's CPU.
    public var literal: String {
        var output: [UInt8] = []
        output.reserveCapacity(elements.reduce(2) { $0 + $1.utf8.count + 3 })
        output.append(UInt8(ascii: "{"))
        for (index, element) in elements.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            output.append(UInt8(ascii: "\""))
            output.appendEscaped(element) { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") ? $0 : nil }
            output.append(UInt8(ascii: "\""))
        }
        output.append(UInt8(ascii: "}"))
        return String(decoding: output, as: UTF8.self)
    }
}

extension [UInt8] {
    /// Appends `text`'s UTF-8 bytes with a backslash and `escape(byte)` in place of each byte `escape`
    /// names (array literals, COPY's text format). Text with nothing to escape, nearly all of it (ids,
    /// times, base64), is copied whole.
    @inline(__always) mutating func appendEscaped(_ text: String, _ escape: (UInt8) -> UInt8?) {
        var text = text
        text.withUTF8 { utf8 in
            guard utf8.contains(where: { escape($0) != nil }) else { return append(contentsOf: utf8) }
            for byte in utf8 {
                if let escaped = escape(byte) {
                    append(UInt8(ascii: "\\"))
                    append(escaped)
                } else {
                    append(byte)
                }
            }
        }
    }
}
