import Foundation
import TetherCore
import TetherCrypto
import TetherJOSE

/// Seals what an event says about a person with that person's own key, so that erasing
/// them (deleting the key) makes it unreadable while the log stays append-only.
///
/// Sealed, for every event with a `user_id`: the payload's `personal` member, the
/// provider `uid` of identity events (for passwords it is the email), and the client
/// address and user agent of its metadata. They move into one AES-256-GCM box under
/// `sealedPersonal`, authenticated with the event id, so a box cannot be moved to
/// another event. Admin records keep their address (the admin's) in clear.
///
/// Events about no known person that still hold something personal (an admin's search terms;
/// the address of a failed sign-in for an account no one holds) are sealed the same way with a
/// key of ``ExpiringKeys``, which the payload names (`sealedWith`) and which is destroyed 30 days
/// after its day began: they read as erased from then on.
///
/// Reading opens the box when the key exists. Once it is gone, the event reads as
/// erased: `personal` is empty, a `uid` reads as ``ExternalIdentity/erasedUID``,
/// metadata has no address, and `personalErased` is true.
public enum PersonalDataVault {
    /// The payload member holding the sealed box.
    public static let sealedMember = "sealedPersonal"
    /// Set on payloads whose box can no longer be opened.
    public static let erasedMarker = "personalErased"
    /// The payload member naming the ``ExpiringKeys`` key that sealed an event about no known person.
    public static let expiringKeyMember = "sealedWith"
    /// Event types whose top-level `uid` names a person.
    static let identifierTypes: Set<String> = ["IdentityLinked", "IdentityUnlinked"]
    /// Event types whose client address stays readable: admin records, every one of them (the address is the
    /// admin's, evidence that must outlive the user's erasure).
    static let clearAddressTypes = AdminEvent.types

    /// What goes into a box, as a JSON object of the members present (its stored form never changed).
    ///
    /// Payloads are read and written with TetherJOSE's JSON parser and writer: every event sealed or
    /// opened passes through here, and decoding JSON of any shape with `JSONDecoder` costs a thrown
    /// error for each wrong guess at a member's type.
    private struct Box {
        var personal: JOSEValue?
        var uid: String?
        var clientIP: String?
        var userAgent: String?

        var isEmpty: Bool { personal == nil && uid == nil && clientIP == nil && userAgent == nil }

        /// Written member by member, in UTF-8 order of their names.
        var jsonData: Data {
            var output: [UInt8] = []
            var isFirst = true
            JSONText.writeMember("clientIP", ifPresent: clientIP, isFirst: &isFirst, to: &output)
            if let personal {
                JSONText.writeMemberName("personal", isFirst: &isFirst, to: &output)
                output += personal.jsonBytes
            }
            JSONText.writeMember("uid", ifPresent: uid, isFirst: &isFirst, to: &output)
            JSONText.writeMember("userAgent", ifPresent: userAgent, isFirst: &isFirst, to: &output)
            JSONText.writeObjectEnd(isEmpty: isFirst, to: &output)
            return Data(output)
        }

        init() {}

        /// Moves the client's address out of `metadata` into the box: it is personal, unless the event's
        /// type keeps it in clear (an admin's record).
        mutating func takeAddress(from metadata: inout EventMetadata) {
            clientIP = metadata.clientIP
            userAgent = metadata.userAgent
            metadata.clientIP = nil
            metadata.userAgent = nil
        }

        init?(json: [UInt8]) {
            guard let members = try? JOSEObject(parsing: json) else { return nil }
            func text(_ name: String) -> String? {
                if case .string(let value)? = members[name] { value } else { nil }
            }
            personal = members["personal"]
            uid = text("uid")
            clientIP = text("clientIP")
            userAgent = text("userAgent")
        }
    }

    /// The user's key, made on first use (inside the caller's transaction); nil once the user was erased,
    /// so later events about them (an admin's look at the erased account) are stored without one.
    static func key(for userId: UUID, on connection: PostgresConnection, masterKeys: MasterKeyRing?) async throws -> [UInt8]? {
        var rows = try await connection.query(keyStatement(of: userId))
        if rows.isEmpty {
            for statement in try keyStatements(for: userId, masterKeys: masterKeys) {
                rows = try await connection.query(statement)
            }
        }
        return try key(from: rows, of: userId, masterKeys: masterKeys)
    }

    /// The statement that reads `userId`'s key row, for a caller that pipelines it: no row means the user has
    /// no key yet, and the caller makes one with ``keyStatements(for:masterKeys:)`` (a key is made, wrapped
    /// and offered for every user once, not at every event).
    static func keyStatement(of userId: UUID) -> PostgresQuery {
        "SELECT key FROM personal_data_keys WHERE user_id = \(userId)"
    }

    /// The statements that make `userId`'s key unless it has one, then read it; read their last rows with
    /// ``key(from:of:masterKeys:)``.
    static func keyStatements(for userId: UUID, masterKeys: MasterKeyRing?) throws -> [PostgresQuery] {
        [
            """
            INSERT INTO personal_data_keys (user_id, key) VALUES (\(userId), \(try newKey(for: userId, masterKeys: masterKeys).stored))
            ON CONFLICT (user_id) DO NOTHING
            """,
            // A second statement: its snapshot sees a key a concurrent first append committed meanwhile.
            keyStatement(of: userId),
        ]
    }

    /// The key that rows of ``keyStatement(of:)`` hold: nil once the user was erased.
    static func key(from rows: PostgresRows, of userId: UUID, masterKeys: MasterKeyRing?) throws -> [UInt8]? {
        try opened(try rows[0].decode("key"), of: userId, masterKeys: masterKeys)
    }

    /// A new key for `userId`, and the form it is stored in (wrapped with the master key when there is one).
    public static func newKey(for userId: UUID, masterKeys: MasterKeyRing?) throws -> (key: [UInt8], stored: [UInt8]) {
        let key = SecureRandom.bytes(count: 32)
        return (key, try masterKeys.wrap(key, context: wrappingContext(userId)))
    }

    /// A stored key opened (nil stays nil: a destroyed key).
    public static func opened(_ stored: [UInt8]?, of userId: UUID, masterKeys: MasterKeyRing?) throws -> [UInt8]? {
        try stored.map { try masterKeys.unwrap($0, context: wrappingContext(userId)) }
    }

    /// What a wrapped key is bound to: its row.
    public static func wrappingContext(_ userId: UUID) -> String { "personal_data_keys:" + userId.lowercasedText }

    /// The keys of `userIds` that still exist.
    static func keys(
        for userIds: Set<UUID>, masterKeys: MasterKeyRing?, query: (PostgresQuery) async throws -> PostgresRows
    ) async throws -> [UUID: [UInt8]] {
        guard !userIds.isEmpty else { return [:] }
        return try keys(from: try await query(keysStatement(for: userIds)), masterKeys: masterKeys)
    }

    /// The statement of ``keys(for:query:)``, for a caller that pipelines it; read its rows with ``keys(from:)``.
    static func keysStatement(for userIds: Set<UUID>) -> PostgresQuery {
        // One user's (a history page's) by equality: PostgreSQL plans an `= ANY` of an array parameter at
        // every execution (40 µs for a 5 µs read), an equality once per connection.
        if userIds.count == 1, let userId = userIds.first {
            return "SELECT user_id, key FROM personal_data_keys WHERE user_id = \(userId) AND key IS NOT NULL"
        }
        return """
            SELECT user_id, key FROM personal_data_keys
            WHERE user_id = ANY(\(PostgresArray(Array(userIds)))::uuid[]) AND key IS NOT NULL
            """
    }

    /// The keys the rows of ``keysStatement(for:)`` hold.
    static func keys(from rows: PostgresRows, masterKeys: MasterKeyRing?) throws -> [UUID: [UInt8]] {
        var keys: [UUID: [UInt8]] = [:]
        for row in rows {
            let userId: UUID = try row.decode("user_id")
            keys[userId] = try opened(try row.decode("key"), of: userId, masterKeys: masterKeys)
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

    /// The payload and metadata as stored: personal parts sealed with `key` (a user's key, or the
    /// ``ExpiringKeys`` key called `expiringKey`, whose name the payload then carries).
    static func seal(
        _ event: NewEvent, metadata: EventMetadata, key: [UInt8], expiringKey: String? = nil
    ) throws -> (data: Data, metadata: EventMetadata) {
        if let sealed = try sealingTheAddressOnly(event, metadata: metadata, key: key, expiringKey: expiringKey) { return sealed }
        guard var payload = try? JOSEObject(parsing: event.data) else { return (event.data, metadata) }
        var box = Box()
        var stored = metadata
        box.personal = payload["personal"]
        payload["personal"] = nil
        if identifierTypes.contains(event.type), case .string(let uid)? = payload["uid"] {
            payload["uid"] = nil
            box.uid = uid
        }
        if !clearAddressTypes.contains(event.type) { box.takeAddress(from: &stored) }
        guard !box.isEmpty else { return (event.data, metadata) }
        let sealed = try AESGCM.seal(box.jsonData, key: key, authenticating: aad(event.id))
        payload[sealedMember] = .string(Data(sealed.combined).base64EncodedString())
        if let expiringKey { payload[expiringKeyMember] = .string(expiringKey) }
        return (Data(payload.jsonBytes), stored)
    }

    /// ``seal(_:metadata:key:expiringKey:)`` of an event whose payload has nothing personal in it, so only the
    /// client's address goes into the box: the sealed member is added to the payload's text, which is not
    /// parsed and written again (most of what a sign-in's events cost to seal). Nil for any other payload,
    /// which is sealed by parsing it: one whose text names `personal` or a sealed member anywhere, holds a
    /// `\u` escape (a name could be spelled with one), or is not an object; or an event whose `uid` names
    /// a person, or whose address stays in clear. The stored column is `jsonb`, which keeps an object's
    /// members in its own order, whatever the text's.
    private static func sealingTheAddressOnly(
        _ event: NewEvent, metadata: EventMetadata, key: [UInt8], expiringKey: String?
    ) throws -> (data: Data, metadata: EventMetadata)? {
        let data = event.data
        guard !identifierTypes.contains(event.type), !clearAddressTypes.contains(event.type),
              data.first == UInt8(ascii: "{"), data.last == UInt8(ascii: "}"),
              !data.contains(text: "\"personal\""), !data.contains(text: "\"sealed"), !data.contains(text: "\\u")
        else { return nil }
        guard metadata.clientIP != nil || metadata.userAgent != nil else { return (data, metadata) }
        var box = Box()
        var stored = metadata
        box.takeAddress(from: &stored)
        let sealed = try AESGCM.seal(box.jsonData, key: key, authenticating: aad(event.id))
        let combined = sealed.combined
        var text: [UInt8] = []
        text.reserveCapacity(data.count + (combined.count + 2) / 3 * 4 + 64 + (expiringKey?.utf8.count ?? 0))
        data.withUnsafeBytes { text.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0.dropLast())) }
        // A comma after the last member, none in an empty object.
        let hasMembers = text.last(where: { ![UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t")].contains($0) })
            != UInt8(ascii: "{")
        if hasMembers { text.append(UInt8(ascii: ",")) }
        JSONText.writeString(sealedMember, to: &text)
        text.append(UInt8(ascii: ":"))
        JSONText.writeString(Data(combined).base64EncodedString(), to: &text)
        if let expiringKey {
            text.append(UInt8(ascii: ","))
            JSONText.writeString(expiringKeyMember, to: &text)
            text.append(UInt8(ascii: ":"))
            JSONText.writeString(expiringKey, to: &text)
        }
        text.append(UInt8(ascii: "}"))
        return (Data(text), stored)
    }

    /// The payload and metadata of an event about a user whose key was destroyed: stored as erased
    /// from the start, so nothing personal is ever written in clear about an erased person.
    static func strip(_ event: NewEvent, metadata: EventMetadata) throws -> (data: Data, metadata: EventMetadata) {
        guard var payload = try? JOSEObject(parsing: event.data) else { return (event.data, metadata) }
        var stored = metadata
        if payload["personal"] != nil { payload["personal"] = .object(JOSEObject()) }
        if identifierTypes.contains(event.type), payload["uid"] != nil { payload["uid"] = .string(ExternalIdentity.erasedUID) }
        if !clearAddressTypes.contains(event.type) {
            stored.clientIP = nil
            stored.userAgent = nil
        }
        payload[erasedMarker] = .bool(true)
        return (Data(payload.jsonBytes), stored)
    }

    /// The event as it was appended, or as erased when `key` is gone.
    static func open(_ event: RecordedEvent, key: [UInt8]?) throws -> RecordedEvent {
        try openParsed(event, key: { try key.map { try AESGCM.ScheduledKey($0) } }).event
    }

    /// The keys of one read's users, each made ready (``AESGCM/ScheduledKey``) at its first use: the events of
    /// a history page, or of a replay's batch read user by user, then make each user's key ready once.
    /// Used by one reader at a time; dropped with the read, it clears what it made ready.
    /// With `expiring`, a read of events about no one too: they are opened with their ``ExpiringKeys`` key,
    /// kept ready by name the same way; without, they keep their sealed part sealed.
    final class OpeningKeys {
        private let keys: [UUID: [UInt8]]
        private let expiring: [String: [UInt8]]?
        private var ready: [UUID: AESGCM.ScheduledKey] = [:]
        private var readyExpiring: [String: AESGCM.ScheduledKey] = [:]

        init(_ keys: [UUID: [UInt8]], expiring: [String: [UInt8]]? = nil) {
            self.keys = keys
            self.expiring = expiring
        }

        /// Whether events about no one are opened (with ``key(named:)``).
        var opensEventsAboutNoOne: Bool { expiring != nil }

        /// `userId`'s key, ready; nil when the user has none (erased, or never sealed anything).
        func key(of userId: UUID) throws -> AESGCM.ScheduledKey? {
            try Self.ready(userId, in: &ready, from: keys)
        }

        /// The expiring key called `name`, ready; nil when it is gone (expired and destroyed) or was not read.
        func key(named name: String) throws -> AESGCM.ScheduledKey? {
            try Self.ready(name, in: &readyExpiring, from: expiring ?? [:])
        }

        private static func ready<Name: Hashable>(
            _ name: Name, in ready: inout [Name: AESGCM.ScheduledKey], from keys: [Name: [UInt8]]
        ) throws -> AESGCM.ScheduledKey? {
            if let key = ready[name] { return key }
            guard let bytes = keys[name] else { return nil }
            let key = try AESGCM.ScheduledKey(bytes)
            ready[name] = key
            return key
        }
    }

    /// ``open(_:key:)``, with the opened payload as parsed on the way when the event had a sealed part
    /// (nil otherwise): a reader that needs its members need not parse the payload again.
    ///
    /// Without `writingData`, an event with a payload keeps its `data` as stored (sealed), unwritten: for a
    /// reader of the payload alone (a history page), to which writing it out is 3–6% of opening an event.
    static func openParsed(
        _ event: RecordedEvent, key: () throws -> AESGCM.ScheduledKey?, writingData: Bool = true
    ) throws -> (event: RecordedEvent, payload: JOSEObject?) {
        guard event.data.contains(text: sealedMember),
              var payload = try? JOSEObject(parsing: event.data),
              case .string(let text)? = payload[sealedMember],
              let combined = Data(base64Encoded: text)
        else { return (event, nil) }
        payload[sealedMember] = nil
        payload[expiringKeyMember] = nil
        var opened = event
        // Made ready only for an event with something sealed.
        if let key = try key() {
            let opening = try key.open(try AESGCM.SealedBox(combined: combined), authenticating: aad(event.id))
            guard let box = Box(json: opening) else {
                throw PostgresError.decoding("the sealed personal data of event \(event.id) is not a JSON object")
            }
            if let personal = box.personal { payload["personal"] = personal }
            if let uid = box.uid { payload["uid"] = .string(uid) }
            opened.metadata.clientIP = box.clientIP ?? opened.metadata.clientIP
            opened.metadata.userAgent = box.userAgent ?? opened.metadata.userAgent
        } else {
            payload["personal"] = .object(JOSEObject())
            if identifierTypes.contains(event.type) { payload["uid"] = .string(ExternalIdentity.erasedUID) }
            payload[erasedMarker] = .bool(true)
        }
        if writingData { opened.data = Data(payload.jsonBytes) }
        return (opened, payload)
    }

    /// The name of the ``ExpiringKeys`` key that sealed `event`, if one did.
    static func expiringKeyName(of event: RecordedEvent) -> String? {
        guard event.data.contains(text: expiringKeyMember), let payload = try? JOSEObject(parsing: event.data),
              case .string(let name)? = payload[expiringKeyMember]
        else { return nil }
        return name
    }

    /// What an event's sealed part authenticates: `tether personal data <event id>` (what every sealed event
    /// in a log was sealed with), written as bytes with one allocation: asked once an event a reader opens.
    static func aad(_ eventId: UUID) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(aadPrefix.count + 36)
        bytes += aadPrefix
        eventId.writeLowercased(to: &bytes)
        return bytes
    }

    private static let aadPrefix = Array("tether personal data ".utf8)
}

extension Data {
    /// Whether `text`'s UTF-8 bytes occur in the data: `memchr` for the first byte and `memcmp` for the rest,
    /// where `range(of:)` goes through Foundation's generic search (3.5% of a history read, asked once an event).
    func contains(text: String) -> Bool {
        var text = text
        return text.withUTF8 { needle in
            withUnsafeBytes { haystack in
                guard let first = needle.first, let pattern = needle.baseAddress else { return true }
                guard let base = haystack.baseAddress, haystack.count >= needle.count else { return false }
                let last = base + (haystack.count - needle.count)  // the last place a match can start
                var from = base
                while from <= last, let found = memchr(from, Int32(first), last - from + 1) {
                    if memcmp(found, pattern, needle.count) == 0 { return true }
                    from = UnsafeRawPointer(found) + 1
                }
                return false
            }
        }
    }
}
