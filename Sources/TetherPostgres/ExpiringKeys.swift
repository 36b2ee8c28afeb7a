import Foundation
import TetherCore
import TetherCrypto

/// Keys that seal, for a limited time, what the log keeps about no known person (`expiring_keys`,
/// `023_expiring_keys.sql`): one key a day and ``Purpose``, wrapped with the master key, readable for
/// ``lifetime`` from the start of its day and destroyed after. What a key sealed reads as erased once
/// it is gone, exactly like the personal data of an erased user.
///
/// Nothing has to run on time for that: readers use a key only before its `expires_at`, and every
/// writer that fetches a key destroys the ones past it in the same transaction.
public enum ExpiringKeys {
    /// What a key seals; each has keys of its own.
    public enum Purpose: String, Sendable, CaseIterable {
        /// The email, provider uid and free text of an admin's user search (`AdminUsersSearched`).
        case searchTerms = "search-terms"
        /// The client address and user agent of a failed or throttled sign-in for an account no one
        /// holds, and the hash that names its stream. No longer written (such refusals are only counted,
        /// `026_sign_in_failure_tallies.sql`); logs from before keep reading until their keys expire.
        case signInFailures = "sign-in-failures"
    }

    /// How long what a key seals stays readable, at most: 30 days from the start of the key's day.
    public static let lifetime: TimeInterval = 30 * 86_400

    /// A key to seal with today, and the name it is stored under (which sealed payloads carry).
    public struct Key: Sendable, Hashable {
        public var name: String
        public var bytes: [UInt8]
    }

    /// The purpose whose key seals events of `type` that name no user; nil for types that keep nothing personal.
    public static func purpose(forUnattributed type: String) -> Purpose? {
        switch type {
        case "AdminUsersSearched": .searchTerms
        case "SignInFailed", "SignInThrottled": .signInFailures
        default: nil
        }
    }

    /// The name of `purpose`'s key for the UTC day of `date`: `search-terms/2026-12-01`.
    static func name(_ purpose: Purpose, day date: Date) -> String {
        purpose.rawValue + "/" + date.formatted(dayFormat)
    }

    /// When the key of `date`'s day stops opening what it sealed.
    static func expiry(ofDay date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 86_400).rounded(.down) * 86_400 + lifetime)
    }

    /// What a stored key is bound to: its row.
    public static func wrappingContext(_ name: String) -> String { "expiring_keys:" + name }

    /// The statements that fetch today's key of `purpose`, making it on first use and destroying every
    /// key past its expiry, for a caller that pipelines them inside its transaction; read the last one's
    /// rows with ``key(from:named:masterKeys:)``. `name` is the key's name.
    static func keyStatements(
        _ purpose: Purpose, now: Date, masterKeys: MasterKeyRing?
    ) throws -> (name: String, statements: [PostgresQuery]) {
        let name = name(purpose, day: now)
        let made = try masterKeys.wrap(SecureRandom.bytes(count: 32), context: wrappingContext(name))
        return (name, [
            """
            WITH destroyed AS (
                UPDATE expiring_keys SET key = NULL, destroyed_at = now() WHERE key IS NOT NULL AND expires_at <= now())
            INSERT INTO expiring_keys (name, key, expires_at) VALUES (\(name), \(made), \(expiry(ofDay: now)))
            ON CONFLICT (name) DO NOTHING
            """,
            // A second statement: its snapshot sees a key a concurrent first use committed meanwhile.
            "SELECT key FROM expiring_keys WHERE name = \(name) AND key IS NOT NULL AND expires_at > now()",
        ])
    }

    /// The key the last of ``keyStatements(_:now:masterKeys:)`` read; nil when it expired already.
    static func key(from rows: PostgresRows, named name: String, masterKeys: MasterKeyRing?) throws -> Key? {
        guard let stored: [UInt8] = try rows.first?.decode("key") else { return nil }
        return Key(name: name, bytes: try masterKeys.unwrap(stored, context: wrappingContext(name)))
    }

    /// Today's key of `purpose`, on `connection` inside the caller's transaction (one round trip).
    public static func key(_ purpose: Purpose, on connection: PostgresConnection, masterKeys: MasterKeyRing?) async throws -> Key? {
        let (name, statements) = try keyStatements(purpose, now: Date(), masterKeys: masterKeys)
        let rows = try await connection.run { job in try job.pipeline(statements) }
        return try key(from: rows[rows.count - 1], named: name, masterKeys: masterKeys)
    }

    /// The statement that reads the live keys of `names`; read its rows with ``keys(from:masterKeys:)``.
    static func keysStatement(named names: Set<String>) -> PostgresQuery {
        """
        SELECT name, key FROM expiring_keys
        WHERE name = ANY(\(PostgresArray(Array(names)))::text[]) AND key IS NOT NULL AND expires_at > now()
        """
    }

    /// The keys the rows of ``keysStatement(named:)`` hold, by name.
    static func keys(from rows: PostgresRows, masterKeys: MasterKeyRing?) throws -> [String: [UInt8]] {
        var keys: [String: [UInt8]] = [:]
        for row in rows {
            let name: String = try row.decode("name")
            keys[name] = try masterKeys.unwrap(try row.decode("key"), context: wrappingContext(name))
        }
        return keys
    }

    /// A keyed hash of `text` under `key`, 16 bytes in hex: a name that links records for as long as the key lives.
    public static func digest(_ text: String, key: Key) -> String {
        Array(HMAC.authenticationCode(for: Array(text.utf8), key: key.bytes, digest: .sha256).prefix(16)).hexString
    }

    private static let dayFormat = Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day().dateSeparator(.dash)
}
