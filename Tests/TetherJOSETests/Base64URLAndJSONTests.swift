import Testing
import TetherJOSE

@Suite("Strict base64url and JSON")
struct Base64URLAndJSONTests {
    @Test(arguments: [0, 1, 2, 3, 4, 5, 31, 32, 33, 255])
    func base64URLRoundTripsEveryLength(count: Int) throws {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let encoded = Base64URL.encode(bytes)
        #expect(!encoded.contains("=") && !encoded.contains("+") && !encoded.contains("/"))
        #expect(try Base64URL.decode(encoded) == bytes)
    }

    @Test func base64URLMatchesRFC4648Vectors() throws {
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode(Array("fooba".utf8)) == "Zm9vYmE")
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(try Base64URL.decode("-_8") == [0xFB, 0xFF])
    }

    @Test("Non-canonical base64url is rejected", arguments: [
        "Zm9vYg==", "Zm9vYg=", "Zm9v Yg", "Zm9v\nYg", "+/8", "Zm9vY", "Zm9vYh", "Zm9vYmF=", "Zm9vYmG", "Zh", "Zm9?",
    ])
    func nonCanonicalBase64URLIsRejected(text: String) {
        #expect(throws: JOSEError.malformed) { try Base64URL.decode(text) }
    }

    @Test func jsonParsesNestedValuesAndKeepsMemberOrder() throws {
        let value = try JOSEValue(parsing: Array(#" {"b":[1,-2.5e1,true,null,"\u00e9\ud83d\ude00"],"a":{"x":"\"\\\/"}} "#.utf8))
        let object = try #require(value.objectValue)
        #expect(object.names == ["b", "a"])
        #expect(object["b"] == [1, -25.0, true, nil, "é😀"])
        #expect(object["a"]?.objectValue?["x"] == "\"\\/")
        #expect(try JOSEValue(parsing: value.jsonBytes) == value)
    }

    @Test("Malformed or ambiguous JSON is rejected", arguments: [
        #"{"alg":"RS256","alg":"none"}"#, #"{"a":1} x"#, #"{"a":01}"#, #"{"a":1.}"#, #"{"a":"\ud800"}"#,
        #"{"a":"\udc00\ud800"}"#, "{\"a\":\"\u{01}\"}", #"{"a":tru}"#, #"{"a":1,}"#, #"[1,]"#, #"{'a':1}"#, "",
        String(repeating: "[", count: 40) + String(repeating: "]", count: 40), #"{"a":1e999}"#,
    ])
    func malformedJSONIsRejected(text: String) {
        #expect(throws: JOSEError.malformed) { try JOSEValue(parsing: Array(text.utf8)) }
    }

    @Test func jsonRejectsInvalidUTF8InStrings() {
        #expect(throws: JOSEError.malformed) { try JOSEValue(parsing: [0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JOSEError.malformed) { try JOSEValue(parsing: [0x22, 0xF0, 0x9F, 0x98, 0x22]) }
    }

    @Test func jsonSerializationIsCompactAndEscapesControlCharacters() {
        let object: JOSEObject = ["exp": 1_300_819_380, "half": 0.5, "s": "a\"b\n\u{1}", "list": [true, nil]]
        #expect(String(decoding: object.jsonBytes, as: UTF8.self)
            == #"{"exp":1300819380,"half":0.5,"s":"a\"b\n\u0001","list":[true,null]}"#)
    }
}
