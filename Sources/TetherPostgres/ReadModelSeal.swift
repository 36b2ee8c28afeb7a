import Foundation
import Synchronization
import TetherCore
import TetherCrypto

/// How the read models keep personal data: every email, name, photo URL, provider uid, password
/// hash, custom-claims document and phone hint in `users`, `identities` and `mfa_factors` is sealed
/// (AES-256-GCM) under one key of the database's (`hash_keys` row `read-models`, wrapped with the
/// master key like every stored key), so a dump without `TETHER_MASTER_KEY_FILE` reads none of it.
///
/// Sealing is deterministic: the nonce is an HMAC of the value under a key derived from the same
/// stored key. The same value seals to the same text wherever it is, so
/// - a rebuild from the log gives byte-identical tables (`tether replay --verify` compares them);
/// - equality still works in SQL: lookups compare `provider_uid = seal(uid)`, and the unique
///   constraint on `(provider, provider_uid)` still decides which user holds a credential.
///
/// What it gives away is equality: a dump shows which rows hold the same value, never the value.
/// Substrings cannot be searched: support search matches whole words instead, kept sealed beside
/// the values (``searchTerms(_:)``: `users.email_terms`, `users.name_terms`, `identities.search_terms`).
///
/// Stored form: `rm1:` and base64 of nonce ‖ ciphertext ‖ tag.
public struct ReadModelSeal: Sendable, Hashable {
    private let encryptionKey: [UInt8]
    /// Keyed once: every lookup of a sealed value (a sign-in's of its provider uid) makes a nonce.
    private let nonceKey: HMACKey

    /// The name of the stored key's row in `hash_keys`.
    public static let keyName = "read-models"
    static let prefix = "rm1:"

    /// The seal of the stored 32-byte key `key`: its encryption and nonce keys are derived from it.
    public init(key: [UInt8]) throws {
        guard key.count == 32 else {
            throw CryptoError.invalidInput.with(detail: "the read-model key is 32 bytes, not \(key.count)")
        }
        encryptionKey = HMAC.authenticationCode(for: Array("tether read models: encryption".utf8), key: key, digest: .sha256)
        nonceKey = HMACKey(HMAC.authenticationCode(for: Array("tether read models: nonce".utf8), key: key, digest: .sha256), digest: .sha256)
    }

    /// `text` sealed for a read model; nil stays nil (a SQL NULL).
    public func seal(_ text: String?) throws -> String? {
        guard let text else { return nil }
        let plaintext = Array(text.utf8)
        let nonce = Array(nonceKey.authenticationCode(for: plaintext).prefix(AESGCM.nonceByteCount))
        let box = try AESGCM.seal(plaintext, key: encryptionKey, nonce: nonce)
        return Self.prefix + Data(box.combined).base64EncodedString()
    }

    /// `text` sealed, for a value that is never nil.
    public func seal(_ text: String) throws -> String {
        // A non-nil value seals to a non-nil text.
        try seal(Optional(text))!
    }

    /// The most words one value is found by (a long name's later words are not searchable).
    public static let maximumTerms = 16

    /// The sealed words support search finds `text` by; nil for nil. In lower case and trimmed: the whole
    /// value, an email's part before and after its `@`, and each word between spaces; words of one
    /// character are left out, and no more than ``maximumTerms``. In that order, once each, so that the
    /// statements and the bulk replay store the same array.
    public func searchTerms(_ text: String?) throws -> [String]? {
        try searchTerms(of: [text])
    }

    /// The sealed words of several values (an identity's uid, email and name), each value's in turn, once
    /// each; nil when every value is nil.
    public func searchTerms(of texts: [String?]) throws -> [String]? {
        let present = texts.compactMap { $0 }
        guard !present.isEmpty else { return nil }
        var terms: [String] = []
        for text in present {
            for term in Self.terms(of: text) where !terms.contains(term) { terms.append(term) }
        }
        return try terms.map(seal)
    }

    /// The sealed form of free text searched for: one term, as ``searchTerms(_:)`` keeps a whole value.
    public func searchTerm(_ text: String) throws -> String {
        try seal(Self.normalizedTerm(text))
    }

    static func terms(of text: String) -> [String] {
        let whole = normalizedTerm(text)
        var terms: [String] = []
        func add(_ term: Substring) {
            guard term.count >= 2, terms.count < maximumTerms, !terms.contains(where: { $0 == term }) else { return }
            terms.append(String(term))
        }
        add(whole[...])
        if let at = whole.lastIndex(of: "@") {
            add(whole[..<at])
            add(whole[whole.index(after: at)...])
        }
        for word in whole.split(whereSeparator: \.isWhitespace) { add(word) }
        return terms
    }

    /// Trimmed and in lower case, as emails are normalised (so a whole email's word is its `email_normalized`).
    private static func normalizedTerm(_ text: String) -> String {
        ExternalIdentity.normalize(text)
    }

    /// The text a read model's `stored` value seals; nil stays nil.
    ///
    /// - Throws: when `stored` is not sealed, or not under this key: a read model never holds personal
    ///   data in clear, so a value that is must have been written around the projections.
    public func open(_ stored: String?) throws -> String? {
        guard let stored else { return nil }
        guard stored.hasPrefix(Self.prefix), let combined = Data(base64Encoded: String(stored.dropFirst(Self.prefix.count))) else {
            throw CryptoError.invalidInput.with(detail: "a read model holds a value that is not sealed")
        }
        let plaintext = try AESGCM.open(try AESGCM.SealedBox(combined: Array(combined)), key: encryptionKey)
        return String(decoding: plaintext, as: UTF8.self)
    }

    /// The database's read-model seal: its key in `hash_keys` (``HashKeys``), made on first use.
    ///
    /// - Throws: ``RebuildPending`` while a migration's rebuild of the read models has not run: until
    ///   then they hold values sealing does not find (`027_sealed_read_models.sql`). `tether replay`
    ///   itself passes `whileRebuildPending`.
    public static func load(on client: PostgresClient, whileRebuildPending: Bool = false) async throws -> ReadModelSeal {
        if !whileRebuildPending, let pending = try RebuildPending(try await client.query(RebuildPending.statement)) { throw pending }
        return try ReadModelSeal(key: try await HashKeys.key(keyName, on: client))
    }
}

/// Read models a migration asked to rebuild (`read_model_rebuilds`), not rebuilt yet.
public struct RebuildPending: Error, Sendable, Hashable, CustomStringConvertible {
    public var projections: [String]

    /// The statement whose rows name the pending rebuilds (`projection`, `reason`).
    public static let statement: PostgresQuery = "SELECT projection, reason FROM read_model_rebuilds ORDER BY projection"

    /// The pending rebuilds `rows` of ``statement`` name; nil when there are none.
    public init?(_ rows: PostgresRows) throws {
        guard !rows.isEmpty else { return nil }
        projections = try rows.map { try $0.decode("projection") }
    }

    public var description: String {
        "the read models \(projections.joined(separator: ", ")) wait for the rebuild a migration asked for (run tether migrate)"
    }
}

extension PostgresRow {
    /// The text a sealed read-model column holds, opened with `seal`.
    public func decode(_ name: String, openedWith seal: ReadModelSeal) throws -> String? {
        try seal.open(try decode(name, as: String?.self))
    }
}

/// The read-model seal a pool loaded, kept for the life of the pool.
final class ReadModelSealCache: Sendable {
    private let seal = Mutex<ReadModelSeal?>(nil)

    var loaded: ReadModelSeal? { seal.withLock { $0 } }

    func get(loading load: () async throws -> ReadModelSeal) async throws -> ReadModelSeal {
        if let known = seal.withLock({ $0 }) { return known }
        let loaded = try await load()
        seal.withLock { $0 = loaded }
        return loaded
    }
}

extension PostgresClient {
    /// The seal of this database's read models (``ReadModelSeal``), loaded once per pool.
    public func readModelSeal() async throws -> ReadModelSeal {
        try await readModelSealCache.get { try await ReadModelSeal.load(on: self) }
    }

    /// The seal ``readModelSeal()`` loaded, for code that cannot wait (statements stated inside a
    /// transaction job); whoever runs such code loads it first.
    ///
    /// - Throws: when it was not loaded yet (a caller that skipped ``readModelSeal()``).
    public func loadedReadModelSeal() throws -> ReadModelSeal {
        guard let seal = readModelSealCache.loaded else {
            throw CryptoError.invalidInput.with(detail: "the read-model seal is used before it was loaded")
        }
        return seal
    }
}
