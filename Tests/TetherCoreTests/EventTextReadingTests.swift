import Foundation
import Testing
@testable import TetherCore

/// A sign-in's, a refresh's and a sign-out's payloads are read from their text without a `Decoder` (``JSONObjectReader``);
/// whatever that reader takes must be what ``CompactJSONDecoder`` makes of the same text, and whatever it gives
/// up on, the codec still decodes (or refuses) as the decoder does.
@Suite("Event payloads read from their text")
struct EventTextReadingTests {
    static let id = UUID(uuidString: "6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F")!

    /// Each text, whether the reader should take it, and how the decoder and the codec read it.
    static func check<T: Decodable & Equatable>(
        _ type: T.Type, _ eventType: String, _ text: String, taken: Bool, read: (Data) -> T?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        check(type, eventType, Data(text.utf8), taken: taken, read: read, sourceLocation: sourceLocation)
    }

    static func check<T: Decodable & Equatable>(
        _ type: T.Type, _ eventType: String, _ data: Data, taken: Bool, read: (Data) -> T?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let text = String(decoding: data, as: UTF8.self)
        let fast = read(data)
        let decoded = Result { try CompactJSONDecoder().decode(T.self, from: data) }
        #expect((fast != nil) == taken, "reader \(taken ? "refused" : "took") \(text)", sourceLocation: sourceLocation)
        if let fast {
            #expect((try? decoded.get()) == fast, "\(text): reader \(fast), decoder \(decoded)", sourceLocation: sourceLocation)
        }
        let recorded = RecordedEvent(
            position: 1, transactionId: 1, stream: .user(UUID()), version: 1, id: UUID(), type: eventType, schema: 2, data: data,
            metadata: EventMetadata(), userId: UUID(), occurredAt: Date())
        let viaCodec = Result { try AccountEventCodec.decode(recorded) }
        switch (decoded, viaCodec) {
        case (.success(let value), .success(let event?)):
            let payload: T? = switch event {
            case .signedIn(let payload): payload as? T
            case .sessionStarted(let payload): payload as? T
            case .sessionRefreshed(let payload): payload as? T
            case .sessionEnded(let payload): payload as? T
            default: nil
            }
            #expect(payload == value, "\(text): codec \(event), decoder \(value)", sourceLocation: sourceLocation)
        case (.failure, .failure): break
        default: Issue.record("\(text): decoder \(decoded), codec \(viaCodec)", sourceLocation: sourceLocation)
        }
    }

    static func started(_ text: String, taken: Bool, sourceLocation: SourceLocation = #_sourceLocation) {
        check(AccountEvent.SessionStarted.self, "SessionStarted", text, taken: taken, read: AccountEvent.SessionStarted.init(plainJSON:),
              sourceLocation: sourceLocation)
    }

    static let plainStart = #"{"amr":["apple"],"authTime":"2026-12-05T10:00:00.123Z","refreshTokenHash":"ab12","secretKind":"access_and_refresh_tokens","sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F"}"#

    /// `plainStart` with `old` replaced by `new`.
    static func start(_ old: String, _ new: String) -> String {
        precondition(plainStart.contains(old))
        return plainStart.replacingOccurrences(of: old, with: new)
    }

    @Test func whatTheWritersWriteIsReadBackAsTheDecoderReadsIt() throws {
        let when = Date(timeIntervalSince1970: 1_796_486_766.4567)
        for started in [
            AccountEvent.SessionStarted(
                sessionId: Self.id, refreshTokenHash: "ab12", authTime: when, amr: ["apple", "otp"], jkt: nil,
                secretKind: .accessAndRefreshTokens, installationId: nil, expiresAt: nil, personal: nil),
            AccountEvent.SessionStarted(
                sessionId: UUID(), refreshTokenHash: "", authTime: Date(timeIntervalSince1970: 0), amr: [], jkt: "thumb-print",
                secretKind: .parseSessionToken, installationId: "inst \"1\" \\ é \u{1}", expiresAt: when.addingTimeInterval(86_400),
                personal: nil),
            AccountEvent.SessionStarted(
                sessionId: UUID(), refreshTokenHash: "ff", authTime: when, amr: ["pwd", "Zoë ✓", "\u{1F600}"], jkt: "j",
                secretKind: .firebaseTokens, installationId: nil, expiresAt: nil, personal: nil),
        ] {
            Self.started(String(decoding: started.jsonText, as: UTF8.self), taken: true)
        }
        // Personal data (sealed, in the log) is left to the decoder.
        let withClaims = AccountEvent.SessionStarted(
            sessionId: Self.id, refreshTokenHash: "ab12", authTime: when, amr: ["apple"], jkt: nil, secretKind: .accessAndRefreshTokens,
            installationId: nil, expiresAt: nil, personal: PersonalData(customClaims: #"{"role":"admin"}"#))
        Self.started(String(decoding: withClaims.jsonText, as: UTF8.self), taken: false)

        for signedIn in [
            AccountEvent.SignedIn(provider: "apple", sessionId: Self.id, outcome: "returning"),
            AccountEvent.SignedIn(provider: "face\"book", sessionId: UUID(), outcome: ""),
        ] {
            Self.check(AccountEvent.SignedIn.self, "SignedIn", String(decoding: signedIn.jsonText, as: UTF8.self), taken: true,
                       read: AccountEvent.SignedIn.init(plainJSON:))
        }
        for generation in [0, 1, -1, Int.max, Int.min] {
            let refreshed = AccountEvent.SessionRefreshed(sessionId: UUID(), previousTokenHash: "old", refreshTokenHash: "new", generation: generation)
            Self.check(AccountEvent.SessionRefreshed.self, "SessionRefreshed", String(decoding: refreshed.jsonText, as: UTF8.self), taken: true,
                       read: AccountEvent.SessionRefreshed.init(plainJSON:))
        }
    }

    @Test func textInAnyOtherFormMeansWhatTheDecoderMakesOfIt() {
        Self.started(Self.plainStart, taken: true)
        // Read by the reader, as by the decoder.
        Self.started(" \n{ \"amr\" : [ \"apple\" , \"otp\" ] ,\t\"authTime\":\"2026-12-05T10:00:00Z\", \"refreshTokenHash\" : \"ab12\", "
            + "\"secretKind\":\"parse_session_token\",\"sessionId\":\"6f1d2c7e-0b7a-4c1e-9d7e-3a1b2c3d4e5f\" } \r\n", taken: true)
        Self.started(#"{"sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F","secretKind":"firebase_tokens","refreshTokenHash":"a\"b\u00e9\ud83d\ude00","authTime":"2026-12-05T11:00:00.5+01:00","amr":[]}"#, taken: true)
        Self.started(Self.start(#""amr""#, #""extra":{"a":[1,-2.5e3,{"b":null}],"c":"\u00e9"},"amr""#), taken: true)
        Self.started(Self.start(#""amr""#, #""jkt":null,"installationId":null,"expiresAt":null,"personal":null,"amr""#), taken: true)
        Self.started(Self.start(#""amr""#, #""jkt":"t","installationId":"i","expiresAt":"2027-01-01T00:00:00.000Z","amr""#), taken: true)
        // Left to the decoder, which reads them (the first of a name given twice).
        Self.started(Self.start(#""amr""#, #""sessionId":"00000000-0000-4000-8000-000000000001","amr""#), taken: false)
        Self.started(Self.start(#""amr""#, #""jkt":"a","jkt":"b","amr""#), taken: false)
        Self.started(Self.start(#""amr""#, #""\u0061mr""#), taken: false)
        Self.started(Self.start(#""amr""#, #""é":1,"amr""#), taken: false)
        Self.started(Self.start(#""6F1D2C7E"#, #""\u0036F1D2C7E"#), taken: false)
        Self.started(Self.start(#""2026-12-05T10:00:00.123Z""#, "815569200.5"), taken: false)
        Self.started(Self.start(#""amr""#, #""personal":{"email":"a@b.c"},"amr""#), taken: false)
        // Refused by both.
        Self.started(Self.start(#""amr""#, #""sessionId":"the first of two, and no id","amr""#), taken: false)
        Self.started(Self.start(#""2026-12-05T10:00:00.123Z""#, #""yesterday""#), taken: false)
        Self.started(Self.start(#""2026-12-05T10:00:00.123Z""#, #""2026-12-05T10:00:00""#), taken: false)
        Self.started(Self.start(#""6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F""#, #""6F1D2C7E""#), taken: false)
        Self.started(Self.start(#""access_and_refresh_tokens""#, #""cookies""#), taken: false)
        Self.started(Self.start(#"["apple"]"#, #"["apple",1]"#), taken: false)
        Self.started(Self.start(#"["apple"]"#, #""apple""#), taken: false)
        Self.started(Self.start(#"["apple"]"#, "null"), taken: false)
        Self.started(Self.start(#""ab12""#, "12"), taken: false)
        Self.started(Self.start(#","refreshTokenHash":"ab12""#, ""), taken: false)
        Self.started(Self.start(#""amr""#, #""extra":[1,],"amr""#), taken: false)
        Self.started(Self.start(#""amr""#, #""extra":01,"amr""#), taken: false)
        Self.started(Self.plainStart + " x", taken: false)
        Self.started(Self.plainStart + "}", taken: false)
        Self.started(String(Self.plainStart.dropLast()) + ",}", taken: false)
        Self.started(String(Self.plainStart.dropLast()), taken: false)
        Self.started("[" + Self.plainStart + "]", taken: false)
        Self.started("{}", taken: false)
        Self.started("", taken: false)
        Self.started(Self.start(#""ab12""#, "\"a\u{1}b\""), taken: false)
        Self.started(Self.start(#""ab12""#, "\"a\u{7F}é\u{FFFD}b\""), taken: true)
        var invalidUTF8 = Data(Self.start(#""ab12""#, "\"aXb\"").utf8)
        invalidUTF8[invalidUTF8.firstIndex(of: UInt8(ascii: "X"))!] = 0xFF
        Self.check(AccountEvent.SessionStarted.self, "SessionStarted", invalidUTF8, taken: false, read: AccountEvent.SessionStarted.init(plainJSON:))
    }

    /// The decoder's parser refuses nesting deeper than 512, counting the payload's object as one: an unknown
    /// member's value is checked to the same depth.
    @Test func anUnknownMembersNestingIsBoundedAsTheDecoderBoundsIt() {
        for depth in [510, 511, 512] {
            let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            Self.started(Self.start(#""amr""#, #""extra":"# + nested + #","amr""#), taken: depth <= 511)
        }
    }

    @Test func aSignInsARefreshsAndASignOutsTextsOfOtherFormsMeanWhatTheDecoderMakesOfThem() throws {
        func signedIn(_ text: String, taken: Bool, sourceLocation: SourceLocation = #_sourceLocation) {
            Self.check(AccountEvent.SignedIn.self, "SignedIn", text, taken: taken, read: AccountEvent.SignedIn.init(plainJSON:),
                       sourceLocation: sourceLocation)
        }
        func refreshed(_ generation: String, taken: Bool, sourceLocation: SourceLocation = #_sourceLocation) {
            Self.check(
                AccountEvent.SessionRefreshed.self, "SessionRefreshed",
                #"{"generation":"# + generation + #","previousTokenHash":"a","refreshTokenHash":"b","sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F"}"#,
                taken: taken, read: AccountEvent.SessionRefreshed.init(plainJSON:), sourceLocation: sourceLocation)
        }
        signedIn(#"{"provider":"apple","outcome":"new_user","sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F","v":true}"#, taken: true)
        signedIn(#"{"provider":"apple","outcome":null,"sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F"}"#, taken: false)
        signedIn(#"{"provider":"apple","sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F"}"#, taken: false)
        signedIn(#"{"provider":"apple","outcome":"x","sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F","provider":"google"}"#, taken: false)
        refreshed("7", taken: true)
        refreshed("-0", taken: true)
        refreshed("2.0", taken: true)
        refreshed("1e3", taken: true)
        refreshed("2.5", taken: false)
        refreshed("9223372036854775808", taken: false)
        refreshed("1e400", taken: false)
        refreshed("\"7\"", taken: false)
        refreshed("true", taken: false)
        refreshed("-", taken: false)

        func ended(_ text: String, taken: Bool, sourceLocation: SourceLocation = #_sourceLocation) {
            Self.check(AccountEvent.SessionEnded.self, "SessionEnded", text, taken: taken, read: AccountEvent.SessionEnded.init(plainJSON:),
                       sourceLocation: sourceLocation)
        }
        let signOut = AccountEvent.SessionEnded(sessionId: Self.id, reason: "sign_out")
        ended(String(decoding: try CompactJSONEncoder(dates: .iso8601Milliseconds).encode(signOut), as: UTF8.self), taken: true)
        ended(#"{ "sessionId" : "6f1d2c7e-0b7a-4c1e-9d7e-3a1b2c3d4e5f", "reason" : "reuse_detected", "by" : {"x": [null]} }"#, taken: true)
        ended(#"{"reason":"sign_out"}"#, taken: false)
        ended(#"{"reason":null,"sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F"}"#, taken: false)
        ended(#"{"reason":"a","reason":"b","sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F"}"#, taken: false)
    }
}
