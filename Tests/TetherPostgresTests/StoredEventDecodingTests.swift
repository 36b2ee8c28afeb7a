import Foundation
import Testing
import TetherCore
@testable import TetherPostgres

/// The fast readers of stored rows (ids, metadata) must answer exactly what Foundation answers.
@Suite("Stored ids and metadata read without Foundation's parsers")
struct StoredEventDecodingTests {
    @Test func uuidTextAnswersAsUUIDStringButRefusesSpaces() {
        var texts = (0..<200).map { index in
            let id = UUID().uuidString
            return index.isMultiple(of: 2) ? id.lowercased() : id
        }
        texts += [
            "", "0", "not-a-uuid", "00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
            "ffffffff-ffff-ffff-ffff-fffffffffffg", "ffffffffffff-ffff-ffff-ffff-ffffffff", "{00000000-0000-0000-0000-000000000000}",
            "00000000-0000-0000-0000-0000000000001", "00000000-0000-0000-0000-00000000000",
            "00000000_0000-0000-0000-000000000000", "0000000é-0000-0000-0000-000000000000", "aBcDeF01-2345-6789-abcd-EF0123456789",
        ]
        for text in texts {
            #expect(UUID(text: text) == UUID(uuidString: text), "\(text)")
            #expect(UUID(text: Substring(text)) == UUID(uuidString: text), "\(text)")
        }
        for text in texts {
            guard let id = UUID(uuidString: text) else { continue }
            #expect(id.lowercasedText == text.lowercased(), "the lowercase form reads back as the text it came from")
        }
        for id in [UUID(), UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))] + (0..<100).map({ _ in UUID() }) {
            #expect(id.lowercasedText == id.uuidString.lowercased())
            var bytes: [UInt8] = [1, 2]
            id.writeLowercased(to: &bytes)
            #expect(bytes == [1, 2] + Array(id.uuidString.lowercased().utf8))
        }
        // Stricter than sscanf, which skips a space before a pair of digits.
        #expect(UUID(uuidString: " 0000000-0000-0000-0000-000000000000") != nil)
        #expect(UUID(text: " 0000000-0000-0000-0000-000000000000") == nil)
    }

    @Test func storedMetadataReadsAsJSONDecoderReadsIt() throws {
        let values = [
            EventMetadata(),
            EventMetadata(commandId: UUID(), correlationId: UUID(), causationId: UUID(), actor: .user(UUID()),
                          clientIP: "2001:db8::1", userAgent: "Ada's \"phone\" \\ é 😀", surface: "parse"),
            EventMetadata(actor: .anonymous, clientIP: "127.0.0.1"),
            EventMetadata(commandId: UUID(), actor: .system("replay"), surface: "cli"),
        ]
        for value in values {
            let stored = try JSONEncoder().encode(value)
            #expect(try EventMetadata.decodeStored(stored) == value)
        }
        let documents = [
            #"{"commandId":null,"surface":"v1","unknown":{"deep":[1,2]}}"#,
            #"{"actor":{"kind":"admin","id":null,"extra":1},"clientIP":"10.0.0.1"}"#,
            #"{"commandId":"00000000-0000-0000-0000-00000000000A"}"#,
            // Of another shape than Tether writes: JSONDecoder's answer (here, its error) stands.
            #"{"commandId":"not-a-uuid"}"#, #"{"surface":7}"#, #"{"actor":{"id":"x"}}"#, #"{"actor":"x"}"#, #"[]"#,
            #"{"surface":"a","surface":"b"}"#,
            // As PostgreSQL prints jsonb: spaces after `:` and `,`, shorter names first.
            #"{"actor": {"id": "4c1f3a7e-0000-4000-8000-000000000001", "kind": "user"}, "surface": "v1", "clientIP": "::1", "commandId": "4C1F3A7E-0000-4000-8000-000000000002", "userAgent": "a\tb \u00e9 \ud83d\ude00"}"#,
            " \n{ \"surface\" :\t\"cli\" } \r\n", #"{"actor": null, "clientIP": null}"#, #"{}"#, "",
            // Escaped names and ids, and non-ASCII names.
            #"{"\u0073urface":"v1"}"#, #"{"commandId":"\u00300000000-0000-0000-0000-000000000000"}"#, #"{"surfacé":"v1","surface":"x"}"#,
            // Unknown members of every kind, deep.
            #"{"n":-1.5e3,"t":true,"f":false,"z":null,"a":[[],{},[{"k":[1,"x",{"q":null}]}]],"surface":"s"}"#,
            String(repeating: "[", count: 70) + String(repeating: "]", count: 70),
            #"{"u":"# + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}",
            // Broken, or a name given twice: whatever JSONDecoder answers, the fast reader answers.
            #"{"surface":"v1"} x"#, #"{"surface":"v1",}"#, #"{"surface" "v1"}"#, #"{"surface":"v1""#, #"{"a":[1,]}"#,
            #"{"a":01}"#, #"{"a":nul}"#, #"{"actor":{"kind":"user","kind":"admin"}}"#, #"{"actor":{"kind":"user","id":7}}"#,
            #"{"actor":{"kind":null}}"#, #"{"commandId":7}"#, #"{"userAgent":"a\qb"}"#, "{\"userAgent\":\"a\u{01}b\"}",
        ]
        // Invalid UTF-8 in a known member's value and in an unknown one's.
        let invalid = [Array(#"{"userAgent":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8), Array(#"{"x":""#.utf8) + [0xFF] + Array(#""}"#.utf8)]
        for data in documents.map({ Data($0.utf8) }) + invalid.map({ Data($0) }) {
            expectReadAsJSONDecoderReads(data)
        }
    }

    /// The fast reader answers what `JSONDecoder` answers: the same metadata, or an error.
    private func expectReadAsJSONDecoderReads(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) {
        let reference = Result { try JSONDecoder().decode(EventMetadata.self, from: data) }
        let fast = Result { try EventMetadata.decodeStored(data) }
        let text = String(decoding: data, as: UTF8.self)
        switch (reference, fast) {
        case (.success(let expected), .success(let read)): #expect(read == expected, "\(text)", sourceLocation: sourceLocation)
        case (.failure, .failure): break
        default: Issue.record("\(text): JSONDecoder \(reference), fast \(fast)", sourceLocation: sourceLocation)
        }
    }

    @Test func storedMetadataOfRandomShapesReadsAsJSONDecoderReadsIt() {
        // Members of the right and the wrong types, null, repeated and unknown, in any order.
        var generator = SystemRandomNumberGenerator()
        let values = [
            #""4c1f3a7e-0000-4000-8000-00000000000b""#, #""x""#, "null", "7", #"{"kind":"user"}"#, #"{"kind":"user","id":"u1"}"#,
            #"{"id":null}"#, "[]", "true", #""é\n""#,
        ]
        let names = ["commandId", "correlationId", "causationId", "clientIP", "userAgent", "surface", "actor", "other"]
        for _ in 0..<2_000 {
            let members = (0..<Int.random(in: 0...5, using: &generator)).map { _ in
                "\"\(names.randomElement(using: &generator)!)\":\(values.randomElement(using: &generator)!)"
            }
            expectReadAsJSONDecoderReads(Data(("{" + members.joined(separator: Bool.random(using: &generator) ? "," : ", ") + "}").utf8))
        }
    }
}
