import Foundation
import Testing
@testable import TetherCore

@Suite("CompactJSONEncoder writes what JSONEncoder writes")
struct CompactJSONEncoderTests {
    /// Foundation's encoder as Tether configured it for event payloads (`milliseconds`) and for
    /// metadata and HTTP bodies (`.iso8601`).
    static func foundation(_ dates: CompactJSONEncoder.DateFormat) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        switch dates {
        case .iso8601Seconds: encoder.dateEncodingStrategy = .iso8601
        case .iso8601Milliseconds:
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.singleValueContainer()
                try container.encode(ISO8601Milliseconds.format(date))
            }
        case .secondsSinceReferenceDate: encoder.dateEncodingStrategy = .deferredToDate
        }
        return encoder
    }

    func expectSame<T: Encodable>(_ value: T, _ dates: CompactJSONEncoder.DateFormat = .iso8601Milliseconds,
                                  sourceLocation: SourceLocation = #_sourceLocation) throws {
        let expected = String(decoding: try Self.foundation(dates).encode(value), as: UTF8.self)
        let written = String(decoding: try CompactJSONEncoder(dates: dates).encode(value), as: UTF8.self)
        #expect(written == expected, sourceLocation: sourceLocation)
    }

    static let awkward = "Zoë \"quoted\" back\\slash /path\n\t\r\u{08}\u{0C}\u{01}\u{1F} ☃ 𝄞 </script>"

    @Test func accountEventPayloads() throws {
        let date = Date(timeIntervalSince1970: 1_795_958_985.123_456)
        let personal = PersonalData(
            email: "ada@example.org", displayName: Self.awkward, photoURL: "https://example.org/a/b.png?x=1&y=2",
            passwordHash: "$scrypt$ln=15$abc", phoneNumber: "+15555550100", customClaims: #"{"role":"admin"}"#)
        try expectSame(AccountEvent.SessionStarted(
            sessionId: UUID(), refreshTokenHash: String(repeating: "ab", count: 32), authTime: date, amr: ["apple", "otp"],
            jkt: "thumb", secretKind: .parseSessionToken, installationId: "inst", expiresAt: date.addingTimeInterval(0.0004),
            personal: PersonalData(customClaims: "{}")))
        try expectSame(AccountEvent.SessionStarted(
            sessionId: UUID(), refreshTokenHash: "h", authTime: date, amr: [], jkt: nil, secretKind: .accessAndRefreshTokens,
            installationId: nil, expiresAt: nil, personal: nil))
        try expectSame(AccountEvent.SignedIn(provider: "apple", sessionId: UUID(), outcome: "returning"))
        try expectSame(AccountEvent.UserRegistered(userId: UUID(), emailVerified: true, personal: personal))
        try expectSame(AccountEvent.IdentityLinked(provider: "facebook", uid: "10\u{0}2", emailVerified: false, personal: PersonalData()))
        try expectSame(AccountEvent.ProfileUpdated(personal: personal, cleared: ["displayName", "photoURL"], emailVerified: nil))
        try expectSame(AccountEvent.SessionRefreshed(sessionId: UUID(), previousTokenHash: "a", refreshTokenHash: "b", generation: Int.max))
        try expectSame(AccountEvent.SessionsRevoked(validSince: Date(timeIntervalSince1970: -12_345.678_9)))
        try expectSame(AccountEvent.UserStatusChanged(reason: nil))
        try expectSame(EventMetadata(
            commandId: UUID(), correlationId: UUID(), causationId: nil, actor: .user(UUID()), clientIP: "2001:db8::1",
            userAgent: Self.awkward, surface: "v1"), .iso8601Seconds)
    }

    struct Scalars: Encodable {
        var doubles: [Double] = [0, -0.0, 0.1, 1.5, 5, 1e21, 1e-7, -123_456.789, Double.greatestFiniteMagnitude, 2.5e-308]
        var floats: [Float] = [0.1, 3, -2.75]
        var ints: [Int] = [0, -1, Int.min, Int.max]
        var small: [Int8] = [Int8.min, Int8.max]
        var unsigned: [UInt64] = [0, UInt64.max]
        var flags: [Bool] = [true, false]
        var missing: String? = nil
        var present: String? = "here"
        var nested: [[String]] = [[], ["a"], ["b", "c"]]
        var map: [String: Int] = ["b": 2, "a": 1, "B": 3, "aa": 4, "é": 5, "": 6]
        var dates: [Date] = [Date(timeIntervalSince1970: 0.9999), Date(timeIntervalSince1970: -0.5), Date(timeIntervalSince1970: 1_795_958_985.5)]
        var url = URL(string: "https://example.org/a b?q=é")!
        var data = Data([0, 1, 2, 250, 251, 252, 253, 254, 255])
        var json: JSONValue = ["z": [1, 2.5, "x", nil, true], "a": ["nested": "/"]]
        var uuid = UUID()
        var optionalDate: Date? = Date(timeIntervalSince1970: 86_399.9996)
    }

    @Test func scalarsCollectionsAndFoundationTypes() throws {
        try expectSame(Scalars(), .iso8601Milliseconds)
        try expectSame(Scalars(), .iso8601Seconds)
        try expectSame(Scalars(), .secondsSinceReferenceDate)
        try expectSame([Scalars(), Scalars()], .iso8601Seconds)
        try expectSame("top-level /string/", .iso8601Seconds)
        try expectSame(Optional<Int>.none, .iso8601Seconds)
        try expectSame([String: [String: Double]](), .iso8601Seconds)
    }

    /// Hand-written `encode(to:)` forms: nested containers, a super encoder, a key written twice.
    struct HandWritten: Encodable {
        enum Keys: String, CodingKey { case zeta, alpha, inner, list, parent }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode("first", forKey: .zeta)
            try container.encodeNil(forKey: .alpha)
            var inner = container.nestedContainer(keyedBy: Keys.self, forKey: .inner)
            try inner.encode(1, forKey: .list)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encode(true)
            try list.encodeNil()
            var deeper = list.nestedContainer(keyedBy: Keys.self)
            try deeper.encode(2.5, forKey: .alpha)
            var row = list.nestedUnkeyedContainer()
            try row.encode("x")
            try Scalars.Tiny().encode(to: container.superEncoder(forKey: .parent))
            try container.encode("second", forKey: .zeta)
        }
    }

    @Test func handWrittenContainers() throws {
        try expectSame(HandWritten())
    }

    @Test func nonFiniteNumbersAndEmptyValuesThrowAsInJSONEncoder() {
        struct Empty: Encodable { func encode(to encoder: any Encoder) throws {} }
        for value in [Double.nan, Double.infinity] {
            #expect(throws: EncodingError.self) { try JSONEncoder().encode([value]) }
            #expect(throws: EncodingError.self) { try CompactJSONEncoder(dates: .iso8601Seconds).encode([value]) }
        }
        #expect(throws: EncodingError.self) { try CompactJSONEncoder(dates: .iso8601Seconds).encode(Empty()) }
        #expect(throws: EncodingError.self) { try CompactJSONEncoder(dates: .iso8601Seconds).encode(["a": JSONValue.double(.nan)]) }
    }
}

extension CompactJSONEncoderTests.Scalars {
    struct Tiny: Encodable { var b = 1; var a = "x" }
}
