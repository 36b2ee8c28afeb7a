import Foundation
import TetherCore

/// Projects `AdminKeyCreated` and `AdminKeyRevoked` into `admin_keys`.
///
/// Runs inside the append's transaction, like ``AccountProjection``. Timestamps
/// come from the event (`at`, the text of its `occurred_at`), so rebuilding from
/// the log gives identical rows. Request events of the same streams change nothing here.
public enum AdminKeyProjection {
    /// The tables this projection owns.
    public static let tables = ["admin_keys"]

    /// Applies one admin event.
    public static func apply(_ event: AdminEvent, at: String, on connection: PostgresConnection) async throws {
        switch event {
        case .keyCreated(let payload):
            try await connection.query("""
                INSERT INTO admin_keys (id, name, role, key_hash, created_at)
                VALUES (\(payload.keyId), \(payload.name), \(payload.role), \(payload.keyHash), \(at)::timestamptz)
                """)
        case .keyRevoked(let payload):
            try await connection.query("""
                UPDATE admin_keys SET revoked_at = \(at)::timestamptz WHERE id = \(payload.keyId) AND revoked_at IS NULL
                """)
        case .userViewed, .usersSearched, .historyViewed, .actionRequested, .eventsRead:
            break
        }
    }
}
