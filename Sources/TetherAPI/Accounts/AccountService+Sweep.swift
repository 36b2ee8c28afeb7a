import Foundation
import TetherCore
import TetherPostgres

/// `tether sweep anonymous`: anonymous users nobody has used for a while go through the normal erasure.
extension AccountService {
    /// Anonymous users (their only identity is `anonymous`) with no use since `cutoff`: not made, signed
    /// in, refreshed, or seen with a Parse session token (``ParseSessions`` notes that hourly) since.
    public func inactiveAnonymousUsers(since cutoff: Date, limit: Int = 500) async throws -> [UUID] {
        let at = ISO8601Milliseconds.format(cutoff)
        let rows = try await database.query("""
            SELECT u.id FROM users u
            WHERE u.erased_at IS NULL AND coalesce(u.last_sign_in_at, u.created_at) < \(at)::timestamptz AND u.created_at < \(at)::timestamptz
              AND EXISTS (SELECT 1 FROM identities i WHERE i.user_id = u.id AND i.provider = 'anonymous')
              AND NOT EXISTS (SELECT 1 FROM identities i WHERE i.user_id = u.id AND i.provider <> 'anonymous')
              AND NOT EXISTS (
                  SELECT 1 FROM sessions s LEFT JOIN session_activity a ON a.session_id = s.id
                  WHERE s.user_id = u.id
                    AND greatest(s.started_at, s.last_refreshed_at, a.last_used_at) >= \(at)::timestamptz)
            ORDER BY u.created_at, u.id LIMIT \(limit)
            """)
        return try rows.map { try $0.decode("id") }
    }

    /// Erases every anonymous user inactive for `inactiveFor` seconds before `now`, each by its own
    /// erasure command; a user who came back (signed in, or linked a real identity) between the search
    /// and their erasure is left alone. Answers how many were erased.
    public func sweepAnonymousUsers(inactiveFor: TimeInterval, now: Date = Date(), metadata: EventMetadata) async throws -> Int {
        let cutoff = now.addingTimeInterval(-inactiveFor)
        var erased = 0
        var skipped: Set<UUID> = []
        while true {
            let batch = try await inactiveAnonymousUsers(since: cutoff).filter { !skipped.contains($0) }
            guard !batch.isEmpty else { return erased }
            for userId in batch {
                do {
                    try await erase(userId: userId, reason: "anonymous_inactive", context: CommandContext(metadata: metadata)) { account in
                        account.isAnonymous && (account.lastSignInAt ?? account.createdAt ?? now) < cutoff
                    }
                    erased += 1
                } catch is ConditionNoLongerHolds {
                    skipped.insert(userId)
                }
            }
        }
    }
}
