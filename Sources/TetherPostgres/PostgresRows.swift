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
        let totalMicros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        var days = totalMicros.floorDiv(86_400_000_000)
        let microsOfDay = totalMicros - days * 86_400_000_000
        days += 719_468 // civil-from-days, Howard Hinnant's algorithm
        let era = days.floorDiv(146_097)
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let seconds = microsOfDay / 1_000_000
        let micros = microsOfDay % 1_000_000
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2)) \(pad(seconds / 3600, 2)):\(pad(seconds / 60 % 60, 2)):\(pad(seconds % 60, 2)).\(pad(micros, 6))+00"
    }

    /// Parses `YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM[:SS]]`.
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ width: Int) -> Int64? {
            guard index + width <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<(index + width)] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int64(byte - 48)
            }
            index += width
            return value
        }
        func expect(_ character: Character) -> Bool {
            guard index < bytes.count, bytes[index] == character.asciiValue else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
              expect(" ") || expect("T"), let hour = number(2), expect(":"), let minute = number(2), expect(":"),
              let second = number(2)
        else { return nil }
        var micros: Int64 = 0
        if expect(".") {
            var digits = 0
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                if digits < 6 { micros = micros * 10 + Int64(bytes[index] - 48) }
                digits += 1
                index += 1
            }
            for _ in digits..<6 where digits < 6 { micros *= 10 }
        }
        var offsetSeconds: Int64 = 0
        if index < bytes.count {
            let sign: Int64
            if expect("+") { sign = 1 } else if expect("-") { sign = -1 } else if expect("Z") { sign = 0 } else { return nil }
            if sign != 0 {
                guard let offsetHours = number(2) else { return nil }
                offsetSeconds = offsetHours * 3600
                if expect(":"), let offsetMinutes = number(2) {
                    offsetSeconds += offsetMinutes * 60
                    if expect(":"), let extra = number(2) { offsetSeconds += extra }
                }
                offsetSeconds *= sign
            }
        }
        guard index == bytes.count, (1...12).contains(month), (1...31).contains(day) else { return nil }
        // days-from-civil, Howard Hinnant's algorithm
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = shiftedYear.floorDiv(400)
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + Double(micros) / 1_000_000)
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}

extension Int64 {
    fileprivate func floorDiv(_ divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
