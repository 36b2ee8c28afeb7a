import Foundation
import Testing
import TetherCore
import TetherPostgres
import TetherTesting

@Suite("COPY rows, in text and binary format")
struct CopyRowsTests {
    /// COPY's text format for one field, written the plain way.
    private func escaped(_ text: String) -> [UInt8] {
        text.utf8.flatMap { byte -> [UInt8] in
            switch byte {
            case UInt8(ascii: "\\"): Array(#"\\"#.utf8)
            case UInt8(ascii: "\n"): Array(#"\n"#.utf8)
            case UInt8(ascii: "\r"): Array(#"\r"#.utf8)
            case UInt8(ascii: "\t"): Array(#"\t"#.utf8)
            default: [byte]
            }
        }
    }

    @Test func fieldsAreEscapedTabSeparatedAndNullIsBackslashN() {
        var rows = CopyRows()
        rows.row("users") { line in
            line.add("a\tb\nc\rd\\e")
            line.add(nil as String?)
            line.add(true)
            line.add(int4: 42)
            line.add("plain é")
        }
        rows.row("users") { line in line.add(false as Bool?) }
        #expect(rows.tables["users"] == Array("a\\tb\\nc\\rd\\\\e\t\\N\tt\t42\tplain é\nf\n".utf8))
        #expect(rows.count == 2)

        // Ids in lower case (as PostgreSQL prints a uuid), nil as \N; rows of two tables interleaved stay apart.
        let id = UUID(uuidString: "6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F")!
        rows.row("sessions") { line in line.add(id); line.add(nil as UUID?) }
        rows.row("users") { line in line.add(id) }
        #expect(rows.tables["sessions"] == Array("6f1d2c7e-0b7a-4c1e-9d7e-3a1b2c3d4e5f\t\\N\n".utf8))
        #expect(rows.tables["users"] == Array("a\\tb\\nc\\rd\\\\e\t\\N\tt\t42\tplain é\nf\n6f1d2c7e-0b7a-4c1e-9d7e-3a1b2c3d4e5f\n".utf8))
        #expect(rows.count == 4)

        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let text = String((0..<Int.random(in: 0..<12, using: &generator)).map { _ in "ab\\\t\n\ré0".randomElement(using: &generator)! })
            var one = CopyRows()
            one.row("t") { $0.add(text) }
            #expect(one.tables["t"] == escaped(text) + [UInt8(ascii: "\n")], "\(text.debugDescription)")
        }
    }

    /// One row of every type the bulk phase writes, each value given as the text the statements cast.
    private struct Values {
        var id: UUID?
        var text: String?
        var flag: Bool?
        var int4: Int?
        var int8: Int64?
        var at: String?
        var json: String?
        var array: PostgresArray?
        var eventTime: Date?

        func fill(_ line: inout CopyRows.Line) {
            line.add(id); line.add(text); line.add(flag); line.add(int4: int4); line.add(int8: int8)
            line.add(timestamp: at); line.add(jsonb: json); line.add(textArray: array); line.add(eventTime: eventTime)
        }
    }

    /// Timestamps as PostgreSQL prints them and as events write them, around the edges of the calendar.
    private static let timestamps = [
        "2026-12-05 23:56:25.360123+00", "2026-12-05 23:56:25+00", "2026-12-05 23:56:25.3+00", "2026-12-05T23:56:25.360Z",
        "2024-02-29 12:00:00+00", "2000-01-01 00:00:00+00", "1999-12-31 23:59:59.999999+00", "1970-01-01T00:00:00.000Z",
        "1900-03-01 00:00:00+00", "0001-01-01 00:00:00+00", "9999-12-31T23:59:59.999Z", "2026-06-30 10:00:00+05:30",
        "2026-06-30 10:00:00-08", "2016-12-31 23:59:60+00", "2026-06-30 10:00:00+15:59:59", "2026-06-30 10:00:00+0530",
        "2026-06-30 10:00:00-15",
    ]

    @Test func binaryRowsGiveTheTableWhatTextRowsGive() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false, maxConnections: 1)
        defer { client.shutdown() }
        var generator = SystemRandomNumberGenerator()
        var values: [Values] = [Values()] // every field NULL
        let ints = [0, 1, -1, Int(Int32.max), Int(Int32.min)]
        let longs: [Int64] = [0, .max, .min, -7]
        let documents = [#"["apple"]"#, "[]", #"{"a": [1, 2.5, null, "é\\u0000x"]}"#, #""\t""#]
        for index in 0..<400 {
            let text = String((0..<Int.random(in: 0..<10, using: &generator)).map { _ in "ab\\\t\n\ré0\"{},".randomElement(using: &generator)! })
            values.append(Values(
                id: UUID(), text: text, flag: index % 3 == 0 ? nil : index % 2 == 0, int4: (ints + [index])[index % 6],
                int8: (longs + [Int64(index)])[index % 5], at: Self.timestamps[index % Self.timestamps.count],
                json: documents[index % 4],
                array: [PostgresArray([String]()), PostgresArray([text, "b", ""]), PostgresArray(["\"", "\\", "NULL"])][index % 3],
                // Any instant of the years 1 to 9999, or one half a millisecond off a whole one (rounded as the text is).
                eventTime: index % 2 == 0
                    ? Date(timeIntervalSince1970: .random(in: -62_135_596_800 ... 253_402_300_799.998, using: &generator))
                    : Date(timeIntervalSince1970: Double(Int.random(in: -1_000_000_000 ... 4_000_000_000, using: &generator)) + 0.0005)))
        }
        var binary = CopyRows(binary: true)
        var text = CopyRows()
        for value in values {
            binary.row("rows") { value.fill(&$0) }
            text.row("rows") { value.fill(&$0) }
        }
        #expect(binary.tables["rows"] == nil, "every row went in binary")
        let binaryData = try #require(binary.binaryCopy(of: "rows"))
        let textData = try #require(text.tables["rows"])
        #expect(text.binaryCopy(of: "rows") == nil)
        try await client.withConnection { connection in
            try await connection.execute(simple: """
                CREATE TABLE from_binary (
                    id uuid, text text, flag boolean, int4 integer, int8 bigint, at timestamptz, json jsonb, array_ text[], event timestamptz);
                CREATE TABLE from_text (LIKE from_binary);
                """)
            _ = try await connection.run { job in
                try job.copyIn("COPY from_binary FROM STDIN (FORMAT binary)", data: binaryData)
                try job.copyIn("COPY from_text FROM STDIN", data: textData)
            }
            let count: Int = try await connection.query("SELECT count(*) AS n FROM from_binary")[0].decode("n")
            #expect(count == values.count)
            let differing: Int = try await connection.query("""
                SELECT count(*) AS n FROM ((TABLE from_binary EXCEPT ALL TABLE from_text) UNION ALL (TABLE from_text EXCEPT ALL TABLE from_binary)) AS d
                """)[0].decode("n")
            #expect(differing == 0)
            // The microseconds, not only equal instants: the text the statements cast, read back.
            let printed = try await connection.query("SELECT at::text AS at FROM from_binary WHERE at IS NOT NULL ORDER BY at, id")
                .map { try $0.decode("at", as: String.self) }
            let expected = try await connection.query("SELECT at::text AS at FROM from_text WHERE at IS NOT NULL ORDER BY at, id")
                .map { try $0.decode("at", as: String.self) }
            #expect(printed == expected && printed.count == values.count - 1)
        }
    }

    @Test func aRowBinaryFormatCannotCarryExactlyIsWrittenAsText() {
        // More fractional digits than PostgreSQL keeps (it rounds them), a day the month lacks, hour 24, infinity, a
        // year past 9999, a number beyond 32 bits: PostgreSQL reads or refuses each as text, as it always did.
        let refused: [Values] = [
            Values(at: "2026-12-05 23:56:25.1234567+00"), Values(at: "2026-02-29 00:00:00+00"), Values(at: "2026-12-05 24:00:00+00"),
            Values(at: "infinity"), Values(at: "10000-01-01 00:00:00+00"), Values(at: "2026-12-05 23:56:25"),
            Values(at: "0000-01-01 00:00:00+00"), Values(at: "2026-01-01 00:00:00+16"), Values(at: "2026-01-01 00:00:00+05:60"),
            Values(at: "2026-01-01 00:00:00+05:30:60"),
            Values(int4: Int(Int32.max) + 1),
            Values(eventTime: Date(timeIntervalSince1970: 253_402_300_800)), Values(eventTime: Date(timeIntervalSince1970: -62_135_596_801)),
        ]
        for value in refused {
            var rows = CopyRows(binary: true)
            rows.row("rows") { Values(id: UUID(), at: "2026-12-05 23:56:25+00").fill(&$0) }
            rows.row("rows") { value.fill(&$0) }
            var text = CopyRows()
            text.row("rows") { value.fill(&$0) }
            #expect(rows.tables["rows"] == text.tables["rows"], "\(value.at ?? "") \(value.int4 ?? 0) \(value.eventTime?.timeIntervalSince1970 ?? 0)")
            #expect(rows.count == 2)
            var refusedOnly = CopyRows(binary: true)
            refusedOnly.row("rows") { value.fill(&$0) }
            #expect(refusedOnly.binaryCopy(of: "rows") == nil, "no binary COPY of no rows")
            // The binary rows hold the first row alone: header (19 bytes), 9 fields, trailer.
            let header = 19, fields = 2 + (4 + 16) + 7 * 4 + (4 + 8), trailer = 2
            #expect(rows.binaryCopy(of: "rows")?.count == header + fields + trailer)
        }
        #expect(UTCTimestamp.microseconds("2026-12-05T23:56:25.360Z", separators: [UInt8(ascii: "T")], zoneRequired: true)
            == 1_796_514_985_360_000)
    }
}
