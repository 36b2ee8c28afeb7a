import Foundation
import TetherCore

/// Projects account events into `users`, `identities`, `sessions` and `refresh_tokens`.
///
/// Runs inside the append's transaction, so a read after a write sees it and the
/// tables' unique constraints decide races (`identities_provider_uid_key`: a
/// credential belongs to one user; `identities_user_provider_key`: one identity
/// per provider per user). Timestamps come from the event (`at`, the text of its
/// `occurred_at`), so rebuilding from the log gives identical rows.
///
/// `tether replay` rebuilds these tables through ``Projection/accounts``, calling the
/// same `apply` with a shadow schema first on the search path: table names here stay
/// unqualified, and a table added to `tables` is rebuilt with no change to replay.
public enum AccountProjection {
    /// The tables this projection owns, in an order safe for deleting rows.
    public static let tables = [
        "mfa_challenges", "mfa_recovery_codes", "mfa_factors", "refresh_tokens", "sessions", "identities", "users",
    ]

    /// Applies one event of user `userId`.
    public static func apply(
        _ event: AccountEvent, userId: UUID, at: String, on connection: PostgresConnection
    ) async throws {
        switch event {
        case .userRegistered(let payload):
            try await connection.query("""
                INSERT INTO users (id, email, email_normalized, email_verified, display_name, photo_url, created_at, version)
                VALUES (\(userId), \(payload.personal.email), \(payload.personal.email.map(ExternalIdentity.normalize)),
                        \(payload.emailVerified), \(payload.personal.displayName), \(payload.personal.photoURL), \(at)::timestamptz, 0)
                """)
        case .identityLinked(let payload) where payload.uid == ExternalIdentity.erasedUID:
            break // replayed after the user was erased: no identity to show (UserErased removes the rest)
        case .identityLinked(let payload):
            try await connection.query("""
                INSERT INTO identities (user_id, provider, provider_uid, email, email_verified, display_name, photo_url, linked_at)
                VALUES (\(userId), \(payload.provider), \(payload.uid), \(payload.personal.email), \(payload.emailVerified),
                        \(payload.personal.displayName), \(payload.personal.photoURL), \(at)::timestamptz)
                """)
            try await connection.query("""
                UPDATE users SET
                    display_name = coalesce(display_name, \(payload.personal.displayName)),
                    photo_url = coalesce(photo_url, \(payload.personal.photoURL)),
                    email_verified = CASE WHEN email IS NULL THEN \(payload.emailVerified && payload.personal.email != nil) ELSE email_verified END,
                    email = coalesce(email, \(payload.personal.email)),
                    email_normalized = coalesce(email_normalized, \(payload.personal.email.map(ExternalIdentity.normalize)))
                WHERE id = \(userId)
                """)
        case .identityUnlinked(let payload):
            try await connection.query("DELETE FROM identities WHERE user_id = \(userId) AND provider = \(payload.provider)")
        case .emailVerified(let payload):
            try await connection.query("""
                UPDATE users SET email_verified = true,
                    email = coalesce(\(payload.personal.email), email),
                    email_normalized = coalesce(\(payload.personal.email.map(ExternalIdentity.normalize)), email_normalized)
                WHERE id = \(userId)
                """)
        case .passwordSet(let payload):
            try await connection.query("""
                UPDATE identities SET password_hash = \(payload.personal.passwordHash)
                WHERE user_id = \(userId) AND provider = 'password'
                """)
        case .signedIn:
            try await connection.query("UPDATE users SET last_sign_in_at = \(at)::timestamptz WHERE id = \(userId)")
        case .sessionStarted(let payload):
            try await connection.query("""
                INSERT INTO sessions (id, user_id, refresh_token_hash, jkt, amr, auth_time, started_at)
                VALUES (\(payload.sessionId), \(userId), \(payload.refreshTokenHash), \(payload.jkt),
                        \(try PostgresJSON(encoding: payload.amr))::jsonb, \(ISO8601Milliseconds.format(payload.authTime))::timestamptz,
                        \(at)::timestamptz)
                """)
            try await connection.query("""
                INSERT INTO refresh_tokens (token_hash, session_id, generation) VALUES (\(payload.refreshTokenHash), \(payload.sessionId), 0)
                """)
        case .sessionRefreshed(let payload):
            try await connection.query("""
                UPDATE sessions SET refresh_token_hash = \(payload.refreshTokenHash), generation = \(payload.generation),
                    last_refreshed_at = \(at)::timestamptz
                WHERE id = \(payload.sessionId)
                """)
            try await connection.query("""
                INSERT INTO refresh_tokens (token_hash, session_id, generation)
                VALUES (\(payload.refreshTokenHash), \(payload.sessionId), \(payload.generation))
                """)
        case .sessionEnded(let payload):
            try await connection.query("""
                UPDATE sessions SET ended_at = \(at)::timestamptz, end_reason = \(payload.reason)
                WHERE id = \(payload.sessionId) AND ended_at IS NULL
                """)
        case .sessionsRevoked(let payload):
            try await connection.query("""
                UPDATE users SET valid_since = \(ISO8601Milliseconds.format(payload.validSince))::timestamptz WHERE id = \(userId)
                """)
            try await connection.query("""
                UPDATE sessions SET ended_at = \(at)::timestamptz, end_reason = 'revoked'
                WHERE user_id = \(userId) AND ended_at IS NULL
                """)
        case .userDisabled:
            try await connection.query("UPDATE users SET disabled = true WHERE id = \(userId)")
        case .userEnabled:
            try await connection.query("UPDATE users SET disabled = false WHERE id = \(userId)")
        case .userErased:
            // The row stays so the id keeps resolving; nothing personal remains in any read model.
            for table in ["mfa_challenges", "mfa_recovery_codes", "mfa_factors", "identities"] {
                try await connection.query("DELETE FROM \(unsafeSQL: table) WHERE user_id = \(userId)")
            }
            try await connection.query("""
                UPDATE users SET email = NULL, email_normalized = NULL, email_verified = false, display_name = NULL,
                    photo_url = NULL, disabled = true, erased_at = \(at)::timestamptz
                WHERE id = \(userId)
                """)
        default:
            try await applyMFA(event, userId: userId, at: at, on: connection)
        }
    }

    /// Projects the second-factor events into `mfa_factors`, `mfa_recovery_codes` and `mfa_challenges`.
    private static func applyMFA(_ event: AccountEvent, userId: UUID, at: String, on connection: PostgresConnection) async throws {
        switch event {
        case .mfaFactorEnrolled(let payload):
            try await connection.query("""
                INSERT INTO mfa_factors (id, user_id, type, display_name, phone_hint, enrolled_at)
                VALUES (\(payload.factorId), \(userId), \(payload.type.rawValue), \(payload.personal.displayName),
                        \(payload.personal.phoneNumber.map(PhoneNumber.hint)), \(at)::timestamptz)
                """)
        case .mfaFactorConfirmed(let payload):
            try await connection.query("""
                UPDATE mfa_factors SET confirmed_at = \(at)::timestamptz,
                    last_used_step = coalesce(\(payload.totpStep), last_used_step)
                WHERE id = \(payload.factorId)
                """)
        case .mfaFactorRemoved(let payload):
            try await connection.query("DELETE FROM mfa_factors WHERE id = \(payload.factorId)")
        case .mfaRecoveryCodesIssued(let payload):
            try await connection.query("DELETE FROM mfa_recovery_codes WHERE user_id = \(userId)")
            try await connection.query("""
                INSERT INTO mfa_recovery_codes (user_id, code_hash, issued_at)
                SELECT \(userId), hash, \(at)::timestamptz FROM unnest(\(PostgresArray(payload.codeHashes))::text[]) AS hash
                """)
        case .mfaChallengeIssued(let payload):
            try await connection.query("""
                INSERT INTO mfa_challenges (id, user_id, first_factor, amr, expires_at, issued_at)
                VALUES (\(payload.challengeId), \(userId), \(payload.firstFactor), \(try PostgresJSON(encoding: payload.amr))::jsonb,
                        \(ISO8601Milliseconds.format(payload.expiresAt))::timestamptz, \(at)::timestamptz)
                """)
        case .mfaCodeSent(let payload):
            if let challengeId = payload.challengeId {
                try await connection.query("""
                    UPDATE mfa_challenges SET factor_id = \(payload.factorId),
                        code_expires_at = \(ISO8601Milliseconds.format(payload.expiresAt))::timestamptz
                    WHERE id = \(challengeId)
                    """)
            }
        case .mfaCodeAccepted(let payload):
            try await connection.query("UPDATE mfa_challenges SET code_expires_at = NULL WHERE id = \(payload.challengeId)")
            if let step = payload.totpStep, let factorId = payload.factorId {
                try await connection.query("UPDATE mfa_factors SET last_used_step = \(step) WHERE id = \(factorId)")
            }
        case .mfaCodeRejected(let payload):
            if let challengeId = payload.challengeId {
                try await connection.query("UPDATE mfa_challenges SET attempts = \(payload.attempt) WHERE id = \(challengeId)")
            }
        case .mfaRecoveryCodeUsed(let payload):
            try await connection.query("""
                UPDATE mfa_recovery_codes SET used_at = \(at)::timestamptz WHERE user_id = \(userId) AND code_hash = \(payload.codeHash)
                """)
        case .mfaChallengeEnded(let payload):
            try await connection.query("""
                UPDATE mfa_challenges SET ended_at = \(at)::timestamptz, end_reason = \(payload.reason) WHERE id = \(payload.challengeId)
                """)
        default:
            break // delivery failures change no read model; account events are handled by `apply`
        }
    }

    /// Records the stream version the user's row reflects (once per command, not per event).
    public static func recordVersion(_ version: Int, of userId: UUID, on connection: PostgresConnection) async throws {
        try await connection.query("UPDATE users SET version = \(version) WHERE id = \(userId)")
    }
}
