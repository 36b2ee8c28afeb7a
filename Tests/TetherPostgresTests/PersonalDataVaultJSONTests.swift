import Foundation
import Testing
@testable import TetherPostgres

/// The vault's own JSON writer must write what `JSONEncoder` with sorted keys writes, byte for byte.
@Suite("Personal data vault JSON")
struct PersonalDataVaultJSONTests {
    @Test(arguments: [
        #"{"b":1,"a":"x","c":[true,false,null,-7,2.5],"d":{"z":"é \"quoted\" \\ back","y":"tab\tnew\nline\u0001"},"url":"https://e/x"}"#,
        #"{}"#,
        #"{"personal":{"email":"zoë@example.com","name":"李"},"amr":["apple"],"n":12345678901}"#,
    ])
    func writesWhatJSONEncoderWrites(json: String) throws {
        let value = try JSONDecoder().decode(JSONValueBox.self, from: Data(json.utf8))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        #expect(String(decoding: value.jsonData, as: UTF8.self) == String(decoding: try encoder.encode(value), as: UTF8.self))
        #expect(try JSONDecoder().decode(JSONValueBox.self, from: value.jsonData) == value)
    }
}
