import Foundation
import TetherCore
import TetherJOSE
import TetherPostgres

/// Everything Tether holds about one person, as one JSON document: `GET /v1/admin/users/{id}/export`
/// and `tether export USER`.
///
/// `{"exportedAt", "userId", "erased", "profile", "events"}`: the profile is the user with identities,
/// sessions and factors as the admin API shows them (null once erased); the events are every event about
/// the person from every stream (their own, and the admin records of who looked at them or acted),
/// oldest first, each with its history line and its decrypted payload. No secret is exported: password
/// and code hashes, TOTP secrets, refresh-token hashes and recovery-code hashes are left out. For an
/// erased user the events remain, without personal data, which can no longer be read.
public struct UserExport: Sendable {
    /// Payload members that are secrets (or hashes of them), left out of an export.
    static let secretMembers: Set<String> = [
        "passwordHash", "totpSecret", "codeHash", "codeHashes", "refreshTokenHash", "previousTokenHash", "keyHash", "providerToken",
    ]

    let database: PostgresClient
    let store: PostgresEventStore

    public init(database: PostgresClient) {
        self.database = database
        self.store = PostgresEventStore(client: database, upcasters: AccountEventCodec.upcasters)
    }

    /// The document for `userId`; nil when no user has that id and their own stream has no event (records of
    /// requests about the id do not count: ``AdminUserDirectory/knows(_:)``).
    public func document(_ userId: UUID, now: Date = Date()) async throws -> JSONValue? {
        var events: [RecordedEvent] = []
        var after: Int64 = 0
        while true {
            let page = try await store.readUser(userId, after: after, limit: 1000)
            events += page
            guard let last = page.last, page.count == 1000 else { break }
            after = last.position
        }
        let directory = AdminUserDirectory(database: database)
        // A user row makes the id known; only without one is the user's stream asked.
        let exists = try await directory.exists(userId)
        if !exists { guard try await directory.knows(userId) else { return nil } }
        let profile: JSONValue = exists ? try await directory.detail(userId) : .null
        let erased = events.contains { $0.type == "UserErased" }
        return .object([
            "exportedAt": .string(ISO8601Milliseconds.format(now)), "userId": .string(userId.lowercasedText), "erased": .bool(erased),
            "profile": erased ? .null : profile, "events": .array(events.map(Self.entry)),
        ])
    }

    /// One event: its history line's members, and `data`, its payload without secrets.
    static func entry(_ event: RecordedEvent) -> JSONValue {
        guard case .object(var members) = HistoryEntry(event).json else { return .null }
        members["data"] = (try? JSONValue(parsing: Array(event.data))).map { data in
            guard case .object(let payload) = data, event.type == "IdentityLinked" || event.type == "IdentityUnlinked" else { return exported(data) }
            return exported(.object(SecretUID.shown(payload)))
        } ?? .null
        return .object(members)
    }

    /// A payload as exported: without its secrets, and its ids (members named `…Id` holding a UUID) in
    /// lowercase as the API writes every id, where payloads hold Swift's uppercase form.
    static func exported(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let members):
            .object(Dictionary(uniqueKeysWithValues: members.filter { !secretMembers.contains($0.key) }.map { name, member in
                if name.hasSuffix("Id"), case .string(let text) = member, let id = UUID(text: text) {
                    (name, .string(id.lowercasedText))
                } else {
                    (name, exported(member))
                }
            }))
        case .array(let items):
            .array(items.map(exported))
        default:
            value
        }
    }
}
