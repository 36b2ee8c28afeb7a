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
}
