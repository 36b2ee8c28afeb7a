import Foundation
import Testing
import TetherCore

/// Admin events are stored as `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` wrote them
/// before the codec moved to `CompactJSONEncoder`: the same bytes, and they read back as themselves.
@Suite("Admin events' stored payloads")
struct AdminEventCodecTests {
    static let id = UUID(uuidString: "6f1d2c7e-0b7a-4c1e-9d7e-3a1b2c3d4e5f")!
    static let awkward = "ada/lovelace \"quoted\" \\ \u{1} Zoë ✓ </script>"

    static let events: [AdminEvent] = [
        .keyCreated(.init(keyId: id, name: awkward, role: "support", keyHash: "ab12")),
        .keyCreated(.init(keyId: id, name: nil, role: "admin", keyHash: "ab12")),
        .keyRevoked(.init(keyId: id)),
        .userViewed(.init(userId: id, status: 200)),
        .userViewed(.init(userId: nil, status: 400)),
        .usersSearched(.init(provider: "apple", limit: 50, resultCount: 3, status: 200,
                             personal: .init(email: "a@b.c", uid: awkward, q: "ada lovelace"))),
        .usersSearched(.init(provider: nil, limit: nil, resultCount: nil, status: 400, personal: .init())),
        .historyViewed(.init(userId: id, after: 9_007_199_254_740_993, limit: 500, returned: 50, status: 200)),
        .historyViewed(.init(userId: nil, after: nil, limit: nil, returned: nil, status: 404)),
        .actionRequested(.init(userId: id, action: "revoke-sessions", reason: awkward, status: 200)),
        .actionRequested(.init(userId: id, action: "end-session", sessionId: id, reason: nil, status: 404)),
        .eventsRead(.init(userId: id, after: "12-34", types: ["user.*", "session.started"], returned: 7, status: 200)),
        .eventsRead(.init(userId: nil, after: nil, types: nil, returned: nil, status: 401)),
    ]

    @Test(arguments: events)
    func aPayloadIsStoredAsFoundationsEncoderWroteIt(event: AdminEvent) throws {
        let foundation = JSONEncoder()
        foundation.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let expected: Data = switch event {
        case .keyCreated(let payload): try foundation.encode(payload)
        case .keyRevoked(let payload): try foundation.encode(payload)
        case .userViewed(let payload): try foundation.encode(payload)
        case .usersSearched(let payload): try foundation.encode(payload)
        case .historyViewed(let payload): try foundation.encode(payload)
        case .actionRequested(let payload): try foundation.encode(payload)
        case .eventsRead(let payload): try foundation.encode(payload)
        }
        let stored = try AdminEventCodec.encode(event, id: Self.id)
        #expect(String(decoding: stored.data, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
        #expect(stored.type == event.type && stored.userId == event.userId)
        #expect(AdminEvent.types.contains(event.type), "every admin event's type is among the admin types")
        let recorded = RecordedEvent(
            position: 1, transactionId: 1, stream: .adminKey(Self.id), version: 1, id: Self.id, type: stored.type,
            schema: stored.schema, data: stored.data, metadata: EventMetadata(), userId: stored.userId, occurredAt: Date())
        #expect(try AdminEventCodec.decode(recorded) == event)
    }

    /// PostgreSQL's jsonb refuses an escaped NUL: a record quoting one (a refused request's cursor or path id) was
    /// lost, and the read it recorded answered 500. NUL is stored as U+FFFD; a backslash before `u0000` is text.
    @Test func aNULIsStoredAsTheReplacementCharacter() throws {
        let quoted = AdminEvent.eventsRead(.init(userId: nil, after: "1\u{0}2 \\u0000 \\\u{0}", types: ["\u{0}"], returned: nil, status: 400))
        let text = String(decoding: try AdminEventCodec.encode(quoted, id: Self.id).data, as: UTF8.self)
        #expect(!text.replacingOccurrences(of: #"\\"#, with: "").contains(#"\u0000"#), "\(text)")
        let read = try JSONDecoder().decode(AdminEvent.EventsRead.self, from: Data(text.utf8))
        #expect(read.after == "1\u{FFFD}2 \\u0000 \\\u{FFFD}" && read.types == ["\u{FFFD}"], "\(text)")
    }
}
