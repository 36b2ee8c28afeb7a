import CLibPQ
import Foundation
import TetherCore

/// The rows a statement returned, decoded from PostgreSQL's text format on demand.
///
/// The rows keep libpq's result itself and read each cell where libpq put it: a cell becomes a `String`
/// only when read as one, and a JSON, id, time or number cell is read straight from its bytes. (Copying
/// every cell into a `String` first cost an allocation and a UTF-8 check apiece, and JSON one more copy.)
/// libpq's results are read-only once made, so rows can be read on any thread; the result is freed
/// with the last copy of the rows.
public struct PostgresRows: Sendable, RandomAccessCollection {
    /// Column names in order.
    public let columns: [String]
    /// How many rows the statement affected (`INSERT`, `UPDATE`, `DELETE`), or returned.
    public let affectedRows: Int
    /// The result the rows are read from; nil for a command's, which has none.
    private let result: Result?
    /// Each name's first column, for a wide result; nil for one of at most ``scannedColumns`` columns, whose
    /// names are scanned instead: a column name is a small string, compared in a word or two, where hashing
    /// it took a twentieth of a replay's CPU (ten cells a row, millions of rows), and building the
    /// dictionary was work for every statement of every command.
    private let columnIndex: [String: Int]?
    /// The widest result whose column names are scanned rather than hashed.
    static let scannedColumns = 16

    /// Owns a libpq result: cleared when the last rows reading it go.
    ///
    /// `@unchecked Sendable`: libpq never changes a result after making it, and this type only reads it.
    private final class Result: @unchecked Sendable {
        let pointer: OpaquePointer
        let rowCount: Int

        init(_ pointer: OpaquePointer) {
            self.pointer = pointer
            rowCount = Int(PQntuples(pointer))
        }

        deinit {
            PQclear(pointer)
        }
    }

    /// The rows of `result` (its status must be `PGRES_TUPLES_OK` or `PGRES_SINGLE_TUPLE`), which they
    /// take over: it is cleared when they go.
    init(taking result: OpaquePointer) {
        let owned = Result(result)
        let columnCount = Int(PQnfields(result))
        var columns = [String]()
        columns.reserveCapacity(columnCount)
        for column in 0..<columnCount {
            columns.append(String(cString: PQfname(result, Int32(column))))
        }
        self.columns = columns
        self.columnIndex = Self.index(of: columns)
        self.result = owned
        self.affectedRows = owned.rowCount
    }

    /// The dictionary of ``columnIndex`` for `columns`, nil for few of them.
    static func index(of columns: [String]) -> [String: Int]? {
        guard columns.count > scannedColumns else { return nil }
        var index: [String: Int] = Dictionary(minimumCapacity: columns.count)
        for (column, name) in columns.enumerated() where index[name] == nil { index[name] = column }
        return index
    }

    /// A result without rows: a command's, with how many rows it affected.
    init(affectedRows: Int) {
        columns = []
        columnIndex = nil
        result = nil
        self.affectedRows = affectedRows
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { columns.isEmpty ? 0 : result?.rowCount ?? 0 }

    public subscript(position: Int) -> PostgresRow {
        PostgresRow(rows: self, row: position)
    }

    /// Decodes the cell at `row` and `column` as `T` from its bytes (nil for NULL).
    fileprivate func decodeCell<T: PostgresDecodable>(row: Int, column: Int, as type: T.Type) throws -> T {
        guard let result, row >= 0, row < result.rowCount else {
            throw PostgresDecodingFailure("row \(row) is out of range (\(result?.rowCount ?? 0) rows)")
        }
        return try withExtendedLifetime(result) {
            let (row, column) = (Int32(row), Int32(column))
            guard PQgetisnull(result.pointer, row, column) == 0 else { return try T.decode(postgresBytes: nil) }
            let count = Int(PQgetlength(result.pointer, row, column))
            let start = UnsafeRawPointer(PQgetvalue(result.pointer, row, column)!).assumingMemoryBound(to: UInt8.self)
            return try T.decode(postgresBytes: UnsafeBufferPointer(start: start, count: count))
        }
    }

    /// Which result the rows read: equal for rows of one result.
    var resultIdentity: ObjectIdentifier? { result.map(ObjectIdentifier.init) }

    /// The first column called `name`.
    func column(named name: String) -> Int? {
        if let columnIndex { return columnIndex[name] }
        return columns.firstIndex(of: name)
    }
}

/// One row of a result.
public struct PostgresRow: Sendable {
    /// The result the row is of.
    let rows: PostgresRows
    fileprivate let row: Int

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
            return try rows.decodeCell(row: row, column: column, as: T.self)
        } catch let failure as PostgresDecodingFailure {
            throw PostgresError.decoding("column \"\(rows.columns[column])\": \(failure.reason)")
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
    /// Builds the value from a cell's text as UTF-8 bytes; `nil` is SQL NULL. By default it makes a
    /// `String` of them for ``decode(postgresText:)``; a type that can skip that says so here.
    static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> Self
}

extension PostgresDecodable {
    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> Self {
        try decode(postgresText: postgresBytes.map { String(decoding: $0, as: UTF8.self) })
    }
}

/// A non-NULL type read from a cell's bytes as `parse` makes it, or refused as ``PostgresDecodingFailure/unexpected(_:as:)``.
private func decodeBytes<T>(_ bytes: UnsafeBufferPointer<UInt8>?, as type: T.Type, _ parse: (UnsafeBufferPointer<UInt8>) -> T?) throws -> T {
    guard let bytes else { throw PostgresDecodingFailure.null(as: T.self) }
    guard let value = parse(bytes) else { throw PostgresDecodingFailure.unexpected(String(decoding: bytes, as: UTF8.self), as: T.self) }
    return value
}

/// A decimal integer as PostgreSQL prints one (an optional sign, then digits), or nil when the bytes are
/// not one or it does not fit in `T`: what `T(String)` answers, without the string.
private func parseInteger<T: FixedWidthInteger>(_ bytes: UnsafeBufferPointer<UInt8>, as type: T.Type) -> T? {
    var index = 0
    var isNegative = false
    if let first = bytes.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
        isNegative = first == UInt8(ascii: "-")
        index = 1
    }
    guard index < bytes.count else { return nil }
    var value: T = 0
    while index < bytes.count {
        let digit = bytes[index] &- UInt8(ascii: "0")
        guard digit < 10 else { return nil }
        let (shifted, overflowed) = value.multipliedReportingOverflow(by: 10)
        let (next, overflowedAgain) = isNegative
            ? shifted.subtractingReportingOverflow(T(digit)) : shifted.addingReportingOverflow(T(digit))
        guard !overflowed, !overflowedAgain else { return nil }
        value = next
        index += 1
    }
    return value
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

    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> Wrapped? {
        guard let postgresBytes else { return nil }
        return try Wrapped.decode(postgresBytes: postgresBytes)
    }
}

extension String: PostgresTextDecodable {
    public init?(postgresText: String) { self = postgresText }
}

extension Int: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(postgresText) }

    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> Int {
        try decodeBytes(postgresBytes, as: Int.self) { parseInteger($0, as: Int.self) }
    }
}

extension Int32: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(postgresText) }

    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> Int32 {
        try decodeBytes(postgresBytes, as: Int32.self) { parseInteger($0, as: Int32.self) }
    }
}

extension Int64: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(postgresText) }

    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> Int64 {
        try decodeBytes(postgresBytes, as: Int64.self) { parseInteger($0, as: Int64.self) }
    }
}

/// `xid8` transaction ids read as `UInt64`.
extension UInt64: PostgresTextDecodable {
    public init?(postgresText: String) { self.init(postgresText) }

    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> UInt64 {
        try decodeBytes(postgresBytes, as: UInt64.self) { parseInteger($0, as: UInt64.self) }
    }
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

    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> UUID {
        try decodeBytes(postgresBytes, as: UUID.self) { UUID(utf8: $0) }
    }
}

extension Date: PostgresTextDecodable {
    public init?(postgresText: String) {
        guard let date = PostgresTimestamp.parse(postgresText) else { return nil }
        self = date
    }

    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> Date {
        try decodeBytes(postgresBytes, as: Date.self) { PostgresTimestamp.parse(bytes: $0) }
    }
}

/// `bytea` in the hex output format (`\x0a1b…`), read from the cell's bytes (a user's snapshot is tens of KB).
extension Array: PostgresDecodable where Element == UInt8 {
    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> [UInt8] {
        try decodeBytes(postgresBytes, as: [UInt8].self) { fromHex($0) }
    }
}

extension Array: PostgresTextDecodable where Element == UInt8 {
    public init?(postgresText: String) {
        var text = postgresText
        guard let bytes = text.withUTF8({ Self.fromHex($0) }) else { return nil }
        self = bytes
    }

    /// The bytes `\x` and pairs of hex digits stand for; nil for anything else.
    private static func fromHex(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard text.count >= 2, text[0] == UInt8(ascii: "\\"), text[1] == UInt8(ascii: "x"), text.count % 2 == 0 else {
            return nil
        }
        var invalid: UInt8 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: (text.count - 2) / 2) { buffer, count in
            hexValues.withUnsafeBufferPointer { values in
                var index = 2
                while index < text.count {
                    let high = values[Int(text[index])], low = values[Int(text[index + 1])]
                    invalid |= (high | low) & 0x10
                    buffer[count] = high << 4 | low & 0x0F
                    count += 1
                    index += 2
                }
            }
        }
        return invalid == 0 ? bytes : nil
    }

    /// Each byte's value as a hex digit; 0x10 for a byte that is not one.
    private static let hexValues: [UInt8] = (0...255).map { byte in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(byte) - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt8(byte) - UInt8(ascii: "A") + 10
        default: 0x10
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

    public static func decode(postgresBytes: UnsafeBufferPointer<UInt8>?) throws -> PostgresJSON {
        try decodeBytes(postgresBytes, as: PostgresJSON.self) { PostgresJSON(data: Data(buffer: $0)) }
    }
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
        UTCTimestamp.parse(text, separators: separators, zoneRequired: false)
    }

    /// ``parse(_:)`` of the text's UTF-8 bytes.
    static func parse(bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        UTCTimestamp.parse(bytes: bytes, separators: separators, zoneRequired: false)
    }

    private static let separators = [UInt8(ascii: " "), UInt8(ascii: "T")]
}
