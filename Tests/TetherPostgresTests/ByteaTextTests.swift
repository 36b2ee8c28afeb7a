import Foundation
import Testing
@testable import TetherPostgres

/// `bytea` in PostgreSQL's hex output format, read from a cell's bytes and from its text alike.
@Suite("bytea's hex output read")
struct ByteaTextTests {
    private func fromCell(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { try? [UInt8].decode(postgresBytes: $0) }
    }

    @Test func everyByteInEitherCaseReadsBack() {
        let bytes = (0...255).map(UInt8.init) + [0, 255, 16, 15]
        let lower = "\\x" + bytes.map { String(format: "%02x", $0) }.joined()
        for text in [lower, lower.uppercased().replacingOccurrences(of: "\\X", with: "\\x")] {
            #expect(fromCell(text) == bytes)
            #expect([UInt8](postgresText: text) == bytes)
        }
        #expect(fromCell("\\x") == [])
    }

    @Test(arguments: ["", "\\", "x00", "\\x0", "\\x0g", "\\xg0", "\\x00 1", "\\x0:", "\\x/0", "\\x00\u{e9}", "0x00", "\\X00"])
    func anythingElseIsRefused(_ text: String) {
        #expect(fromCell(text) == nil)
        #expect([UInt8](postgresText: text) == nil)
    }

    @Test func nullIsRefusedUnlessOptional() throws {
        #expect(throws: (any Error).self) { try [UInt8].decode(postgresBytes: nil) }
        #expect(try [UInt8]?.decode(postgresBytes: nil) == nil)
    }
}
