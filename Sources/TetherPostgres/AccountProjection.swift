import Foundation
import TetherCore

/// Projects account events into `users`, `identities`, `sessions` and `refresh_tokens`.
///
/// Personal data goes in sealed (``ReadModelSeal``): emails, names, photo URLs, provider uids,
/// password hashes, custom claims and phone hints. Sealing is deterministic, so the statements'
/// `coalesce` and the unique constraints work on sealed values as they did on clear ones.
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

    /// Applies one event of user `userId`; `at` is the text of its `occurred_at`.
    public static func apply(
        _ event: AccountEvent, userId: UUID, at: String, seal: ReadModelSeal, on connection: PostgresConnection
    ) async throws {
        for statement in try statements(for: event, userId: userId, at: "\(at)::timestamptz", seal: seal) {
            try await connection.query(statement)
        }
    }

    /// The statements that apply one event of user `userId`, for a caller that batches them.
    ///
    /// `at` is an SQL expression for the event's `occurred_at`: `now()` inside the transaction
    /// that appends it (the column's default), or its stored text when the log is replayed.
    public static func statements(
        for event: AccountEvent, userId: UUID, at: PostgresQuery, seal: ReadModelSeal
    ) throws -> [PostgresQuery] {
        var sql: [PostgresQuery] = []
        switch event {
        case .userRegistered(let payload):
            sql.append("""
                INSERT INTO users (id, email, email_normalized, email_verified, display_name, photo_url, created_at, version,
                                   email_terms, name_terms)
                VALUES (\(userId), \(try seal.seal(payload.personal.email)), \(try seal.seal(payload.personal.email.map(ExternalIdentity.normalize))),
                        \(payload.emailVerified), \(try seal.seal(payload.personal.displayName)), \(try seal.seal(payload.personal.photoURL)), \(at), 0,
                        \(try terms(payload.personal.email, seal))::text[], \(try terms(payload.personal.displayName, seal))::text[])
                """)
        case .identityLinked(let payload) where payload.uid == ExternalIdentity.erasedUID:
            break // replayed after the user was erased: no identity to show (UserErased removes the rest)
        case .identityLinked(let payload):
            let (email, name, photo) = (try seal.seal(payload.personal.email), try seal.seal(payload.personal.displayName),
                                        try seal.seal(payload.personal.photoURL))
            sql.append("""
                INSERT INTO identities (user_id, provider, provider_uid, email, email_verified, display_name, photo_url, linked_at, search_terms)
                VALUES (\(userId), \(payload.provider), \(try seal.seal(payload.uid)), \(email), \(payload.emailVerified),
                        \(name), \(photo), \(at), \(try identityTerms(payload.uid, payload.personal.email, payload.personal.displayName, seal))::text[])
                """)
            sql.append("""
                UPDATE users SET
                    name_terms = CASE WHEN display_name IS NULL THEN \(try terms(payload.personal.displayName, seal))::text[] ELSE name_terms END,
                    email_terms = CASE WHEN email IS NULL THEN \(try terms(payload.personal.email, seal))::text[] ELSE email_terms END,
                    display_name = coalesce(display_name, \(name)),
                    photo_url = coalesce(photo_url, \(photo)),
                    email_verified = CASE WHEN email IS NULL THEN \(payload.emailVerified && payload.personal.email != nil) ELSE email_verified END,
                    email = coalesce(email, \(email)),
                    email_normalized = coalesce(email_normalized, \(try seal.seal(payload.personal.email.map(ExternalIdentity.normalize))))
                WHERE id = \(userId)
                """)
        case .identityUnlinked(let payload):
            sql.append("DELETE FROM identities WHERE user_id = \(userId) AND provider = \(payload.provider)")
        case .emailVerified(let payload):
            sql.append("""
                UPDATE users SET email_verified = true,
                    email_terms = coalesce(\(try terms(payload.personal.email, seal))::text[], email_terms),
                    email = coalesce(\(try seal.seal(payload.personal.email)), email),
                    email_normalized = coalesce(\(try seal.seal(payload.personal.email.map(ExternalIdentity.normalize))), email_normalized)
                WHERE id = \(userId)
                """)
        case .passwordSet(let payload):
            sql.append("""
                UPDATE identities SET password_hash = \(try seal.seal(payload.personal.passwordHash))
                WHERE user_id = \(userId) AND provider = 'password'
                """)
        case .signedIn:
            sql.append("UPDATE users SET last_sign_in_at = \(at) WHERE id = \(userId)")
        case .sessionStarted(let payload):
            sql.append("""
                INSERT INTO sessions (id, user_id, refresh_token_hash, jkt, amr, auth_time, started_at, secret_kind, expires_at)
                VALUES (\(payload.sessionId), \(userId), \(payload.refreshTokenHash), \(payload.jkt),
                        \(PostgresJSON(data: Data(JSONText.strings(payload.amr))))::jsonb, \(ISO8601Milliseconds.format(payload.authTime))::timestamptz,
                        \(at), \(payload.secretKind.rawValue), \(payload.expiresAt.map(ISO8601Milliseconds.format))::timestamptz)
                """)
            sql.append("""
                INSERT INTO refresh_tokens (token_hash, session_id, generation) VALUES (\(payload.refreshTokenHash), \(payload.sessionId), 0)
                """)
        case .sessionRefreshed(let payload):
            sql.append("""
                UPDATE sessions SET refresh_token_hash = \(payload.refreshTokenHash), generation = \(payload.generation),
                    last_refreshed_at = \(at)
                WHERE id = \(payload.sessionId)
                """)
            sql.append("""
                INSERT INTO refresh_tokens (token_hash, session_id, generation)
                VALUES (\(payload.refreshTokenHash), \(payload.sessionId), \(payload.generation))
                """)
        case .sessionEnded(let payload):
            sql.append("""
                UPDATE sessions SET ended_at = \(at), end_reason = \(payload.reason)
                WHERE id = \(payload.sessionId) AND ended_at IS NULL
                """)
        case .sessionsRevoked(let payload):
            sql.append("""
                UPDATE users SET valid_since = \(ISO8601Milliseconds.format(payload.validSince))::timestamptz WHERE id = \(userId)
                """)
            sql.append("""
                UPDATE sessions SET ended_at = \(at), end_reason = 'revoked'
                WHERE user_id = \(userId) AND ended_at IS NULL
                """)
        case .profileUpdated(let payload):
            let clearsName = payload.cleared.contains("displayName")
            let clearsPhoto = payload.cleared.contains("photoURL")
            sql.append("""
                UPDATE users SET
                    display_name = CASE WHEN \(clearsName) THEN NULL ELSE coalesce(\(try seal.seal(payload.personal.displayName)), display_name) END,
                    name_terms = CASE WHEN \(clearsName) THEN NULL
                                      ELSE coalesce(\(try terms(payload.personal.displayName, seal))::text[], name_terms) END,
                    photo_url = CASE WHEN \(clearsPhoto) THEN NULL ELSE coalesce(\(try seal.seal(payload.personal.photoURL)), photo_url) END,
                    email_verified = CASE WHEN \(payload.emailVerified)::boolean IS NULL THEN email_verified
                                          ELSE \(payload.emailVerified)::boolean AND email IS NOT NULL END
                WHERE id = \(userId)
                """)
        case .emailChanged(let payload):
            sql.append("""
                UPDATE users SET email = \(try seal.seal(payload.personal.email)), email_terms = \(try terms(payload.personal.email, seal))::text[],
                    email_normalized = \(try seal.seal(payload.personal.email.map(ExternalIdentity.normalize))),
                    email_verified = \(payload.emailVerified && payload.personal.email != nil)
                WHERE id = \(userId)
                """)
        case .customClaimsSet(let payload):
            let claims = payload.personal.customClaims.flatMap { $0 == "{}" ? nil : $0 }
            sql.append("UPDATE users SET custom_claims = \(try seal.seal(claims)) WHERE id = \(userId)")
        case .providerEmailStatusChanged(let payload):
            sql.append("""
                UPDATE identities SET email_forwarding = \(payload.forwarding) WHERE user_id = \(userId) AND provider = \(payload.provider)
                """)
        case .userDisabled:
            sql.append("UPDATE users SET disabled = true WHERE id = \(userId)")
        case .userEnabled:
            sql.append("UPDATE users SET disabled = false WHERE id = \(userId)")
        case .userErased:
            // The row stays so the id keeps resolving; nothing personal remains in any read model.
            for table in ["mfa_challenges", "mfa_recovery_codes", "mfa_factors", "identities"] {
                sql.append("DELETE FROM \(unsafeSQL: table) WHERE user_id = \(userId)")
            }
            sql.append("""
                UPDATE users SET email = NULL, email_normalized = NULL, email_verified = false, display_name = NULL,
                    email_terms = NULL, name_terms = NULL,
                    photo_url = NULL, custom_claims = NULL, disabled = true, erased_at = \(at)
                WHERE id = \(userId)
                """)
        default:
            try applyMFA(event, userId: userId, at: at, seal: seal, to: &sql)
        }
        return sql
    }

    /// Projects the second-factor events into `mfa_factors`, `mfa_recovery_codes` and `mfa_challenges`.
    private static func applyMFA(
        _ event: AccountEvent, userId: UUID, at: PostgresQuery, seal: ReadModelSeal, to sql: inout [PostgresQuery]
    ) throws {
        switch event {
        case .mfaFactorEnrolled(let payload):
            sql.append("""
                INSERT INTO mfa_factors (id, user_id, type, display_name, phone_hint, enrolled_at)
                VALUES (\(payload.factorId), \(userId), \(payload.type.rawValue), \(try seal.seal(payload.personal.displayName)),
                        \(try seal.seal(payload.personal.phoneNumber.map(PhoneNumber.hint))), \(at))
                """)
        case .mfaFactorConfirmed(let payload):
            sql.append("""
                UPDATE mfa_factors SET confirmed_at = \(at),
                    last_used_step = coalesce(\(payload.totpStep), last_used_step),
                    display_name = coalesce(\(try seal.seal(payload.personal?.displayName)), display_name)
                WHERE id = \(payload.factorId)
                """)
        case .mfaFactorRemoved(let payload):
            sql.append("DELETE FROM mfa_factors WHERE id = \(payload.factorId)")
        case .mfaRecoveryCodesIssued(let payload):
            sql.append("DELETE FROM mfa_recovery_codes WHERE user_id = \(userId)")
            sql.append("""
                INSERT INTO mfa_recovery_codes (user_id, code_hash, issued_at)
                SELECT \(userId), hash, \(at) FROM unnest(\(PostgresArray(payload.codeHashes))::text[]) AS hash
                """)
        case .mfaChallengeIssued(let payload):
            sql.append("""
                INSERT INTO mfa_challenges (id, user_id, first_factor, amr, expires_at, issued_at)
                VALUES (\(payload.challengeId), \(userId), \(payload.firstFactor), \(PostgresJSON(data: Data(JSONText.strings(payload.amr))))::jsonb,
                        \(ISO8601Milliseconds.format(payload.expiresAt))::timestamptz, \(at))
                """)
        case .mfaCodeSent(let payload):
            if let challengeId = payload.challengeId {
                sql.append("""
                    UPDATE mfa_challenges SET factor_id = \(payload.factorId),
                        code_expires_at = \(ISO8601Milliseconds.format(payload.expiresAt))::timestamptz
                    WHERE id = \(challengeId)
                    """)
            }
        case .mfaCodeAccepted(let payload):
            sql.append("UPDATE mfa_challenges SET code_expires_at = NULL WHERE id = \(payload.challengeId)")
            if let step = payload.totpStep, let factorId = payload.factorId {
                sql.append("UPDATE mfa_factors SET last_used_step = \(step) WHERE id = \(factorId)")
            }
        case .mfaCodeRejected(let payload):
            if let challengeId = payload.challengeId {
                sql.append("UPDATE mfa_challenges SET attempts = \(payload.attempt) WHERE id = \(challengeId)")
            }
        case .mfaRecoveryCodeUsed(let payload):
            sql.append("""
                UPDATE mfa_recovery_codes SET used_at = \(at) WHERE user_id = \(userId) AND code_hash = \(payload.codeHash)
                """)
        case .mfaChallengeEnded(let payload):
            sql.append("""
                UPDATE mfa_challenges SET ended_at = \(at), end_reason = \(payload.reason) WHERE id = \(payload.challengeId)
                """)
        default:
            break // delivery failures change no read model; account events are handled by `apply`
        }
    }

    /// The statements that apply a command's `events` of user `userId` (``statements(for:userId:at:)``)
    /// and record that the user's row reflects stream version `version`: folded into the sign-in's
    /// own update of the row when there is one (one statement fewer on the hottest path), else one
    /// statement more. The rows come out as ``apply(_:userId:at:on:)`` and ``recordVersion(_:of:)`` leave them.
    public static func statements(
        for events: [AccountEvent], userId: UUID, at: PostgresQuery, recordingVersion version: Int, seal: ReadModelSeal
    ) throws -> [PostgresQuery] {
        var statements: [PostgresQuery] = []
        var recorded = false
        for event in events {
            if case .signedIn = event, !recorded {
                statements.append("UPDATE users SET last_sign_in_at = \(at), version = \(version) WHERE id = \(userId)")
                recorded = true
            } else {
                statements += try self.statements(for: event, userId: userId, at: at, seal: seal)
            }
        }
        if !recorded { statements.append(recordVersion(version, of: userId)) }
        return statements
    }

    /// Records the stream version the user's row reflects (once per command, not per event).
    public static func recordVersion(_ version: Int, of userId: UUID, on connection: PostgresConnection) async throws {
        try await connection.query(recordVersion(version, of: userId))
    }

    /// The statement that records the stream version the user's row reflects.
    public static func recordVersion(_ version: Int, of userId: UUID) -> PostgresQuery {
        "UPDATE users SET version = \(version) WHERE id = \(userId)"
    }

    /// The sealed search words of a user's email or name (``ReadModelSeal/searchTerms(_:)``).
    static func terms(_ text: String?, _ seal: ReadModelSeal) throws -> PostgresArray? {
        try seal.searchTerms(text).map { PostgresArray($0) }
    }

    /// The sealed search words of an identity: its uid's, email's and name's.
    static func identityTerms(_ uid: String, _ email: String?, _ name: String?, _ seal: ReadModelSeal) throws -> PostgresArray? {
        try seal.searchTerms(of: [uid, email, name]).map { PostgresArray($0) }
    }

    /// The statement whose rows name the user holding `provider`'s credential `uid` (`user_id`).
    public static func identityOwner(provider: String, uid: String, seal: ReadModelSeal) throws -> PostgresQuery {
        "SELECT user_id FROM identities WHERE provider = \(provider) AND provider_uid = \(try seal.seal(uid))"
    }
}
