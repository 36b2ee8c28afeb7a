import Foundation
import Testing
@testable import TetherCore

/// What every command writes as text itself (EventText.swift) must be the bytes its `Encodable`
/// conformance gives through `CompactJSONEncoder`, as events were always written. A required member added
/// to one of these types and not to its writer fails here; an optional one only once a fixture sets it
/// (each type has one with every optional set).
@Suite("Event metadata and payloads written as text")
struct EventTextTests {
    static let payloads = CompactJSONEncoder(dates: .iso8601Milliseconds)
    static let id = UUID(uuidString: "6f1d2c7e-0b7a-4c1e-9d7e-3a1b2c3d4e5f")!
    static let when = Date(timeIntervalSince1970: 1_796_486_766.4567)

    static let metadata: [EventMetadata] = [
        EventMetadata(),
        EventMetadata(commandId: id),
        EventMetadata(actor: .anonymous),
        EventMetadata(userAgent: "Tether/1 \"quoted\" \\ \u{1}", surface: "v1"),
        EventMetadata(
            commandId: id, correlationId: UUID(), causationId: UUID(), actor: .user(UUID()), clientIP: "2001:db8::1",
            userAgent: "Zoë's phone ✓", surface: "parse"),
        EventMetadata(causationId: id, actor: .system("replay"), clientIP: "10.0.0.1"),
    ]

    @Test(arguments: metadata)
    func metadataIsWrittenAsItsEncoderWritesIt(metadata: EventMetadata) throws {
        #expect(String(decoding: metadata.jsonText, as: UTF8.self)
            == String(decoding: try CompactJSONEncoder(dates: .iso8601Seconds).encode(metadata), as: UTF8.self))
    }

    static let personal: [PersonalData?] = [
        nil, PersonalData(), PersonalData(customClaims: #"{"role":"admin"}"#),
        PersonalData(
            email: "a@b.c", displayName: "Ada", photoURL: "https://x/y", passwordHash: "scrypt$1", phoneNumber: "+441234",
            totpSecret: "JBSWY3DP", codeHash: "h", customClaims: "{}", providerToken: "t"),
    ]

    @Test(arguments: personal)
    func aSessionStartIsWrittenAsItsEncoderWritesIt(personal: PersonalData?) throws {
        for started in [
            AccountEvent.SessionStarted(
                sessionId: Self.id, refreshTokenHash: "ab12", authTime: Self.when, amr: ["apple", "otp"], jkt: nil,
                secretKind: .accessAndRefreshTokens, installationId: nil, expiresAt: nil, personal: personal),
            AccountEvent.SessionStarted(
                sessionId: UUID(), refreshTokenHash: "", authTime: Date(timeIntervalSince1970: 0), amr: [], jkt: "thumb-print",
                secretKind: .parseSessionToken, installationId: "inst \"1\"", expiresAt: Self.when.addingTimeInterval(86_400),
                personal: personal),
        ] {
            #expect(String(decoding: started.jsonText, as: UTF8.self) == String(decoding: try Self.payloads.encode(started), as: UTF8.self))
        }
    }

    @Test func aSignInAndARefreshAreWrittenAsTheirEncoderWritesThem() throws {
        let signedIn = AccountEvent.SignedIn(provider: "apple", sessionId: Self.id, outcome: "returning")
        #expect(signedIn.jsonText == (try Self.payloads.encode(signedIn)))
        let refreshed = AccountEvent.SessionRefreshed(sessionId: Self.id, previousTokenHash: "old", refreshTokenHash: "new", generation: 12)
        #expect(refreshed.jsonText == (try Self.payloads.encode(refreshed)))
        #expect(AccountEvent.SessionRefreshed(sessionId: Self.id, previousTokenHash: "", refreshTokenHash: "", generation: -1).jsonText
            == (try Self.payloads.encode(AccountEvent.SessionRefreshed(sessionId: Self.id, previousTokenHash: "", refreshTokenHash: "", generation: -1))))
    }

    /// A session's `amr`, stored as `jsonb` with each session, is written as the encoder wrote it.
    @Test func stringArraysAreWrittenAsTheEncoderWritesThem() throws {
        for strings: [String] in [[], ["apple"], ["pwd", "otp", "Zoë ✓ \u{1F600}", "\"q\" \\ / \u{1} \u{7F}", ""]] {
            #expect(JSONText.strings(strings) == Array(try Self.payloads.encode(strings)), "\(strings)")
        }
    }

    /// The codec stores what the writers write, and reads it back as the event it was (its times are stored
    /// to the millisecond).
    @Test func theCodecStoresTheWrittenTextAndReadsItBack() throws {
        let started = AccountEvent.sessionStarted(.init(
            sessionId: Self.id, refreshTokenHash: "ab12", authTime: Date(timeIntervalSince1970: 1_796_486_766), amr: ["apple"], jkt: nil,
            secretKind: .accessAndRefreshTokens, installationId: nil, expiresAt: nil, personal: nil))
        let stored = try AccountEventCodec.encode(started, userId: UUID(), id: UUID())
        guard case .sessionStarted(let payload) = started else { return }
        #expect(stored.data == (try Self.payloads.encodeData(payload)))
        let recorded = RecordedEvent(
            position: 1, transactionId: 1, stream: .user(UUID()), version: 1, id: stored.id, type: stored.type, schema: stored.schema,
            data: stored.data, metadata: EventMetadata(), userId: stored.userId, occurredAt: Self.when)
        #expect(try AccountEventCodec.decode(recorded) == started)
    }
}
