import Foundation
import Testing
import TetherCore
import TetherJOSE

/// `JSONValue.jsonBytes()` stands in for `JSONEncoder` in responses, and `JSONValue(parsing:)` for
/// `JSONDecoder` in history reads: both must give exactly what the Foundation coders give (those of
/// swift-foundation on Linux, where Tether runs; Darwin's `.sortedKeys` may order keys otherwise).
@Suite("JSONValue written and parsed without the Foundation coders")
struct JSONValueTextTests {
    /// The encoder of TetherHTTP's JSON responses.
    private static let reference: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    private static let awkwardStrings = [
        "", "plain", "quote \" backslash \\ slash /", "\u{0}\u{1}\u{1F}\u{7F}", "\n\r\t\u{8}\u{C}",
        "é 😀 \u{2028}\u{2029} \u{200B}", "https://example.com/a?b=c&d=e",
    ]

    /// A value of every shape from a seeded generator, so a failure can be run again.
    private static func value(_ generator: inout SplitMix, depth: Int = 0) -> JSONValue {
        switch generator.next() % (depth > 3 ? 5 : 7) {
        case 0: return .null
        case 1: return .bool(generator.next() % 2 == 0)
        // Integers within ±2^52: the parser reads numbers as doubles (see JSONValue(parsing:)).
        case 2: return .int(Int(truncatingIfNeeded: generator.next()) >> Int(11 + generator.next() % 53))
        case 3:
            let doubles = [0.5, -0.0, 1.0, 100.25, 1e-5, 3e-7, 1e21, 12345678.9, .greatestFiniteMagnitude, .leastNonzeroMagnitude, -2.5e-10]
            let scaled = doubles[Int(generator.next() % UInt64(doubles.count))] * Double(generator.next() % 7 + 1)
            return .double(scaled.isFinite ? scaled : 0.25)
        case 4: return .string(awkwardStrings[Int(generator.next() % UInt64(awkwardStrings.count))] + String(generator.next() % 1000))
        case 5: return .array((0..<Int(generator.next() % 4)).map { _ in value(&generator, depth: depth + 1) })
        default:
            let names = ["b", "B", "a10", "a9", "_x", "Z", "é", "e", "userId", "user_id", "x/y", ""]
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int(generator.next() % 6) {
                members[names[Int(generator.next() % UInt64(names.count))]] = value(&generator, depth: depth + 1)
            }
            return .object(members)
        }
    }

    @Test func writesTheBytesJSONEncoderWrites() throws {
        var generator = SplitMix(seed: 20261201)
        for _ in 0..<500 {
            let value = Self.value(&generator)
            let expected = Array(try Self.reference.encode(value))
            #expect(try value.jsonBytes() == expected, "\(String(decoding: expected, as: UTF8.self))")
        }
    }

    @Test func aNonFiniteNumberIsRefusedAsJSONEncoderRefusesIt() {
        for number in [Double.nan, .infinity, -.infinity] {
            #expect(throws: JSONWritingError.self) { try JSONValue.array([1, .double(number)]).jsonBytes() }
            #expect(throws: EncodingError.self) { try Self.reference.encode(JSONValue.double(number)) }
        }
    }

    @Test func parsesWhatJSONDecoderDecodes() throws {
        var generator = SplitMix(seed: 42)
        for _ in 0..<500 {
            let text = try Self.reference.encode(Self.value(&generator))
            #expect(try JSONValue(parsing: text) == JSONDecoder().decode(JSONValue.self, from: text), "\(String(decoding: text, as: UTF8.self))")
        }
    }

    @Test func parsesJSONBAsPostgreSQLPrintsIt() throws {
        // jsonb's text form: a space after each colon and comma, keys by length then bytes.
        let text = #"{"a": 1, "id": "0f8e", "amr": ["apple", "mfa"], "n": null, "when": 1.5e-7, "ok": true, "x": {"y": [ ]}}"#
        #expect(try JSONValue(parsing: Array(text.utf8)) == JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)))
    }

    @Test func parsingRefusesWhatIsNotOneJSONText() {
        for text in ["", "{", "{\"a\":1,}", "[1] 2", "{\"a\":1,\"a\":2}", "\"\u{1}\""] {
            #expect(throws: (any Error).self, "\(text)") { try JSONValue(parsing: Array(text.utf8)) }
        }
    }
}

/// SplitMix64: a small seeded generator.
struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
