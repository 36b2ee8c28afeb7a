import Foundation
import Testing
import TetherCore
import TetherCrypto
import TetherJOSE
@testable import TetherPostgres

/// Sealing and opening keep a payload whole: what is opened with the key is what was appended.
@Suite("Personal data vault")
struct PersonalDataVaultTests {
    private let key = SecureRandom.bytes(count: 32)

    private func recorded(_ event: NewEvent, stored: (data: Data, metadata: EventMetadata)) -> RecordedEvent {
        RecordedEvent(
            position: 1, transactionId: 1, stream: StreamName("user-x"), version: 1, id: event.id, type: event.type,
            schema: 1, data: stored.data, metadata: stored.metadata, userId: event.userId, occurredAt: Date())
    }

    @Test func aSealedPayloadOpensToWhatWasAppended() throws {
        let payload = #"{"provider":"apple","uid":"001.zoë","emailVerified":true,"attempt":3,"ratio":0.25,"personal":{"email":"zoë@example.com","displayName":"李 \"Q\"\n","photoURL":"https://e/p.png"},"amr":["apple","mfa"]}"#
        let event = NewEvent(type: "IdentityLinked", data: Data(payload.utf8), userId: UUID())
        let metadata = EventMetadata(clientIP: "192.0.2.1", userAgent: "Agent/1", surface: "v1")
        let stored = try PersonalDataVault.seal(event, metadata: metadata, key: key)
        let text = String(decoding: stored.data, as: UTF8.self)
        #expect(!text.contains("zoë") && !text.contains("001.") && !text.contains("李"), "nothing personal in clear: \(text)")
        #expect(stored.metadata.clientIP == nil && stored.metadata.userAgent == nil)
        let opened = try PersonalDataVault.open(recorded(event, stored: stored), key: key)
        #expect(try JOSEValue(parsing: opened.data) == JOSEValue(parsing: Data(payload.utf8)))
        #expect(opened.metadata.clientIP == "192.0.2.1" && opened.metadata.userAgent == "Agent/1")
    }

    /// What the log holds keeps opening: a part sealed as every event was, authenticating the text
    /// `tether personal data <event id>`, opens into the payload and the metadata.
    @Test func aPartSealedAuthenticatingTheEventsIdTextOpens() throws {
        let event = NewEvent(type: "UserRegistered", data: Data(), userId: UUID())
        let box = Array(#"{"personal":{"email":"ada@example.com"},"clientIP":"192.0.2.7"}"#.utf8)
        let sealed = try AESGCM.seal(box, key: key, authenticating: Array("tether personal data \(event.id.uuidString.lowercased())".utf8))
        let data = Data(#"{"\#(PersonalDataVault.sealedMember)":"\#(Data(sealed.combined).base64EncodedString())"}"#.utf8)
        let opened = try PersonalDataVault.open(recorded(event, stored: (data, EventMetadata())), key: key)
        #expect(try JOSEValue(parsing: opened.data) == JOSEValue(parsing: Data(#"{"personal":{"email":"ada@example.com"}}"#.utf8)))
        #expect(opened.metadata.clientIP == "192.0.2.7")
    }

    @Test func withoutTheKeyAPayloadReadsAsErased() throws {
        let event = NewEvent(type: "IdentityLinked", data: Data(#"{"uid":"001.a","personal":{"email":"a@b.c"}}"#.utf8), userId: UUID())
        let stored = try PersonalDataVault.seal(event, metadata: EventMetadata(), key: key)
        let opened = try PersonalDataVault.open(recorded(event, stored: stored), key: nil)
        let object = try JOSEObject(parsing: opened.data)
        #expect(object["personal"] == .object(JOSEObject()))
        #expect(object["uid"] == .string(ExternalIdentity.erasedUID))
        #expect(object[PersonalDataVault.erasedMarker] == .bool(true))
    }

    /// A payload with nothing personal in it gets its sealed member added to its text (the client's address
    /// alone is boxed); it opens to what was appended, as one sealed by parsing does. Payloads that name
    /// `personal`, spell a name with an escape, or are about an identifier still take the parsing path.
    @Test(arguments: [
        (#"{"outcome":"returning","provider":"apple","sessionId":"6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F"}"#, "SignedIn", true),
        ("{}", "SessionsRevoked", true),
        ("{ }", "SessionsRevoked", true),
        (#"{"amr":["apple"],"personal":{"customClaims":"{}"},"sessionId":"x"}"#, "SessionStarted", false),
        (#"{"zNote":"a \"personal\" remark"}"#, "ProfileUpdated", true),
        (#"{"zKind":"personal"}"#, "ProfileUpdated", false),
        (#"{"\u0070ersonal":{"email":"a@b.c"}}"#, "ProfileUpdated", false),
        (#"{"uid":"001.a","provider":"apple"}"#, "IdentityUnlinked", false),
    ] as [(String, String, Bool)])
    func aPayloadWithNothingPersonalIsSealedWithoutParsingIt(payload: String, type: String, takesTheText: Bool) throws {
        let event = NewEvent(type: type, data: Data(payload.utf8), userId: UUID())
        for metadata in [EventMetadata(clientIP: "192.0.2.1", userAgent: "Agent \"1\"", surface: "v1"), EventMetadata(surface: "v1")] {
            for expiringKey in [nil, "2026-12-05"] as [String?] {
                let stored = try PersonalDataVault.seal(event, metadata: metadata, key: key, expiringKey: expiringKey)
                let text = String(decoding: stored.data, as: UTF8.self)
                #expect(!text.contains("192.0.2.1") && !text.contains("Agent"), "\(text)")
                #expect(stored.metadata.clientIP == nil && stored.metadata.userAgent == nil && stored.metadata.surface == "v1")
                let object = try JOSEObject(parsing: stored.data), appended = try JOSEObject(parsing: event.data)
                if metadata.clientIP != nil || appended["personal"] != nil || (type == "IdentityUnlinked" && appended["uid"] != nil) {
                    #expect(object[PersonalDataVault.sealedMember] != nil, "\(text)")
                    #expect(object[PersonalDataVault.expiringKeyMember] == expiringKey.map(JOSEValue.string))
                } else {
                    #expect(stored.data == event.data, "nothing to seal: the payload as it was")
                }
                // Added to the text, the sealed member follows the payload's own text, as it was.
                if takesTheText { #expect(text.hasPrefix(String(payload.dropLast())), "\(text)") }
                let opened = try PersonalDataVault.open(recorded(event, stored: stored), key: key)
                #expect(try JOSEValue(parsing: opened.data) == JOSEValue(parsing: event.data))
                #expect(opened.metadata == metadata)
            }
        }
    }
}
