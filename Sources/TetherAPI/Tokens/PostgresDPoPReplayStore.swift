import Foundation
import Synchronization
import TetherJOSE
import TetherPostgres

/// The ``DPoPReplayStore`` in PostgreSQL's `dpop_proofs` table, shared by every Tether process.
///
/// The primary key decides races: of two requests presenting one proof at
/// once, exactly one insert succeeds. Expired rows are deleted at most once per
/// ``purgeInterval`` by whichever call comes along, so the table holds about
/// one proof-acceptance window of proofs.
public struct PostgresDPoPReplayStore: DPoPReplayStore {
    /// The pool the statements run on (as the service role, which may select, insert and delete).
    public let client: PostgresClient
    /// The least time between two purges of expired rows.
    public let purgeInterval: TimeInterval
    private let clock: any WallClock
    private let lastPurge = PurgeSchedule()

    /// A store on `client`, purging expired rows at most every `purgeInterval` seconds.
    public init(client: PostgresClient, purgeInterval: TimeInterval = 60, clock: any WallClock = SystemWallClock()) {
        self.client = client
        self.purgeInterval = purgeInterval
        self.clock = clock
    }

    /// Inserts the proof's identifier; a live row with the same identifier means replay.
    public func recordFirstUse(of identifier: String, until expiry: Date) async throws -> Bool {
        let now = clock.now()
        if lastPurge.isDue(at: now, interval: purgeInterval) {
            try await purgeExpired(now: now)
        }
        if try await insert(identifier, expiry: expiry) { return true }
        // A row that outlived its window (the purge has not run yet) is no evidence of replay;
        // deleting it and inserting again still lets only one of two racing requests win.
        let stale = try await client.query("""
            DELETE FROM dpop_proofs WHERE proof_hash = \(identifier) AND expires_at <= \(now)
            """)
        guard stale.affectedRows > 0 else { return false }
        return try await insert(identifier, expiry: expiry)
    }

    /// Deletes every record that expired at or before `now`; returns how many were deleted.
    @discardableResult
    public func purgeExpired(now: Date) async throws -> Int {
        try await client.query("DELETE FROM dpop_proofs WHERE expires_at <= \(now)").affectedRows
    }

    private func insert(_ identifier: String, expiry: Date) async throws -> Bool {
        let rows = try await client.query("""
            INSERT INTO dpop_proofs (proof_hash, expires_at) VALUES (\(identifier), \(expiry))
            ON CONFLICT (proof_hash) DO NOTHING
            """)
        return rows.affectedRows == 1
    }
}

/// When a store last purged, shared by copies of the store value.
final class PurgeSchedule: Sendable {
    private let last = Mutex<Date?>(nil)

    /// Whether a purge is due at `now`; if so, records `now` so that concurrent callers skip it.
    func isDue(at now: Date, interval: TimeInterval) -> Bool {
        last.withLock { last in
            if let last, now >= last, now.timeIntervalSince(last) < interval { return false }
            last = now
            return true
        }
    }
}
