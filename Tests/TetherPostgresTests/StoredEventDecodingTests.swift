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
        ]
        for document in documents {
            let data = Data(document.utf8)
            let reference = Result { try JSONDecoder().decode(EventMetadata.self, from: data) }
            let fast = Result { try EventMetadata.decodeStored(data) }
            switch (reference, fast) {
            case (.success(let expected), .success(let read)): #expect(read == expected, "\(document)")
            case (.failure, .failure): break
            default: Issue.record("\(document): JSONDecoder \(reference), fast \(fast)")
            }
        }
    }
}
