import Foundation
import Testing
import TetherCore

@Suite("JSON strings: UTF-8 checked on every path")
struct JSONLexerStringTests {
    /// Lexes the JSON string whose content is `content` (and a leading `\n` escape when `escaped`).
    private func lexed(_ content: [UInt8], escaped: Bool) -> String? {
        let text = [UInt8(ascii: "\"")] + (escaped ? Array(#"\n"#.utf8) : []) + content + [UInt8(ascii: "\"")]
        return text.withUnsafeBytes { bytes in
            var lexer = JSONLexer(bytes: bytes)
            guard let string = try? lexer.string(), lexer.index == bytes.count else { return nil }
            return string
        }
    }

    @Test func stringsReadAsStrictUTF8Decoding() {
        let pieces: [[UInt8]] = [
            Array("a".utf8), Array("Zz09 ".utf8), Array("é".utf8), Array("€".utf8), Array("😀".utf8),
            [0x80], [0xBF], [0xC0, 0x80], [0xC3], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0xF0, 0x9F], [0xF4, 0x90, 0x80, 0x80], [0xFF],
        ]
        var generator = SystemRandomNumberGenerator()
        var contents: [[UInt8]] = pieces + [[]]
        for _ in 0..<3_000 {
            contents.append((0..<Int.random(in: 1...5, using: &generator)).flatMap { _ in pieces.randomElement(using: &generator)! })
        }
        var invalid = 0
        for content in contents {
            // What the lexer always answered: the bytes validated as UTF-8, or a refusal.
            let expected = String(validating: content, as: UTF8.self)
            if expected == nil { invalid += 1 }
            #expect(lexed(content, escaped: false) == expected, "\(content)")
            #expect(lexed(content, escaped: true) == expected.map { "\n" + $0 }, "escaped: \(content)")
        }
        #expect(invalid > 100 && invalid < contents.count - 100, "both kinds were tried")
    }

    /// Long runs of plain ASCII are passed over a word at a time: a byte that ends the string, starts an escape,
    /// is refused or needs validating is seen wherever it falls in a run, as are its neighbours, which are plain.
    @Test func everyByteIsSeenWhereverItFallsInALongRun() {
        let plain = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_+/=.".utf8)
        let inserts: [(bytes: [UInt8], expected: String?)] = [
            ([], ""), (Array(#"\""#.utf8), "\""), (Array(#"\\"#.utf8), "\\"), (Array(#"\u00e9"#.utf8), "é"),
            (Array("é".utf8), "é"), (Array("😀".utf8), "😀"), ([0x7F], "\u{7F}"), ([0x20], " "), ([0x21], "!"), ([0x23], "#"),
            ([0x5B], "["), ([0x5D], "]"), ([0x1F], nil), ([0x00], nil), ([0x0A], nil), ([0xFF], nil), ([0xC3], nil),
            ([UInt8(ascii: "\"")], nil), // the string ends there, before the last quote
        ]
        for length in 0...40 {
            for offset in 0...length {
                let (head, tail) = (Array(plain[0..<offset]), Array(plain[offset..<length]))
                for insert in inserts {
                    let expected = insert.expected.map { String(decoding: head, as: UTF8.self) + $0 + String(decoding: tail, as: UTF8.self) }
                    #expect(lexed(head + insert.bytes + tail, escaped: false) == expected, "\(insert.bytes) at \(offset) of \(length)")
                }
            }
        }
    }
}
