import Foundation
import TetherCore
import TetherCrypto

/// Seals what an event says about a person with that person's own key, so that erasing
/// them (deleting the key) makes it unreadable while the log stays append-only.
///
/// Sealed, for every event with a `user_id`: the payload's `personal` member, the
/// provider `uid` of identity events (for passwords it is the email), and the client
/// address and user agent of its metadata. They move into one AES-256-GCM box under
/// `sealedPersonal`, authenticated with the event id, so a box cannot be moved to
/// another event. Admin records keep their address (the admin's) in clear.
///
/// Reading opens the box when the key exists. Once it is gone, the event reads as
/// erased: `personal` is empty, a `uid` reads as ``ExternalIdentity/erasedUID``,
/// metadata has no address, and `personalErased` is true.
public enum PersonalDataVault {
    /// The payload member holding the sealed box.
    public static let sealedMember = "sealedPersonal"
    /// Set on payloads whose box can no longer be opened.
    public static let erasedMarker = "personalErased"
    /// Event types whose top-level `uid` names a person.
    static let identifierTypes: Set<String> = ["IdentityLinked", "IdentityUnlinked"]
    /// Event types whose client address stays readable: admin records (the address is the
    /// admin's, evidence that must outlive the user's erasure).
    static let clearAddressTypes: Set<String> = [
        "AdminUserViewed", "AdminUsersSearched", "AdminHistoryViewed", "AdminActionRequested", "AdminKeyCreated", "AdminKeyRevoked",
    ]

    /// What goes into a box.
    private struct Box: Codable {
        var personal: JSONValueBox?
        var uid: String?
        var clientIP: String?
        var userAgent: String?
    }

    /// The user's key, made on first use (inside the caller's transaction); nil once the user was erased,
    /// so later events about them (an admin's look at the erased account) are stored without one.
    static func key(for userId: UUID, on connection: PostgresConnection) async throws -> [UInt8]? {
        try await connection.query("""
            INSERT INTO personal_data_keys (user_id, key) VALUES (\(userId), \(SecureRandom.bytes(count: 32)))
            ON CONFLICT (user_id) DO NOTHING
            """)
        // A second statement: its snapshot sees a key a concurrent first append committed meanwhile.
        return try await connection.query("SELECT key FROM personal_data_keys WHERE user_id = \(userId)")[0].decode("key")
    }

    /// The keys of `userIds` that still exist.
    static func keys(for userIds: Set<UUID>, query: (PostgresQuery) async throws -> PostgresRows) async throws -> [UUID: [UInt8]] {
        guard !userIds.isEmpty else { return [:] }
        let rows = try await query("""
            SELECT user_id, key FROM personal_data_keys
            WHERE user_id = ANY(\(PostgresArray(Array(userIds)))::uuid[]) AND key IS NOT NULL
            """)
        var keys: [UUID: [UInt8]] = [:]
        for row in rows {
            keys[try row.decode("user_id")] = try row.decode("key")
        }
        return keys
    }

    /// Destroys the user's key: every event sealed with it becomes unreadable. The row stays, keyless,
    /// so that no new key is made for the erased user.
    /// It runs in the erasure's own transaction, after the user's last events are sealed.
    public static func destroyKeyStatement(of userId: UUID) -> PostgresQuery {
        """
        INSERT INTO personal_data_keys (user_id, key, destroyed_at) VALUES (\(userId), NULL, now())
        ON CONFLICT (user_id) DO UPDATE SET key = NULL, destroyed_at = now()
        """
    }

    /// The payload and metadata as stored: personal parts sealed with `key`.
    static func seal(_ event: NewEvent, metadata: EventMetadata, key: [UInt8]) throws -> (data: Data, metadata: EventMetadata) {
        guard var payload = try? JSONDecoder().decode([String: JSONValueBox].self, from: event.data) else {
            return (event.data, metadata)
        }
        var box = Box()
        var stored = metadata
        box.personal = payload.removeValue(forKey: "personal")
        if identifierTypes.contains(event.type), case .string(let uid)? = payload.removeValue(forKey: "uid") {
            box.uid = uid
        }
        if !clearAddressTypes.contains(event.type) {
            box.clientIP = stored.clientIP
            box.userAgent = stored.userAgent
            stored.clientIP = nil
            stored.userAgent = nil
        }
        guard box.personal != nil || box.uid != nil || box.clientIP != nil || box.userAgent != nil else {
            return (event.data, metadata)
        }
        let sealed = try AESGCM.seal(try JSONEncoder().encode(box), key: key, authenticating: aad(event.id))
        payload[sealedMember] = .string(Data(sealed.combined).base64EncodedString())
        return (JSONValueBox.object(payload).jsonData, stored)
    }

    /// The payload and metadata of an event about a user whose key was destroyed: stored as erased
    /// from the start, so nothing personal is ever written in clear about an erased person.
    static func strip(_ event: NewEvent, metadata: EventMetadata) throws -> (data: Data, metadata: EventMetadata) {
        guard var payload = try? JSONDecoder().decode([String: JSONValueBox].self, from: event.data) else {
            return (event.data, metadata)
        }
        var stored = metadata
        if payload["personal"] != nil { payload["personal"] = .object([:]) }
        if identifierTypes.contains(event.type), payload["uid"] != nil { payload["uid"] = .string(ExternalIdentity.erasedUID) }
        if !clearAddressTypes.contains(event.type) {
            stored.clientIP = nil
            stored.userAgent = nil
        }
        payload[erasedMarker] = .bool(true)
        return (JSONValueBox.object(payload).jsonData, stored)
    }

    /// The event as it was appended, or as erased when `key` is gone.
    static func open(_ event: RecordedEvent, key: [UInt8]?) throws -> RecordedEvent {
        guard event.data.range(of: Data(sealedMember.utf8)) != nil,
              var payload = try? JSONDecoder().decode([String: JSONValueBox].self, from: event.data),
              case .string(let text)? = payload.removeValue(forKey: sealedMember),
              let combined = Data(base64Encoded: text)
        else { return event }
        var opened = event
        if let key {
            let box = try JSONDecoder().decode(
                Box.self, from: Data(try AESGCM.open(try AESGCM.SealedBox(combined: Array(combined)), key: key, authenticating: aad(event.id))))
            if let personal = box.personal { payload["personal"] = personal }
            if let uid = box.uid { payload["uid"] = .string(uid) }
            opened.metadata.clientIP = box.clientIP ?? opened.metadata.clientIP
            opened.metadata.userAgent = box.userAgent ?? opened.metadata.userAgent
        } else {
            payload["personal"] = .object([:])
            if identifierTypes.contains(event.type) { payload["uid"] = .string(ExternalIdentity.erasedUID) }
            payload[erasedMarker] = .bool(true)
        }
        opened.data = JSONValueBox.object(payload).jsonData
        return opened
    }

    private static func aad(_ eventId: UUID) -> [UInt8] {
        Array("tether personal data \(eventId.uuidString.lowercased())".utf8)
    }
}

/// Any JSON value, passed through unchanged (TetherPostgres has no JSON value type of its own).
indirect enum JSONValueBox: Codable, Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case integer(Int64)
    case string(String)
    case array([JSONValueBox])
    case object([String: JSONValueBox])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // Every failed guess costs a thrown error: the shapes payloads hold most come first.
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([String: JSONValueBox].self) { self = .object(value) }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int64.self) { self = .integer(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else { self = .array(try container.decode([JSONValueBox].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValueBox {
    /// The value as compact JSON, object keys sorted, slashes unescaped: what `JSONEncoder` with
    /// `.sortedKeys` writes, without its generic machinery (this runs for every event sealed or opened).
    var jsonData: Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(512)
        write(to: &bytes)
        return Data(bytes)
    }

    private func write(to bytes: inout [UInt8]) {
        switch self {
        case .null: bytes.append(contentsOf: "null".utf8)
        case .bool(let value): bytes.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value): bytes.append(contentsOf: String(value).utf8)
        case .number(let value):
            if let exact = Int64(exactly: value) { bytes.append(contentsOf: String(exact).utf8) }
            else { bytes.append(contentsOf: "\(value)".utf8) }
        case .string(let value): Self.write(value, to: &bytes)
        case .array(let values):
            bytes.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                value.write(to: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.write(key, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                members[key]!.write(to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// A JSON string: quotes, backslashes and control characters escaped, everything else as UTF-8.
    private static func write(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
