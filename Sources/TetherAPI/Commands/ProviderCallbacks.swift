import Foundation
import TetherCore
import TetherCrypto
import TetherJOSE
import TetherPostgres
import TetherProviders

/// What Tether does when a provider reports on an account outside a sign-in; `ProviderCallbackRoutes`
/// only verifies, decodes and answers.
struct ProviderCallbacks: Sendable {
    let accounts: AccountService

    /// Acts on an Apple notification once: a repeat answers the first outcome and changes nothing.
    func apple(_ notification: AppleNotification, context: CommandContext) async throws -> (outcome: String, duplicate: Bool) {
        let key = notification.deduplicationKey
        if let seen = try await accounts.database.query("""
            SELECT outcome FROM provider_notifications WHERE provider = 'apple' AND dedup_key = \(key)
            """).first {
            return (try seen.decode("outcome"), true)
        }
        // Every action is idempotent, so a delivery whose record below fails is safely acted on again when Apple retries.
        let outcome: String
        switch notification.type {
        case "consent-revoked":
            outcome = try await accounts.endedByProvider(
                "apple", uid: notification.sub, reason: "apple_consent_revoked", erasingIfOnly: false, context: context).rawValue
        case "account-delete", "account-deleted":
            outcome = try await accounts.endedByProvider(
                "apple", uid: notification.sub, reason: "apple_account_deleted", erasingIfOnly: true, context: context).rawValue
        case "email-disabled", "email-enabled":
            outcome = try await accounts.providerEmailStatus(
                "apple", uid: notification.sub, forwarding: notification.type == "email-enabled", context: context).rawValue
        default:
            outcome = "ignored"
        }
        try await accounts.database.query("""
            INSERT INTO provider_notifications (provider, dedup_key, kind, outcome) VALUES ('apple', \(key), \(notification.type), \(outcome))
            ON CONFLICT DO NOTHING
            """)
        return (outcome, false)
    }

    /// Ends Facebook's hold on the account of `facebookUser` (erasing a user it was the only way in for)
    /// and records the request under a new confirmation code, which it answers. The record commits with
    /// the erasure or the unlinking, so a code is never given for a deletion that did not happen.
    ///
    /// Acted on once per `request` (``requestKey(_:)``), as Apple's notifications are: the same `signed_request`
    /// again is answered its first code and changes nothing. Sent again after the person signed in anew, it
    /// would otherwise erase the account they made since.
    func facebookDeletion(of facebookUser: String, request: String, context: CommandContext) async throws -> String {
        let answered = { () async throws -> String? in
            try await accounts.database.query("""
                SELECT outcome FROM provider_notifications WHERE provider = 'facebook' AND dedup_key = \(request)
                """).first?.decode("outcome")
        }
        if let code = try await answered() { return code }
        let code = Base64URL.encode(SecureRandom.bytes(count: 12))
        // The request's key with its code, and the code's record only when the key is new: the same request sent
        // twice at once passes the look above twice, and the second then records nothing and answers the first's code.
        let record = { (status: String) -> [PostgresQuery] in
            [
                """
                WITH noted AS (
                    INSERT INTO provider_notifications (provider, dedup_key, kind, outcome)
                    VALUES ('facebook', \(request), 'data-deletion', \(code))
                    ON CONFLICT DO NOTHING RETURNING outcome)
                INSERT INTO provider_deletion_requests (confirmation_code, provider, uid_hash, status)
                SELECT outcome, 'facebook', \(Self.uidHash(facebookUser)), \(status) FROM noted
                """
            ]
        }
        let outcome = try await accounts.endedByProvider(
            "facebook", uid: facebookUser, reason: "facebook_data_deletion", erasingIfOnly: true, recording: record("completed"),
            context: context)
        switch outcome {
        case .noUser, .unchanged:
            // With no user, or the identity gone meanwhile: nothing was written, so the record commits on its own.
            let statements = record(outcome == .noUser ? "no_user" : "completed")
            try await accounts.database.withTransactionJob { try $0.runAlone(statements) }
        case .erased, .unlinked, .recorded: break
        }
        // Recorded by now, by this request or by the same one sent at once (whose code this answers too).
        return try await answered() ?? code
    }

    /// The key a `signed_request` is known by (a digest: the request itself names the person).
    static func requestKey(_ signedRequest: String) -> String {
        DigestAlgorithm.sha256.hash(Array("tether facebook signed_request:\(signedRequest)".utf8)).hexString
    }

    /// The status of the Facebook deletion request `code` names, or nil for an unknown code.
    func facebookDeletionStatus(_ code: String) async throws -> (status: String, requestedAt: Date)? {
        guard let row = try await accounts.database.query("""
            SELECT status, requested_at FROM provider_deletion_requests WHERE confirmation_code = \(code) AND provider = 'facebook'
            """).first else { return nil }
        return (try row.decode("status"), try row.decode("requested_at"))
    }

    static func uidHash(_ uid: String) -> String {
        DigestAlgorithm.sha256.hash(Array("tether facebook uid:\(uid)".utf8)).hexString
    }
}
