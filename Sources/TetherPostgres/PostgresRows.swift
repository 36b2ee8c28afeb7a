import Foundation
import TetherCore

/// The rows a statement returned, decoded from PostgreSQL's text format on demand.
public struct PostgresRows: Sendable, RandomAccessCollection {
    /// Column names in order.
    public let columns: [String]
    /// How many rows the statement affected (`INSERT`, `UPDATE`, `DELETE`), or returned.
    public let affectedRows: Int
    private let cells: [String?]
    private let columnIndex: [String: Int]

    init(columns: [String], cells: [String?], affectedRows: Int) {
        self.columns = columns
        self.cells = cells
        self.affectedRows = affectedRows
        var index: [String: Int] = [:]
        for (offset, name) in columns.enumerated() where index[name] == nil {
            index[name] = offset
        }
        self.columnIndex = index
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { columns.isEmpty ? 0 : cells.count / columns.count }

    public subscript(position: Int) -> PostgresRow {
        PostgresRow(rows: self, offset: position * columns.count)
    }

    fileprivate func cell(_ offset: Int) -> String? { cells[offset] }
    fileprivate func column(named name: String) -> Int? { columnIndex[name] }
}

/// One row of a result.
public struct PostgresRow: Sendable {
    fileprivate let rows: PostgresRows
    fileprivate let offset: Int

    /// Decodes the column called `name`.
    public func decode<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard let column = rows.column(named: name) else {
            throw PostgresError.decoding("no column \"\(name)\" in the result (columns: \(rows.columns.joined(separator: ", ")))")
        }
        return try decode(column, as: type)
    }

    /// Decodes the column at `column` (counting from 0).
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T.Type = T.self) throws -> T {
        guard column >= 0, column < rows.columns.count else {
            throw PostgresError.decoding("column \(column) is out of range (\(rows.columns.count) columns)")
        }
        do {
            return try T.decode(postgresText: rows.cell(offset + column))
        } catch {
            throw PostgresError.decoding("column \"\(rows.columns[column])\": \(error.reason)")
        }
    }
}

/// Why a text value could not become the requested Swift type.
public struct PostgresDecodingFailure: Error, Sendable {
    /// What was wrong with the value.
    public let reason: String

    public init(_ reason: String) {
        self.reason = reason
    }

    static func unexpected(_ text: String, as type: Any.Type) -> PostgresDecodingFailure {
        PostgresDecodingFailure("cannot read \(String(reflecting: text.prefix(64))) as \(type)")
    }

    static func null(as type: Any.Type) -> PostgresDecodingFailure {
        PostgresDecodingFailure("NULL where \(type) was expected (decode as Optional)")
    }
}

/// A type that can be read from PostgreSQL's text output format.
public protocol PostgresDecodable: Sendable {
    /// Builds the value from a cell; `nil` is SQL NULL.
    static func decode(postgresText: String?) throws(PostgresDecodingFailure) -> Self
}

/// A type that is never NULL and reads from a non-NULL text value.
public protocol PostgresTextDecodable: PostgresDecodable {
    /// Builds the value from the cell's text, or nil when the text does not fit.
    init?(postgresText: String)
}

extension PostgresTextDecodable {
    public static func decode(postgresText: String?) throws(PostgresDecodingFailure) -> Self {
        guard let text = postgresText else { throw .null(as: Self.self) }
        guard let value = Self(postgresText: text) else { throw .unexpected(text, as: Self.self) }
        return value
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(postgresText: String?) throws(PostgresDecodingFailure) -> Wrapped? {
        guard let postgresText else { return nil }
        return try Wrapped.decode(postgresText: postgresText)
    }
}

extension String: PostgresTextDecodable {
    public init?(postgresText: String) { self = postgresText }
}

extension Int: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
}

extension Int32: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
}

extension Int64: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
}

/// `xid8` transaction ids read as `UInt64`.
extension UInt64: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
}

extension Double: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
}

extension Bool: PostgresTextDecodable {
    public init?(postgresText: String) {
        switch postgresText {
        case "t", "true": self = true
        case "f", "false": self = false
        default: return nil
        }
    }
}

extension UUID: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(text: postgresText) }
}

extension Date: PostgresTextDecodable {
    public init?(postgresText: String) {
        guard let date = PostgresTimestamp.parse(postgresText) else { return nil }
        self = date
    }
}

/// `bytea` in the hex output format (`\x0a1b…`).
extension Array: PostgresDecodable where Element == UInt8 {}
extension Array: PostgresTextDecodable where Element == UInt8 {
    public init?(postgresText: String) {
        let utf8 = Array(postgresText.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else {
            return nil
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = Self.hexValue(utf8[index]), let low = Self.hexValue(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self = bytes
    }

    private static func hexValue(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension Data: PostgresTextDecodable {
    public init?(postgresText: String) {
        guard let bytes = [UInt8](postgresText: postgresText) else { return nil }
        self.init(bytes)
    }
}

extension PostgresJSON: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(data: Data(postgresText.utf8)) }
}

/// Reads and writes `timestamptz` text in the ISO style with a UTC offset,
/// which every connection selects at start-up (`TimeZone=UTC`, `DateStyle=ISO`).
enum PostgresTimestamp {
    /// `2026-11-29 13:29:45.123456+00`, with microseconds.
    static func format(_ date: Date) -> String {
        UTCTimestamp.format(date, separator: UInt8(ascii: " "), fractionDigits: 6, zone: "+00")
    }

    /// Parses `YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM[:SS]]` (no zone: UTC).
    static func parse(_ text: String) -> Date? {
        UTCTimestamp.parse(text, separators: [UInt8(ascii: " "), UInt8(ascii: "T")], zoneRequired: false)
    }
}
