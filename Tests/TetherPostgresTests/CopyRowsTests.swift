import Foundation
import Testing
import TetherPostgres

@Suite("COPY text rows")
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
            line.add(42 as Int?)
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
}
