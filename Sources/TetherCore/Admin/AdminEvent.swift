import Foundation

/// What the support and admin tools record, in the `admin-key-<id>` stream of the key involved.
///
/// Key lifecycle events (`AdminKeyCreated`, `AdminKeyRevoked`) are projected into
/// `admin_keys`. Every request made with a key is recorded too, with the event's
/// `user_id` set to the user it concerned, so that a user's history shows who looked
/// at them and when. Searches record their criteria, never the people they found.
public enum AdminEvent: Sendable, Hashable {
    case keyCreated(KeyCreated)
    case keyRevoked(KeyRevoked)
    case userViewed(UserViewed)
    case usersSearched(UsersSearched)
    case historyViewed(HistoryViewed)
    case actionRequested(ActionRequested)
    case eventsRead(EventsRead)

    /// An admin key came into being (`tether admin-keys create`); only its hash is kept.
    public struct KeyCreated: Codable, Sendable, Hashable {
        public var keyId: UUID
        /// The operator's label for the key (who or what uses it).
        public var name: String?
        /// `support` or `admin`.
        public var role: String
        /// SHA-256 (hex) of the key.
        public var keyHash: String

        public init(keyId: UUID, name: String?, role: String, keyHash: String) {
            self.keyId = keyId
            self.name = name
            self.role = role
            self.keyHash = keyHash
        }
    }

    /// The key stops working (`tether admin-keys revoke`).
    public struct KeyRevoked: Codable, Sendable, Hashable {
        public var keyId: UUID

        public init(keyId: UUID) {
            self.keyId = keyId
        }
    }

    /// `GET /v1/admin/users/{id}`.
    public struct UserViewed: Codable, Sendable, Hashable {
        public var userId: UUID?
        /// The HTTP status the request was answered with.
        public var status: Int

        public init(userId: UUID?, status: Int) {
            self.userId = userId
            self.status = status
        }
    }

    /// `GET /v1/admin/users?…`: the criteria (their personal part kept apart), never the results.
    public struct UsersSearched: Codable, Sendable, Hashable {
        public var provider: String?
        public var limit: Int?
        public var resultCount: Int?
        public var status: Int
        /// Email, provider uid and free text searched for.
        public var personal: SearchTerms

        public init(provider: String?, limit: Int?, resultCount: Int?, status: Int, personal: SearchTerms) {
            self.provider = provider
            self.limit = limit
            self.resultCount = resultCount
            self.status = status
            self.personal = personal
        }
    }

    /// The personal part of a search's criteria.
    public struct SearchTerms: Codable, Sendable, Hashable {
        public var email: String?
        public var uid: String?
        public var q: String?

        public init(email: String? = nil, uid: String? = nil, q: String? = nil) {
            self.email = email
            self.uid = uid
            self.q = q
        }
    }

    /// `GET /v1/admin/users/{id}/history`.
    public struct HistoryViewed: Codable, Sendable, Hashable {
        public var userId: UUID?
        public var after: Int64?
        public var limit: Int?
        /// How many events the page held.
        public var returned: Int?
        public var status: Int
        /// The position of the last event the page held (absent in records written before it was kept).
        public var through: Int64?

        public init(userId: UUID?, after: Int64?, limit: Int?, returned: Int?, status: Int, through: Int64? = nil) {
            self.userId = userId
            self.after = after
            self.limit = limit
            self.returned = returned
            self.status = status
            self.through = through
        }
    }

    /// `POST /v1/admin/users/{id}/disable`, `/enable` or `/revoke-sessions`, allowed or not.
    public struct ActionRequested: Codable, Sendable, Hashable {
        public var userId: UUID?
        /// `disable`, `enable`, `revoke-sessions`, `end-session`, `unlink`, `erase` or `export`.
        public var action: String
        /// The session `end-session` named (absent for the other actions).
        public var sessionId: UUID?
        /// The provider `unlink` named, when it is one (absent for the other actions).
        public var provider: String?
        public var reason: String?
        public var status: Int

        public init(userId: UUID?, action: String, sessionId: UUID? = nil, provider: String? = nil, reason: String?, status: Int) {
            self.userId = userId
            self.action = action
            self.sessionId = sessionId
            self.provider = provider
            self.reason = reason
            self.status = status
        }
    }

    /// `GET /v1/admin/events`: a page of the public event feed.
    public struct EventsRead: Codable, Sendable, Hashable {
        /// The user the feed was filtered to, if any.
        public var userId: UUID?
        /// The cursor read after.
        public var after: String?
        public var types: [String]?
        /// How many events the page held.
        public var returned: Int?
        public var status: Int

        public init(userId: UUID?, after: String?, types: [String]?, returned: Int?, status: Int) {
            self.userId = userId
            self.after = after
            self.types = types
            self.returned = returned
            self.status = status
        }
    }

    /// The stored event type name.
    public var type: String {
        switch self {
        case .keyCreated: "AdminKeyCreated"
        case .keyRevoked: "AdminKeyRevoked"
        case .userViewed: "AdminUserViewed"
        case .usersSearched: "AdminUsersSearched"
        case .historyViewed: "AdminHistoryViewed"
        case .actionRequested: "AdminActionRequested"
        case .eventsRead: "AdminEventsRead"
        }
    }

    /// Every admin event's ``type``.
    public static let types: Set<String> = [
        "AdminKeyCreated", "AdminKeyRevoked", "AdminUserViewed", "AdminUsersSearched", "AdminHistoryViewed",
        "AdminActionRequested", "AdminEventsRead",
    ]

    /// The user the event concerns, stored in the `user_id` column.
    public var userId: UUID? {
        switch self {
        case .keyCreated, .keyRevoked, .usersSearched: nil
        case .userViewed(let payload): payload.userId
        case .historyViewed(let payload): payload.userId
        case .actionRequested(let payload): payload.userId
        case .eventsRead(let payload): payload.userId
        }
    }
}

// Every history page a support reader opens records one: written as text, with no encoder's tree.
extension AdminEvent.HistoryViewed: JSONTextWritable {
    public func writeJSON(to output: inout [UInt8]) {
        var isFirst = true
        JSONText.writeMember("after", ifPresent: after.map { Int($0) }, isFirst: &isFirst, to: &output)
        JSONText.writeMember("limit", ifPresent: limit, isFirst: &isFirst, to: &output)
        JSONText.writeMember("returned", ifPresent: returned, isFirst: &isFirst, to: &output)
        JSONText.writeMemberName("status", isFirst: &isFirst, to: &output)
        JSONText.writeInteger(status, to: &output)
        JSONText.writeMember("through", ifPresent: through.map { Int($0) }, isFirst: &isFirst, to: &output)
        JSONText.writeMember("userId", ifPresent: userId, isFirst: &isFirst, to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

/// Turns admin events into stored events and back.
public enum AdminEventCodec {
    /// The bytes `JSONEncoder` wrote with `[.sortedKeys, .withoutEscapingSlashes]` (its default dates; no
    /// payload holds one), without its cost: every admin request records one of these, a history page
    /// spent 3.7% of its CPU in Foundation's encoder.
    private static let encoder = CompactJSONEncoder(dates: .secondsSinceReferenceDate)

    /// The stored form; `user_id` is the user the event concerns.
    public static func encode(_ event: AdminEvent, id: UUID = UUID.random()) throws -> NewEvent {
        let data: Data
        switch event {
        case .keyCreated(let payload): data = try encoder.encodeData(payload)
        case .keyRevoked(let payload): data = try encoder.encodeData(payload)
        case .userViewed(let payload): data = try encoder.encodeData(payload)
        case .usersSearched(let payload): data = try encoder.encodeData(payload)
        case .historyViewed(let payload): data = Data(payload.jsonText)
        case .actionRequested(let payload): data = try encoder.encodeData(payload)
        case .eventsRead(let payload): data = try encoder.encodeData(payload)
        }
        return NewEvent(id: id, type: event.type, schema: 1, data: Self.withoutNUL(data), userId: event.userId)
    }

    /// `data` with each escaped NUL (`\u0000`, which PostgreSQL's jsonb refuses) written as U+FFFD: a record of a
    /// refused request quotes what it was sent (a cursor, a path's id), and is kept whatever that held.
    static func withoutNUL(_ data: Data) -> Data {
        let nul = Array(#"\u0000"#.utf8)
        guard data.firstRange(of: nul) != nil else { return data }
        var output: [UInt8] = []
        output.reserveCapacity(data.count)
        let bytes = Array(data)
        var index = 0
        while index < bytes.count {
            // Outside strings JSON has no backslash; inside, each one starts an escape of two or six bytes.
            guard bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count else {
                output.append(bytes[index])
                index += 1
                continue
            }
            if bytes[index...].starts(with: nul) {
                output += Array(#"\ufffd"#.utf8)
                index += nul.count
            } else {
                output += bytes[index...index + 1]
                index += 2
            }
        }
        return Data(output)
    }

    /// Reads a stored event; nil for a type that is not an admin event.
    public static func decode(_ event: RecordedEvent) throws -> AdminEvent? {
        let decoder = JSONDecoder()
        let data = event.data
        switch event.type {
        case "AdminKeyCreated": return .keyCreated(try decoder.decode(AdminEvent.KeyCreated.self, from: data))
        case "AdminKeyRevoked": return .keyRevoked(try decoder.decode(AdminEvent.KeyRevoked.self, from: data))
        case "AdminUserViewed": return .userViewed(try decoder.decode(AdminEvent.UserViewed.self, from: data))
        case "AdminUsersSearched": return .usersSearched(try decoder.decode(AdminEvent.UsersSearched.self, from: data))
        case "AdminHistoryViewed": return .historyViewed(try decoder.decode(AdminEvent.HistoryViewed.self, from: data))
        case "AdminActionRequested": return .actionRequested(try decoder.decode(AdminEvent.ActionRequested.self, from: data))
        case "AdminEventsRead": return .eventsRead(try decoder.decode(AdminEvent.EventsRead.self, from: data))
        default: return nil
        }
    }
}

extension StreamName {
    /// The stream of one admin key: its creation, its revocation and every request made with it.
    public static func adminKey(_ id: UUID) -> StreamName {
        StreamName("admin-key-\(id.lowercasedText)")
    }
}

extension EventActor {
    /// A request made with an admin key (`/v1/admin`); `id` is the key's id.
    public static func admin(keyId: UUID) -> EventActor { EventActor(kind: "admin", id: keyId.lowercasedText) }
    /// A person at the command line (`tether admin-keys`); `id` is their login name, where known.
    public static func `operator`(_ login: String?) -> EventActor { EventActor(kind: "operator", id: login) }
}
