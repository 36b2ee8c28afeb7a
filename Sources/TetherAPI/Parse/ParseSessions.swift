import Foundation
import TetherCore
import TetherCrypto
import TetherPostgres

/// Parse's session tokens: `r:` and 32 lowercase hex digits (128 random bits), which do not rotate.
/// Only their SHA-256 is stored, as the session's secret hash.
struct ParseSessionTokenFormat: SessionSecretFormat {
    static let prefix = "r:"
    /// How long a Parse session lasts (Parse Server's default `sessionLength`: one year).
    static let lifetime: TimeInterval = 365 * 24 * 3600

    var kind: SessionSecretKind { .parseSessionToken }

    func newSecret() -> String { Self.prefix + SecureRandom.bytes(count: 16).hexString }

    func hash(_ secret: String) -> String { DigestAlgorithm.sha256.hash(Array(secret.utf8)).hexString }

    /// Whether `token` has the exact shape `newSecret()` makes.
    static func isWellFormed(_ token: String) -> Bool {
        let bytes = Array(token.utf8)
        guard bytes.count == 34, bytes[0] == UInt8(ascii: "r"), bytes[1] == UInt8(ascii: ":") else { return false }
        return bytes[2...].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// A session to open for `provider` from `installationId`, expiring a year after `now`, and its token.
    func newSession(provider: String, installationId: String?, now: Date) -> (session: NewSession, token: String) {
        var (session, token) = newSession(amr: AccountCommands.authenticationMethods(provider: provider), jkt: nil)
        session.installationId = installationId
        session.expiresAt = now.addingTimeInterval(Self.lifetime)
        return (session, token)
    }
}

/// A live Parse session, found by its token.
struct ParseSession: Sendable {
    var id: UUID
    var userId: UUID
    var token: String
    var startedAt: Date
    var authTime: Date
    var expiresAt: Date?
    var amr: [String]
}

/// Finds the session of a presented `r:` token, and notes (at most once an hour) that it was used.
struct ParseSessions: Sendable {
    let database: PostgresClient
    static let format = ParseSessionTokenFormat()

    /// The live session of `token`: not ended, not expired, of a user who is neither disabled nor erased; nil otherwise.
    func session(_ token: String) async throws -> ParseSession? {
        guard ParseSessionTokenFormat.isWellFormed(token) else { return nil }
        let rows = try await database.query("""
            SELECT s.id, s.user_id, s.started_at, s.auth_time, s.expires_at, s.amr,
                   a.last_used_at IS NULL OR a.last_used_at < now() - interval '1 hour' AS stale
            FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id JOIN users u ON u.id = s.user_id
            LEFT JOIN session_activity a ON a.session_id = s.id
            WHERE r.token_hash = \(Self.format.hash(token)) AND s.secret_kind = \(SessionSecretKind.parseSessionToken.rawValue)
              AND s.ended_at IS NULL AND NOT u.disabled AND u.erased_at IS NULL AND (s.expires_at IS NULL OR s.expires_at > now())
            """)
        guard let row = rows.first else { return nil }
        let session = ParseSession(
            id: try row.decode("id"), userId: try row.decode("user_id"), token: token, startedAt: try row.decode("started_at"),
            authTime: try row.decode("auth_time"), expiresAt: try row.decode("expires_at"),
            amr: try row.decode("amr", as: PostgresJSON.self).decode([String].self))
        if try row.decode("stale", as: Bool.self) {
            // Only what `tether sweep anonymous` asks ("still in use?"), and only once an hour.
            await SessionActivity.noteUse(of: session.id, in: database)
        }
        return session
    }

    /// The session `token` named, live or not: a retry of the request that ended it (a password change)
    /// still gets that request's kept answer.
    func anySessionId(_ token: String) async throws -> UUID? {
        guard ParseSessionTokenFormat.isWellFormed(token) else { return nil }
        let rows = try await database.query("""
            SELECT s.id FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id
            WHERE r.token_hash = \(Self.format.hash(token)) AND s.secret_kind = \(SessionSecretKind.parseSessionToken.rawValue)
            """)
        return try rows.first?.decode("id")
    }
}
