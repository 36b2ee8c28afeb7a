import Foundation
import Synchronization
import TetherCore
import TetherHTTP
import TetherPostgres

/// Creates, lists, revokes and checks admin keys, and records what is done with them.
///
/// Keys are `tadm_` plus 256 random bits in base64url, shown once; `admin_keys`
/// keeps their SHA-256. Everything about a key is an event of its stream
/// `admin-key-<id>`: its creation and revocation (projected into `admin_keys` in
/// the same transaction) and every request made with it.
public struct AdminKeyStore: Sendable {
    /// The shape of every admin key.
    public static let secretFormat = OpaqueSecretFormat(prefix: "tadm_")
    /// The longest key name accepted.
    public static let maxNameLength = 100
    /// How often an append is retried after losing a race for the stream's next version.
    static let maxAttempts = 8

    public let database: PostgresClient
    let store: PostgresEventStore
    /// Where a record that could not follow its committed change is reported (``recordCommitted(_:keyId:metadata:)``).
    let logger: Logger?
    /// Live keys found before, by the hash of their secret, for ``authenticate(_:checkedByItsRecord:)``.
    private let found = FoundKeys()

    public init(database: PostgresClient, logger: Logger? = nil) {
        self.database = database
        self.store = PostgresEventStore(client: database)
        self.logger = logger
    }

    /// Records a request whose change has committed (a user disabled, a webhook made, a Parse master-key
    /// change): a record that cannot be written is logged as an error, not thrown, since the change is done
    /// and its answer must still go (a new webhook's secret is shown once).
    public func recordCommitted(_ event: AdminEvent, keyId: UUID, metadata: EventMetadata) async {
        do {
            try await record(event, keyId: keyId, metadata: metadata)
        } catch {
            logger?.error("an admin key's record of a change it made could not be written", [
                ("keyId", keyId.lowercasedText), ("event", (try? AdminEventCodec.encode(event))?.type),
                ("commandId", metadata.commandId?.lowercasedText), ("error", String(describing: error)),
            ])
        }
    }

    /// `name` as a key keeps it (trimmed), or ``AdminError/invalidRequest(_:)`` saying what a name may be.
    public static func checkedName(_ name: String?) throws(AdminError) -> String? {
        let name = name?.trimmingCharacters(in: .whitespacesAndNewlines)
        if let name {
            // Control and format characters (a newline, a tab, a terminal's escape, a right-to-left override) would
            // reach every listing as they are.
            guard !name.isEmpty, name.count <= Self.maxNameLength, !name.contains(where: \.isNewline),
                  !name.unicodeScalars.contains(where: { [.control, .format].contains($0.properties.generalCategory) }) else {
                throw .invalidRequest("a key name is 1 to \(Self.maxNameLength) characters on one line, without control or formatting characters")
            }
        }
        return name
    }

    /// Makes a key; the answer carries the key itself, which nothing can show again.
    public func create(role: AdminRole, name: String?, metadata: EventMetadata) async throws -> (key: AdminKey, secret: String) {
        let name = try Self.checkedName(name)
        let id = UUID.random()
        let secret = Self.secretFormat.generate()
        let event = AdminEvent.keyCreated(.init(keyId: id, name: name, role: role.rawValue, keyHash: Self.secretFormat.hash(secret)))
        try await record(event, keyId: id, metadata: metadata)
        guard let key = try await key(id) else { throw AdminError.noSuchKey(id) }
        return (key, secret)
    }

    /// Revokes a key; `wasRevoked` is false when it had been revoked already (nothing is recorded then).
    public func revoke(_ id: UUID, metadata: EventMetadata) async throws -> (key: AdminKey, wasRevoked: Bool) {
        guard let existing = try await key(id) else { throw AdminError.noSuchKey(id) }
        guard !existing.isRevoked else { return (existing, false) }
        try await record(.keyRevoked(.init(keyId: id)), keyId: id, metadata: metadata)
        guard let key = try await key(id) else { throw AdminError.noSuchKey(id) }
        return (key, true)
    }

    /// Every key, oldest first, with when each was last used.
    public func list() async throws -> [AdminKey] {
        try await keys(where: "TRUE")
    }

    /// One key, with when it was last used.
    public func key(_ id: UUID) async throws -> AdminKey? {
        try await keys(where: "k.id = \(id)").first
    }

    /// The live key `presented` is, or nil when it is malformed, unknown or revoked.
    ///
    /// The lookup goes by the key's SHA-256, which tells an observer nothing about
    /// the key; the stored hash is then compared in constant time all the same.
    public func authenticate(_ presented: String) async throws -> AdminKey? {
        try await authenticate(presented, checkedByItsRecord: false)
    }

    /// ``authenticate(_:)``, for a request whose record checks in its own transaction that the key is
    /// still live (``record(keyId:about:metadata:reading:decide:)``): when `checkedByItsRecord`, a key
    /// this store found live before is answered without a lookup, saving the request a round trip.
    /// A key's role never changes; its revocation is what the record's check catches.
    public func authenticate(_ presented: String, checkedByItsRecord: Bool) async throws -> AdminKey? {
        guard Self.secretFormat.isWellFormed(presented) else { return nil }
        let hash = Self.secretFormat.hash(presented)
        if checkedByItsRecord, let key = found.key(hash: hash) { return key }
        let rows = try await database.query("""
            SELECT id, name, role, key_hash, created_at, revoked_at FROM admin_keys WHERE key_hash = \(hash)
            """)
        guard let row = rows.first, Self.secretFormat.matches(presented, storedHash: try row.decode("key_hash")) else {
            return nil
        }
        let key = try Self.decodeKey(row)
        guard !key.isRevoked else { return nil }
        found.remember(key, hash: hash)
        return key
    }

    /// Appends `event` to the stream of key `keyId`, and projects it, in one transaction.
    ///
    /// Requests with one key may arrive at once: appends to its stream queue on a
    /// transaction-scoped advisory lock, name the version they found as the expected
    /// one, and start over (bounded) if another writer got there first anyway.
    ///
    /// A record of a request (a look at a user, a search, an action asked for) projects nothing: it
    /// is appended in two round trips (``PostgresEventStore/appendAtEnd(_:to:metadata:)``; three, once,
    /// about a user with no key yet), which every support request pays.
    public func record(_ event: AdminEvent, keyId: UUID, metadata: EventMetadata) async throws {
        let stream = StreamName.adminKey(keyId)
        let newEvent = try AdminEventCodec.encode(event)
        let projectsNothing = switch event {
        case .userViewed, .usersSearched, .historyViewed, .actionRequested, .eventsRead: true
        case .keyCreated, .keyRevoked: false
        }
        var attempt = 0
        while true {
            attempt += 1
            do {
                if projectsNothing {
                    // A record about no one keeps what it searched for sealed with today's key of its purpose.
                    try await appendRecord(
                        to: stream, about: newEvent.userId, metadata: metadata, reading: [],
                        sealing: PostgresEventStore.expiringPurposes(of: [newEvent])
                    ) { _ in (newEvent, ()) }
                    return
                }
                try await database.withTransaction { connection in
                    try await connection.query(PostgresEventStore.streamLockStatement(stream))
                    let version: Int = try await connection.query("""
                        SELECT coalesce(max(version), 0) AS version FROM events WHERE stream = \(stream.rawValue)
                        """)[0].decode("version")
                    let result = try await store.append(
                        [newEvent], to: stream, expected: version == 0 ? .noStream : .exact(version), metadata: metadata,
                        on: connection)
                    guard !result.wasAlreadyAppended else { return }
                    let at: String = try await connection.query("SELECT now()::text AS at")[0].decode("at")
                    try await AdminKeyProjection.apply(event, at: at, on: connection)
                }
                return
            } catch is WrongExpectedVersion where attempt < Self.maxAttempts {
                continue
            } catch let error as PostgresError where error.isTransient && attempt < Self.maxAttempts {
                continue
            }
        }
    }

    /// Records a request that projects nothing, decided from `reads`: they run in the record's own
    /// transaction, in its first round trip (after the locks of the key's stream and of `userId`),
    /// and `decide` makes the record (nil: none) and the caller's result of their rows. Two round trips in all
    /// (three, once, about a user with no key yet): what the request reads costs no round trip more
    /// than its record. Retried like ``record(_:keyId:metadata:)``.
    ///
    /// The same round trip checks that the key is still live: when it is not (revoked since it was
    /// authenticated), nothing is recorded or answered, the store forgets the key, and this throws
    /// ``AdminError/invalidKey``.
    public func record<T: Sendable>(
        keyId: UUID, about userId: UUID?, metadata: EventMetadata, reading reads: [PostgresQuery],
        decide: @escaping @Sendable (ArraySlice<PostgresRows>) throws -> (record: AdminEvent?, result: T)
    ) async throws -> T {
        let live: PostgresQuery = "SELECT 1 AS live FROM admin_keys WHERE id = \(keyId) AND revoked_at IS NULL"
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await appendRecord(to: .adminKey(keyId), about: userId, metadata: metadata, reading: [live] + reads) { rows in
                    guard !rows[rows.startIndex].isEmpty else { throw AdminError.invalidKey }
                    let (record, result) = try decide(rows.dropFirst())
                    return (try record.map { try AdminEventCodec.encode($0) }, result)
                }
            } catch let error as PostgresError where error.isTransient && attempt < Self.maxAttempts {
                continue
            } catch let error as AdminError where error == .invalidKey {
                found.forget(keyId)
                throw error
            }
        }
    }

    /// Appends the record `decide` makes of `reads` (none: nothing), naming `userId` only when a user has that id (an
    /// erased one too): a request about an id no one has (a 404) is recorded about no one, and makes no personal key
    /// for it. The check is read in the same round trip as `reads`.
    private func appendRecord<T: Sendable>(
        to stream: StreamName, about userId: UUID?, metadata: EventMetadata, reading reads: [PostgresQuery],
        sealing: Set<ExpiringKeys.Purpose> = [], decide: @escaping @Sendable (ArraySlice<PostgresRows>) throws -> (record: NewEvent?, result: T)
    ) async throws -> T {
        let known: PostgresQuery = userId.map { "SELECT 1 AS known FROM users WHERE id = \($0)" } ?? "SELECT 1 AS known"
        return try await store.appendAtEnd(to: stream, about: userId, metadata: metadata, reading: reads + [known], sealing: sealing) { rows in
            var (record, result) = try decide(rows.dropLast())
            if rows[rows.endIndex - 1].isEmpty { record?.userId = nil }
            return (record.map { [$0] } ?? [], result)
        }
    }

    private func keys(where condition: PostgresQuery) async throws -> [AdminKey] {
        let rows = try await database.query("""
            SELECT k.id, k.name, k.role, k.created_at, k.revoked_at,
                   (SELECT e.occurred_at FROM events e
                    WHERE e.stream = 'admin-key-' || k.id::text AND e.type NOT IN ('AdminKeyCreated', 'AdminKeyRevoked')
                    ORDER BY e.version DESC LIMIT 1) AS last_used_at
            FROM admin_keys k WHERE \(condition) ORDER BY k.created_at, k.id
            """)
        return try rows.map { row in
            var key = try Self.decodeKey(row)
            key.lastUsedAt = try row.decode("last_used_at")
            return key
        }
    }

    private static func decodeKey(_ row: PostgresRow) throws -> AdminKey {
        let roleName: String = try row.decode("role")
        guard let role = AdminRole(rawValue: roleName) else { throw PostgresDecodingFailure("unknown admin role \(roleName)") }
        return AdminKey(
            id: try row.decode("id"), name: try row.decode("name"), role: role, createdAt: try row.decode("created_at"),
            revokedAt: try row.decode("revoked_at"))
    }
}

/// The live keys an ``AdminKeyStore`` found, by the hash of their secret; at most ``capacity``, all
/// forgotten when full (a deployment has a handful of keys).
private final class FoundKeys: Sendable {
    static let capacity = 256
    private let keys = Mutex<[String: AdminKey]>([:])

    func key(hash: String) -> AdminKey? {
        keys.withLock { $0[hash] }
    }

    func remember(_ key: AdminKey, hash: String) {
        keys.withLock { keys in
            if keys.count >= Self.capacity { keys.removeAll() }
            keys[hash] = key
        }
    }

    func forget(_ id: UUID) {
        keys.withLock { keys in keys = keys.filter { $0.value.id != id } }
    }
}
