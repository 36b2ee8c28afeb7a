import Foundation
import TetherPostgres

/// When a session whose secret is used without a recorded event (a Parse token, a Firebase refresh token)
/// was last used, kept at most to the hour in `session_activity` for `tether sweep anonymous`.
enum SessionActivity {
    /// Notes a use of `sessionId` now, unless one was noted within the hour; a failure changes nothing the
    /// caller answers.
    static func noteUse(of sessionId: UUID, in database: PostgresClient) async {
        _ = try? await database.query("""
            INSERT INTO session_activity (session_id, last_used_at) VALUES (\(sessionId), now())
            ON CONFLICT (session_id) DO UPDATE SET last_used_at = excluded.last_used_at
            WHERE session_activity.last_used_at < now() - interval '1 hour'
            """)
    }
}
