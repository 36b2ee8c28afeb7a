import Foundation
import Testing
@testable import TetherCore

@Suite("CompactJSONDecoder reads what JSONDecoder reads")
struct CompactJSONDecoderTests {
    static let foundation: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = ISO8601Milliseconds.parse(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad date"))
            }
            return date
        }
        return decoder
    }()

    /// Decodes `text` with both decoders and expects the same value, or both to throw.
    func expectSame<T: Decodable & Equatable>(_ type: T.Type, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let expected = Result { try Self.foundation.decode(type, from: Data(text.utf8)) }
        let decoded = Result { try CompactJSONDecoder().decode(type, from: Data(text.utf8)) }
        switch (expected, decoded) {
        case (.success(let expected), .success(let decoded)): #expect(decoded == expected, sourceLocation: sourceLocation)
        case (.failure, .failure): break
        default: Issue.record("JSONDecoder: \(expected); CompactJSONDecoder: \(decoded) for \(text)", sourceLocation: sourceLocation)
        }
    }

    struct Everything: Codable, Equatable {
        var text: String
        var flag: Bool
        var count: Int
        var small: Int8
        var big: UInt64
        var ratio: Double
        var single: Float
        var maybe: String?
        var list: [[Int]]
        var map: [String: Double]
        var when: Date
        var id: UUID
        var link: URL
        var blob: Data
        var json: JSONValue
        var nested: Nested?

        struct Nested: Codable, Equatable {
            var kind: MFAMethod
            var at: [Date]
        }
    }

    static let everything = """
        {"text": "Zo\\u00eb \\"q\\" \\\\ \\/ \\n\\t\\b\\f\\r \\ud834\\udd1e ☃", "flag": true, "count": -9223372036854775808,
         "small": 127, "big": 18446744073709551615, "ratio": -1.5e-7, "single": 0.1, "maybe": null,
         "list": [[], [1, 2], [3]], "map": {"a": 1, "b": 2.5, "": -0.0}, "when": "2026-11-29T13:29:45.123Z",
         "id": "c86e950d-2311-46da-8eab-ba4945b68939", "link": "https://example.org/a?b=c", "blob": "AAEC+vv8/f7/",
         "json": {"z": [1, 2.5, "x", null, true], "a": {}}, "nested": {"kind": "totp", "at": ["2026-11-29T13:29:45Z"]},
         "unknown": {"ignored": [1, {"x": null}]}}
        """

    @Test func membersOfEveryKind() throws {
        expectSame(Everything.self, Self.everything)
        let decoded = try CompactJSONDecoder().decode(Everything.self, from: Data(Self.everything.utf8))
        #expect(decoded.text == "Zoë \"q\" \\ / \n\t\u{08}\u{0C}\r 𝄞 ☃")
        #expect(decoded.count == Int.min && decoded.big == UInt64.max && decoded.maybe == nil)
        #expect(decoded.nested?.kind == .totp)
    }

    /// Dates as numbers of seconds since 2001 (``CompactJSONEncoder/DateFormat/secondsSinceReferenceDate``, what
    /// `Date` encodes itself as) read back exactly, microseconds and all; as `JSONDecoder` reads them by default.
    @Test func datesWrittenAsNumbersReadBackExactly() throws {
        let dates = [Date(timeIntervalSince1970: 1_795_958_985.123_456), Date(timeIntervalSinceReferenceDate: -0.000_001),
                     Date(timeIntervalSinceReferenceDate: 0), Date(timeIntervalSince1970: 1e-7), Date.distantFuture]
        let text = try CompactJSONEncoder(dates: .secondsSinceReferenceDate).encode(dates)
        #expect(try CompactJSONDecoder().decode([Date].self, from: text) == dates)
        #expect(try JSONDecoder().decode([Date].self, from: Data(text)) == dates)
        #expect(throws: DecodingError.self) { try CompactJSONDecoder().decode(Date.self, from: Array("true".utf8)) }
    }

    @Test func accountEventPayloadsRoundTrip() throws {
        let date = Date(timeIntervalSince1970: 1_795_958_985.125)
        let events: [AccountEvent] = [
            .sessionStarted(.init(sessionId: UUID(), refreshTokenHash: "h", authTime: date, amr: ["apple", "otp"], jkt: "j",
                                  secretKind: .firebaseTokens, installationId: nil, expiresAt: date, personal: PersonalData(customClaims: "{}"))),
            .signedIn(.init(provider: "apple", sessionId: UUID(), outcome: "returning")),
            .identityLinked(.init(provider: "google", uid: "1\"2", emailVerified: true,
                                  personal: PersonalData(email: "a@example.org", displayName: "Zoë ☃", photoURL: "https://x/y"))),
            .profileUpdated(.init(personal: PersonalData(), cleared: ["photoURL"], emailVerified: false)),
            .sessionRefreshed(.init(sessionId: UUID(), previousTokenHash: "a", refreshTokenHash: "b", generation: 41)),
            .mfaCodeRejected(.init(challengeId: UUID(), factorId: nil, method: .sms, attempt: 3, reason: "wrong_code")),
        ]
        for event in events {
            let stored = try AccountEventCodec.encode(event, userId: UUID(), id: UUID())
            let recorded = RecordedEvent(position: 1, transactionId: 1, stream: StreamName("user-x"), version: 1, id: stored.id,
                                         type: stored.type, schema: stored.schema, data: stored.data, metadata: EventMetadata(),
                                         userId: stored.userId, occurredAt: date)
            #expect(try AccountEventCodec.decode(recorded) == event)
        }
    }

    @Test(arguments: [
        // Wrong shapes and missing members.
        #"{"provider": "apple", "sessionId": "c86e950d-2311-46da-8eab-ba4945b68939"}"#,
        #"{"provider": 1, "sessionId": "c86e950d-2311-46da-8eab-ba4945b68939", "outcome": "x"}"#,
        #"{"provider": null, "sessionId": "c86e950d-2311-46da-8eab-ba4945b68939", "outcome": "x"}"#,
        #"{"provider": "a", "sessionId": "not-a-uuid", "outcome": "x"}"#,
        #"["provider"]"#, "null", "",
        // Malformed text.
        #"{"provider": "a", "sessionId": "c86e950d-2311-46da-8eab-ba4945b68939", "outcome": "x"} x"#,
        #"{"provider": "a" "outcome": "x"}"#, #"{"provider": "a",}"#, #"{"provider": 'a'}"#, #"{"a": 01}"#, #"{"a": 1.}"#,
        #"{"a": -}"#, #"{"a": tru}"#, #"{"a": "\x"}"#, #"{"a": "\ud834"}"#, #"{"a": "\udd1e\ud834"}"#, "{\"a\": \"\u{01}\"}",
        #"{"a": "unterminated}"#, String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
    ])
    func refusedAsJSONDecoderRefuses(text: String) {
        #expect(throws: DecodingError.self) { try CompactJSONDecoder().decode(AccountEvent.SignedIn.self, from: Data(text.utf8)) }
        expectSame(AccountEvent.SignedIn.self, text)
    }

    /// A name given twice keeps its first value by default (text Tether wrote), and is refused where requests
    /// are read, at any depth and among many members.
    @Test func aNameGivenTwiceIsRefusedWhereAsked() throws {
        let twice = Array(#"{"provider": "anonymous", "n": {"a": 1}, "provider": "apple"}"#.utf8)
        #expect(try CompactJSONDecoder().decode(JSONValue.self, from: twice) == ["provider": "anonymous", "n": ["a": 1]])
        let strict = CompactJSONDecoder(refusesDuplicateNames: true)
        #expect(throws: DecodingError.self) { try strict.decode(JSONValue.self, from: twice) }
        #expect(throws: DecodingError.self) { try strict.decode(JSONValue.self, from: Array(#"{"a": {"b": 1, "b": 2}}"#.utf8)) }
        let many = "{" + (0..<5_000).map { "\"m\($0)\": \($0)" }.joined(separator: ", ")
        #expect(throws: DecodingError.self) { try strict.decode(JSONValue.self, from: Array((many + ", \"m0\": 0}").utf8)) }
        #expect(try strict.decode(JSONValue.self, from: Array((many + "}").utf8)) != .null)
        // The same name in two objects is no duplicate.
        #expect(try strict.decode(JSONValue.self, from: Array(#"[{"a": 1}, {"a": 2}]"#.utf8)) == [["a": 1], ["a": 2]])
    }

    @Test func invalidUTF8IsRefused() {
        var bytes = Array(#"{"provider": "a"#.utf8)
        bytes += [0xC3, 0x28]
        bytes += Array(#"", "sessionId": "c86e950d-2311-46da-8eab-ba4945b68939", "outcome": "x"}"#.utf8)
        #expect(throws: DecodingError.self) { try CompactJSONDecoder().decode(AccountEvent.SignedIn.self, from: Data(bytes)) }
        #expect(throws: (any Error).self) { try Self.foundation.decode(AccountEvent.SignedIn.self, from: Data(bytes)) }
    }

    @Test func numbersAreReadExactlyOrRefused() {
        struct Numbers: Codable, Equatable { var small: Int8; var count: Int; var ratio: Double }
        expectSame(Numbers.self, #"{"small": 127, "count": 1e3, "ratio": 1}"#)
        expectSame(Numbers.self, #"{"small": 128, "count": 1, "ratio": 1}"#)
        expectSame(Numbers.self, #"{"small": 1.5, "count": 1, "ratio": 1}"#)
        expectSame(Numbers.self, #"{"small": 1, "count": 1, "ratio": "1"}"#)
        expectSame(Numbers.self, #"{"small": -0, "count": 2.0, "ratio": -2.5E+3}"#)
    }

    /// Request bodies hold free-form JSON (credentials, Parse objects): numbers come out as
    /// `JSONValue(from:)` made them through `JSONDecoder`, and a number beyond `Double` is refused.
    @Test func jsonValuesAreReadAsJSONDecoderReadsThem() throws {
        for number in ["0", "-0", "2", "2.0", "1e3", "-1E+2", "2.5", "1e-7", "9223372036854775807", "9223372036854775808",
                       "-9223372036854775809", "1.7976931348623157e308", "5e-324", "0.1"] {
            expectSame(JSONValue.self, #"{"n": \#(number), "list": [\#(number)]}"#)
            let decoded = try CompactJSONDecoder().decode(JSONValue.self, from: Data(number.utf8))
            let expected = try Self.foundation.decode(JSONValue.self, from: Data(number.utf8))
            // `==` on JSONValue tells `.int(2)` from `.double(2)`.
            #expect(decoded == expected, "\(number)")
        }
        for text in [#"{"n": 1e400}"#, #"[1, -1e400]"#, #"{"a": {"b": [1e309]}}"#] {
            #expect(throws: DecodingError.self) { try CompactJSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) }
            expectSame(JSONValue.self, text)
        }
        expectSame(JSONValue.self, #"{"a": 1, "a": "last", "b": {"c": [true, null, {}]}}"#)
    }

    /// The request bodies' problem details are made from the error's case and coding path: both decoders
    /// must give the same for the same body.
    @Test func requestBodyErrorsMatchJSONDecoders() {
        struct SignInBody: Decodable { var provider: String; var credential: JSONValue?; var limit: Int?; var ids: [UUID]? }
        let bodies = [
            #"{}"#, #"{"provider": 1}"#, #"{"provider": null}"#, #"{"provider": []}"#, #"[]"#, #""text""#, "3",
            #"{"provider": "a", "limit": "5"}"#,
            #"{"provider": "a", "limit": null, "ids": [null]}"#, #"{"provider": "a", "ids": ["x"]}"#, #"{"provider": "a", "ids": {}}"#,
            #"{"provider": "a""#, "{\"provider\": \"a\u{0}\"}",
        ]
        for body in bodies {
            let expected = Result { try Self.foundation.decode(SignInBody.self, from: Data(body.utf8)) }
            let decoded = Result { try CompactJSONDecoder().decode(SignInBody.self, from: Data(body.utf8)) }
            switch (expected, decoded) {
            case (.failure(let expected as DecodingError), .failure(let decoded as DecodingError)):
                #expect(Self.shape(of: decoded) == Self.shape(of: expected), "\(body)")
            default:
                Issue.record("JSONDecoder: \(expected); CompactJSONDecoder: \(decoded) for \(body)")
            }
        }
    }

    /// Members read straight from the parsed value (strings, Booleans, `Int`s, ids, dates, arrays of strings,
    /// required or optional) give what `JSONDecoder` gives: the value, nil for a missing or null optional, and
    /// for anything else the same error at the same member.
    @Test func membersReadStraightFromTheParsedValueMatchJSONDecoder() {
        struct Plain: Decodable, Equatable {
            var text: String; var flag: Bool; var count: Int; var id: UUID; var when: Date; var amr: [String]
            var maybeText: String?; var maybeFlag: Bool?; var maybeCount: Int?; var maybeId: UUID?; var maybeWhen: Date?
            var maybeAmr: [String]?
        }
        let required = #""text": "t", "flag": false, "count": 2, "id": "C86E950D-2311-46DA-8EAB-BA4945B68939", "when": "2026-11-29T13:29:45.5Z", "amr": ["a", "b"]"#
        var bodies = ["{\(required)}"]
        let values = [#""x""#, "true", "7", "2.0", "1.5", "1e30", "null", #"["p"]"#, "[]", #"[1]"#, #"["p", null]"#, "{}",
                      #""c86e950d-2311-46da-8eab-ba4945b68939""#, #""2026-11-29T13:29:45Z""#, #""2026-11-29""#]
        /// Where this decoder differs from `JSONDecoder` on purpose, or did before: dates written as numbers are
        /// read (the seconds of `Date`'s own encoding), a number that is no `Int` is refused at its member, and
        /// a required Boolean given null is `valueNotFound` (`JSONDecoder` says `typeMismatch`), and a required date
        /// given null is a `String` not found (`JSONDecoder` names `Date`).
        func differsAsBefore(_ name: String, _ value: String) -> Bool {
            (name.lowercased().hasSuffix("when") && Double(value) != nil) || (name.lowercased().hasSuffix("count") && ["1.5", "1e30"].contains(value))
                || (["flag", "when"].contains(name) && value == "null")
        }
        for name in ["maybeText", "maybeFlag", "maybeCount", "maybeId", "maybeWhen", "maybeAmr"] {
            bodies += values.filter { !differsAsBefore(name, $0) }.map { "{\(required), \"\(name)\": \($0)}" }
        }
        for name in ["text", "flag", "count", "id", "when", "amr"] {
            let others = required.split(separator: ", \"").filter { !$0.hasPrefix("\(name)\"") && !$0.hasPrefix("\"\(name)\"") }
            let rest = others.map { $0.hasPrefix("\"") ? String($0) : "\"" + $0 }.joined(separator: ", ")
            bodies.append("{\(rest)}")
            bodies += values.filter { !differsAsBefore(name, $0) }.map { "{\(rest), \"\(name)\": \($0)}" }
        }
        var decodedSome = 0
        for body in bodies {
            let expected = Result { try Self.foundation.decode(Plain.self, from: Data(body.utf8)) }
            let decoded = Result { try CompactJSONDecoder().decode(Plain.self, from: Data(body.utf8)) }
            switch (expected, decoded) {
            case (.success(let expected), .success(let decoded)):
                decodedSome += 1
                #expect(decoded == expected, "\(body)")
            case (.failure(let expected as DecodingError), .failure(let decoded as DecodingError)):
                #expect(Self.shape(of: decoded) == Self.shape(of: expected), "\(body)")
            default:
                Issue.record("JSONDecoder: \(expected); CompactJSONDecoder: \(decoded) for \(body)")
            }
        }
        #expect(decodedSome > 20 && decodedSome < bodies.count - 50, "\(decodedSome) of \(bodies.count) decoded")
    }

    /// Where `JSONDecoder` says less than it could, this decoder names the member: a number that is
    /// no integer, or beyond `Double`. (`JSONDecoder` calls the first invalid JSON at the top and the
    /// second a member that must be an object.)
    @Test func numbersThatDoNotFitAreRefusedWhereTheyAre() {
        struct Body: Decodable { var limit: Int?; var credential: JSONValue? }
        for (body, expected) in [
            (#"{"limit": 1.5}"#, "dataCorrupted at limit"), (#"{"limit": 1e30}"#, "dataCorrupted at limit"),
            (#"{"limit": -9223372036854775809}"#, "dataCorrupted at limit"),
            (#"{"credential": {"a": [0, {"n": 1e999}]}}"#, "dataCorrupted at credential/a/1/n"),
        ] {
            do {
                _ = try CompactJSONDecoder().decode(Body.self, from: Data(body.utf8))
                Issue.record("decoded \(body)")
            } catch let error as DecodingError {
                #expect(Self.shape(of: error) == expected, "\(body)")
            } catch {
                Issue.record("\(error)")
            }
            #expect(throws: DecodingError.self) { try Self.foundation.decode(Body.self, from: Data(body.utf8)) }
        }
    }

    @Test func aNameGivenTwiceKeepsItsFirstValue() {
        struct Body: Decodable, Equatable { var provider: String; var count: Int? }
        expectSame(Body.self, #"{"provider": "apple", "count": 1, "provider": "google", "count": "x"}"#)
        expectSame([String: Int].self, #"{"a": 1, "a": 2}"#)
        #expect((try? CompactJSONDecoder().decode(Body.self, from: Data(#"{"provider": "apple", "provider": 2}"#.utf8)))?.provider == "apple")
    }

    /// A decoding error's case, the type it names and its coding path.
    static func shape(of error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: "/")
        }
        switch error {
        case .keyNotFound(let key, let context): return "keyNotFound \(key.stringValue) at \(path(context))"
        case .typeMismatch(let type, let context): return "typeMismatch \(type) at \(path(context))"
        case .valueNotFound(let type, let context): return "valueNotFound \(type) at \(path(context))"
        case .dataCorrupted(let context): return "dataCorrupted at \(path(context))"
        @unknown default: return "unknown"
        }
    }

    @Test func errorsSayWhereAndWhat() throws {
        do {
            _ = try CompactJSONDecoder().decode(Everything.self, from: Data(Self.everything.replacingOccurrences(of: #""kind": "totp""#, with: #""kind": 3"#).utf8))
            Issue.record("decoded a number as an MFA method")
        } catch DecodingError.typeMismatch(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["nested", "kind"])
        }
        do {
            _ = try CompactJSONDecoder().decode(Everything.self, from: Data(Self.everything.replacingOccurrences(of: #""flag": true,"#, with: "").utf8))
            Issue.record("decoded without a required member")
        } catch DecodingError.keyNotFound(let key, _) {
            #expect(key.stringValue == "flag")
        }
        do {
            _ = try CompactJSONDecoder().decode(Everything.self, from: Data(Self.everything.replacingOccurrences(of: "[1, 2]", with: "[1, null]").utf8))
            Issue.record("decoded null as an Int")
        } catch DecodingError.valueNotFound(_, let context) {
            #expect(context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue } == ["list", "1", "1"])
        }
    }
}
