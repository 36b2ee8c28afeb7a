import Foundation
import TetherCrypto

/// The key that wraps the keys Tether stores (`TETHER_MASTER_KEY_FILE`): each user's personal-data
/// key is kept in `personal_data_keys` sealed with it (AES-256-GCM, bound to its user), so a dump of
/// the database without the file reads nothing personal.
///
/// The file holds 32 random bytes in base64 on one line; `tether dev` makes one under `.tether/`.
public struct MasterKey: Sendable, Hashable {
    public let bytes: [UInt8]
    /// What names the key in what it wraps: the first 8 bytes of a SHA-256 of it (it reveals nothing of the
    /// key). Hashed once: every key unwrapped (a user's, at each of their commands) is matched by it.
    public let id: [UInt8]

    public init(bytes: [UInt8]) throws {
        guard bytes.count == AESGCM.keyByteCount else {
            throw CryptoError.invalidInput.with(detail: "a master key is \(AESGCM.keyByteCount) bytes, not \(bytes.count)")
        }
        self.bytes = bytes
        self.id = Array(DigestAlgorithm.sha256.hash(Array("tether master key id".utf8) + bytes).prefix(8))
    }

    /// A new random key.
    public static func generate() -> MasterKey {
        // 32 random bytes are a key.
        try! MasterKey(bytes: SecureRandom.bytes(count: AESGCM.keyByteCount))
    }

    /// The key a file holds (base64 of 32 bytes, surrounding whitespace ignored).
    public init(file path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CryptoError.invalidInput.with(detail: "cannot read the master key file \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let bytes = Data(base64Encoded: text) else {
            throw CryptoError.invalidInput.with(detail: "\(path) is not a master key: expected 32 bytes in base64 on one line")
        }
        try self.init(bytes: Array(bytes))
    }

    /// The file's text.
    public var fileText: String { Data(bytes).base64EncodedString() + "\n" }

    /// Writes a new key to `path`, readable by its owner only; refuses to overwrite a file.
    public static func create(at path: String) throws -> MasterKey {
        let key = generate()
        guard !FileManager.default.fileExists(atPath: path) else {
            throw CryptoError.invalidInput.with(detail: "\(path) exists already: a master key file is never overwritten")
        }
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: path, contents: Data(key.fileText.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CryptoError.invalidInput.with(detail: "cannot write the master key file \(path)")
        }
        return key
    }
}

/// The master keys a process knows: the current one wraps; it and the others (a rotation's old one)
/// unwrap. A stored key is `TMK1` ‖ the master key's id (8 bytes) ‖ nonce ‖ ciphertext ‖ tag, sealed
/// with the row it belongs to as associated data, so a wrapped key moved to another row does not open.
/// A stored key of exactly 32 bytes predates wrapping and is read as it is.
public struct MasterKeyRing: Sendable, Hashable {
    public var current: MasterKey
    public var others: [MasterKey]

    public init(current: MasterKey, others: [MasterKey] = []) {
        self.current = current
        self.others = others
    }

    static let magic = Array("TMK1".utf8)

    /// Whether `stored` is wrapped (as opposed to a key from before wrapping).
    public static func isWrapped(_ stored: [UInt8]) -> Bool {
        stored.count > magic.count + 8 && Array(stored.prefix(magic.count)) == magic
    }

    /// The id of the master key that wrapped `stored`; nil for a key stored before wrapping.
    public static func masterKeyID(of stored: [UInt8]) -> [UInt8]? {
        isWrapped(stored) ? Array(stored[magic.count..<(magic.count + 8)]) : nil
    }

    /// `secret` wrapped with the current master key for the row `context` names.
    public func wrap(_ secret: [UInt8], context: String) throws -> [UInt8] {
        Self.magic + current.id + (try AESGCM.seal(secret, key: current.bytes, authenticating: Array(context.utf8)).combined)
    }

    /// The secret `stored` wraps, or `stored` itself when it predates wrapping.
    ///
    /// - Throws: when it was wrapped by a master key this ring does not hold, or for another row.
    public func unwrap(_ stored: [UInt8], context: String) throws -> [UInt8] {
        guard let id = Self.masterKeyID(of: stored) else { return stored }
        guard let key = current.id == id ? current : others.first(where: { $0.id == id }) else {
            throw CryptoError.invalidInput.with(detail: "a stored key was wrapped by a master key this server does not have (id \(id.hexString))")
        }
        return try AESGCM.open(try AESGCM.SealedBox(combined: Array(stored.dropFirst(Self.magic.count + 8))), key: key.bytes,
                               authenticating: Array(context.utf8))
    }
}

extension Optional where Wrapped == MasterKeyRing {
    /// A text secret (a private key's PEM, a webhook secret) as stored: `tmk1:` and its wrapped bytes in
    /// base64 when a ring is configured, as it is otherwise.
    public func wrapText(_ secret: String, context: String) throws -> String {
        guard self != nil else { return secret }
        return Self.textPrefix + Data(try wrap(Array(secret.utf8), context: context)).base64EncodedString()
    }

    /// A stored text secret opened: unwrapped when wrapped, as it is when it predates wrapping.
    public func unwrapText(_ stored: String, context: String) throws -> String {
        guard stored.hasPrefix(Self.textPrefix) else { return stored }
        guard let bytes = Self.wrappedBytes(ofText: stored) else {
            throw CryptoError.invalidInput.with(detail: "a wrapped secret is not base64")
        }
        return String(decoding: try unwrap(bytes, context: context), as: UTF8.self)
    }

    /// The wrapped bytes a stored text secret holds; nil when it is not wrapped (or not base64).
    static func wrappedBytes(ofText stored: String) -> [UInt8]? {
        guard stored.hasPrefix(textPrefix) else { return nil }
        return Data(base64Encoded: String(stored.dropFirst(textPrefix.count))).map(Array.init)
    }

    static var textPrefix: String { "tmk1:" }

    /// `secret` as stored: wrapped when a ring is configured, as it is otherwise.
    func wrap(_ secret: [UInt8], context: String) throws -> [UInt8] {
        try self.map { try $0.wrap(secret, context: context) } ?? secret
    }

    /// A stored key opened: unwrapped when wrapped (which needs the ring), as it is when it predates wrapping.
    func unwrap(_ stored: [UInt8], context: String) throws -> [UInt8] {
        guard MasterKeyRing.isWrapped(stored) else { return stored }
        guard let ring = self else {
            throw CryptoError.invalidInput.with(detail: "stored keys are wrapped: set TETHER_MASTER_KEY_FILE to read them")
        }
        return try ring.unwrap(stored, context: context)
    }
}

/// The stored keys' side of the master key: rotating it, and checking what wraps them.
public enum MasterKeyRotation {
    /// How the stored keys stand against a ring.
    public struct Report: Sendable, Hashable {
        /// Wrapped by the ring's current key.
        public var current = 0
        /// Wrapped by another key the ring holds.
        public var older = 0
        /// Wrapped by a key the ring does not hold: unreadable here.
        public var unknown = 0
        /// Stored before wrapping (readable by anyone who reads the table).
        public var unwrapped = 0
        /// Destroyed: by an erasure, or a day key of records about no one past its expiry.
        public var destroyed = 0
    }

    /// The stored secrets kept as text, each wrapped under a context of its table and row: signing keys' private
    /// halves, Firebase service accounts' public keys, webhook secrets, and the keys of keyed hashes and of the
    /// read models' seal.
    static let wrappedTextColumns: [(table: String, id: String, columns: [String], context: String)] = [
        ("signing_keys", "kid", ["private_key_pem"], "signing_keys:"),
        ("firebase_service_accounts", "key_id", ["public_key_pem"], "firebase_service_accounts:"),
        ("webhook_subscriptions", "id", ["secret", "previous_secret"], "webhook_subscriptions:"),
        ("hash_keys", "name", ["key"], "hash_keys:"),
    ]

    /// Counts every stored key and secret the master key wraps (personal-data keys, the day keys of records
    /// about no one, ``wrappedTextColumns``) by what wraps them.
    public static func check(on client: PostgresClient, ring: MasterKeyRing?) async throws -> Report {
        // Counted in the database, by the id each stored key names: a check before every command must not read
        // every user's key into memory. A wrapped key is `TMK1` ‖ id ‖ …; a wrapped text secret `tmk1:` ‖ base64 of it.
        let texts = wrappedTextColumns.flatMap { entry in
            entry.columns.map { "SELECT \($0) AS value FROM \(entry.table)" }
        }.joined(separator: " UNION ALL ")
        let rows = try await client.query(PostgresQuery(unsafeSQL: """
            SELECT id, count(*)::int AS n FROM (
                SELECT CASE WHEN key IS NULL THEN 'destroyed'
                            WHEN length(key) > 12 AND substring(key FROM 1 FOR 4) = '\\x544d4b31'::bytea
                                THEN encode(substring(key FROM 5 FOR 8), 'hex')
                            ELSE 'unwrapped' END AS id
                FROM (SELECT key FROM personal_data_keys UNION ALL SELECT key FROM expiring_keys) AS stored
                UNION ALL
                SELECT CASE WHEN value LIKE 'tmk1:%' AND substring(value FROM 6 FOR 16) ~ '^[A-Za-z0-9+/]{16}$'
                                THEN encode(substring(decode(substring(value FROM 6 FOR 16), 'base64') FROM 5 FOR 8), 'hex')
                            ELSE 'unwrapped' END
                FROM (\(texts)) AS secrets WHERE value IS NOT NULL
            ) AS ids GROUP BY id
            """))
        var report = Report()
        for row in rows {
            let id: String = try row.decode("id"), count: Int = try row.decode("n")
            switch id {
            case "destroyed": report.destroyed += count
            case "unwrapped": report.unwrapped += count
            case ring?.current.id.hexString: report.current += count
            case _ where ring?.others.contains(where: { $0.id.hexString == id }) == true: report.older += count
            default: report.unknown += count
            }
        }
        return report
    }

    /// Re-wraps every stored personal-data key with `new` in one transaction, without touching an event
    /// (and the other stored secrets: signing keys, Firebase service-account keys, webhook secrets, hash keys):
    /// until it commits, the keys stay as `ring` (and anyone holding the old file) reads them; after, only
    /// `new` opens them. Keys stored before wrapping are wrapped too. Answers how many were re-wrapped.
    ///
    /// - Parameter afterBatch: called after each batch is written, inside the transaction (a test's crash).
    public static func rotate(
        on client: PostgresClient, from ring: MasterKeyRing?, to new: MasterKey, afterBatch: @Sendable () throws -> Void = {}
    ) async throws -> Int {
        let target = MasterKeyRing(current: new)
        return try await client.withTransaction { connection in
            let rows = try await connection.query("SELECT user_id, key FROM personal_data_keys WHERE key IS NOT NULL ORDER BY user_id FOR UPDATE")
            var rewrapped: [(UUID, [UInt8])] = []
            for row in rows {
                let userId: UUID = try row.decode("user_id")
                let stored: [UInt8] = try row.decode("key")
                let context = PersonalDataVault.wrappingContext(userId)
                rewrapped.append((userId, try target.wrap(try ring.unwrap(stored, context: context), context: context)))
            }
            // The text secrets: signing keys' private halves, Firebase service accounts' public keys, webhook secrets.
            var texts = 0
            for entry in wrappedTextColumns {
                for column in entry.columns {
                    let rows = try await connection.query("""
                        SELECT \(unsafeSQL: entry.id)::text AS id, \(unsafeSQL: column) AS value FROM \(unsafeSQL: entry.table)
                        WHERE \(unsafeSQL: column) IS NOT NULL FOR UPDATE
                        """)
                    for row in rows {
                        let id: String = try row.decode("id")
                        let value: String = try row.decode("value")
                        let context = entry.context + id
                        let rewrappedText = try Optional(target).wrapText(try ring.unwrapText(value, context: context), context: context)
                        try await connection.query("""
                            UPDATE \(unsafeSQL: entry.table) SET \(unsafeSQL: column) = \(rewrappedText) WHERE \(unsafeSQL: entry.id)::text = \(id)
                            """)
                        texts += 1
                    }
                }
            }
            // The day keys of records about no one (few: two a day, destroyed after 30 days).
            var expiring = 0
            for row in try await connection.query("SELECT name, key FROM expiring_keys WHERE key IS NOT NULL FOR UPDATE") {
                let name: String = try row.decode("name")
                let context = ExpiringKeys.wrappingContext(name)
                let key = try target.wrap(try ring.unwrap(try row.decode("key"), context: context), context: context)
                try await connection.query("UPDATE expiring_keys SET key = \(key) WHERE name = \(name)")
                expiring += 1
            }
            var start = 0
            while start < rewrapped.count {
                let batch = rewrapped[start..<min(start + 1000, rewrapped.count)]
                try await connection.query("""
                    UPDATE personal_data_keys AS k SET key = v.key
                    FROM (SELECT unnest(\(PostgresArray(batch.map(\.0)))::uuid[]) AS user_id,
                                 unnest(\(PostgresArray(batch.map { "\\x" + $0.1.hexString }))::bytea[]) AS key) AS v
                    WHERE k.user_id = v.user_id
                    """)
                try afterBatch()
                start += 1000
            }
            return rewrapped.count + expiring + texts
        }
    }
}
