import Foundation
import Synchronization
import TetherCore

/// The ``NonceStore`` in PostgreSQL's `used_nonces` table.
///
/// The primary key `(scope, nonce_hash)` decides races: of two requests
/// presenting the same nonce at once, exactly one insert succeeds. Expired
/// rows are deleted at most once per ``purgeInterval`` by whichever call comes
/// along, so the table holds roughly the nonces of the last token lifetime.
public struct PostgresNonceStore: NonceStore {
    /// The pool the statements run on (as the service role, which may select, insert and delete).
    public let client: PostgresClient
    /// The least time between two purges of expired rows.
    public let purgeInterval: TimeInterval
    private let lastPurge = LastPurge()

    /// A store on `client`, purging expired rows at most every `purgeInterval` seconds.
    public init(client: PostgresClient, purgeInterval: TimeInterval = 60) {
        self.client = client
        self.purgeInterval = purgeInterval
    }

    /// Inserts the nonce; a conflicting row that has expired is replaced, a live one means reuse.
    public func consume(_ nonce: UsedNonce, now: Date) async throws -> NonceConsumption {
        if lastPurge.isDue(at: now, interval: purgeInterval) {
            try await purgeExpired(now: now)
        }
        if try await insert(nonce) { return .accepted }
        // The service role may not UPDATE, so a stale row is deleted and the insert retried;
        // the primary key still lets only one of two racing requests win.
        let stale = try await client.query("""
            DELETE FROM used_nonces
            WHERE scope = \(nonce.scope) AND nonce_hash = \(nonce.hash) AND expires_at <= \(now)
            """)
        guard stale.affectedRows > 0, try await insert(nonce) else { return .alreadyUsed }
        return .accepted
    }

    public func release(_ nonce: UsedNonce) async throws {
        try await client.query("DELETE FROM used_nonces WHERE scope = \(nonce.scope) AND nonce_hash = \(nonce.hash)")
    }

    /// Deletes every record that expired at or before `now`; returns how many were deleted.
    @discardableResult
    public func purgeExpired(now: Date) async throws -> Int {
        let rows = try await client.query("DELETE FROM used_nonces WHERE expires_at <= \(now)")
        return rows.affectedRows
    }

    private func insert(_ nonce: UsedNonce) async throws -> Bool {
        let rows = try await client.query("""
            INSERT INTO used_nonces (scope, nonce_hash, expires_at)
            VALUES (\(nonce.scope), \(nonce.hash), \(nonce.expiresAt))
            ON CONFLICT (scope, nonce_hash) DO NOTHING
            """)
        return rows.affectedRows == 1
    }
}

/// When the store last purged, shared by copies of the store value.
private final class LastPurge: Sendable {
    private let time = Mutex<Date?>(nil)

    /// Whether a purge is due at `now`; if so, records `now` so that concurrent callers skip it.
    func isDue(at now: Date, interval: TimeInterval) -> Bool {
        time.withLock { last in
            if let last, now.timeIntervalSince(last) < interval, now >= last { return false }
            last = now
            return true
        }
    }
}
