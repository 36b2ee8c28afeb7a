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
        var interpolation = StringInterpolation(literalCapacity: 0, interpolationCount: 0)
        interpolation.sql = sql
        interpolation.parameters = parameters
        interpolation.appendInterpolation(other)
        sql = interpolation.sql
        parameters = interpolation.parameters
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

        /// Splices raw SQL. Only for text chosen by code (identifiers, keywords), never input.
        public mutating func appendInterpolation(unsafeSQL raw: String) {
            sql += raw
        }

        /// Splices another query, renumbering its placeholders after this one's.
        public mutating func appendInterpolation(_ query: PostgresQuery) {
            let offset = parameters.count
            if offset == 0 || query.parameters.isEmpty {
                sql += query.sql
            } else {
                sql += Self.renumber(query.sql, by: offset)
            }
            parameters += query.parameters
        }

        /// Shifts every `$n` placeholder outside quotes by `offset`.
        private static func renumber(_ sql: String, by offset: Int) -> String {
            var result = ""
            result.reserveCapacity(sql.utf8.count + 8)
            var scalars = Array(sql.unicodeScalars)[...]
            var quote: Unicode.Scalar?
            while let scalar = scalars.popFirst() {
                if let open = quote {
                    result.unicodeScalars.append(scalar)
                    if scalar == open { quote = nil }
                    continue
                }
                if scalar == "'" || scalar == "\"" {
                    quote = scalar
                    result.unicodeScalars.append(scalar)
                    continue
                }
                if scalar == "$", let first = scalars.first, ("0"..."9").contains(first) {
                    var digits = ""
                    while let next = scalars.first, ("0"..."9").contains(next) {
                        digits.unicodeScalars.append(next)
                        scalars.removeFirst()
                    }
                    result += "$\(Int(digits)! + offset)"
                    continue
                }
                result.unicodeScalars.append(scalar)
            }
            return result
        }
    }
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

    /// Encodes a value as JSON with sorted keys.
    public init(encoding value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        data = try encoder.encode(value)
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

    /// The array's text form, as PostgreSQL reads an array literal (`{"a","b"}`).
    public var literal: String {
        let quoted = elements.map { element in
            "\"" + element.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        return "{" + quoted.joined(separator: ",") + "}"
    }
}
