import Foundation
import TetherCore
import TetherCrypto
import TetherJOSE
import TetherPostgres

/// The `pendingToken` of an `accounts:signInWithIdp` answer that refuses an IdP's ID token for a conflict
/// (`needConfirmation`, or `errorMessage` `FEDERATED_USER_ID_ALREADY_LINKED` / `EMAIL_EXISTS`).
///
/// The SDKs build the credential they offer the app for the next step (link it to the account that holds
/// the email, sign in to the user who holds it) from `oauthIdToken` and `pendingToken`, never with the raw
/// nonce or Apple's authorization code and name (WIRE-FACTS §6b): the iOS SDK posts the token again without
/// them beside the pending token, the JS SDK the pending token alone. Posting the token again cannot work:
/// its nonce is missing, and Apple's tokens are refused ten minutes after they were issued.
///
/// So a pending token holds the identity the credential was verified as, with what verifying it obtained
/// (Apple's grant for a redeemed code, the name the app sent), sealed (AES-256-GCM under a key of its own
/// in `hash_keys`) for an hour. Presented again, it stands for that verified credential, once: it spends an
/// id of the credential (``singleUse(of:)``), which a refused command gives back. The token's nonce stays spent
/// until the pending token expires, so the token posted again directly takes nothing either.
struct FirebasePendingTokens: Sendable {
    static let keyName = "firebase-pending-tokens"
    static let prefix = "tpt1."
    /// How long a pending token stands for its credential, from the refusal that issued the first one.
    static let lifetime: TimeInterval = 3600
    /// The scope of the ids that make pending tokens single-use (``singleUse(of:)``).
    static let nonceScope = "firebase-pending-token"
    private static let context = Array("tether firebase pending token".utf8)
    private let key = LoadedHashKey(keyName)

    /// What a pending token stands for.
    struct Pending: Codable, Sendable, Hashable {
        /// The `providerId` posted.
        var providerId: String
        /// The IdP's tokens the refused answer echoed (`oauthIdToken`, `oauthAccessToken`).
        var echoed: [String: String]
        /// The identity the credential was verified as, its nonce given back.
        var identity: ExternalIdentity
        /// Until when it stands for the credential, in seconds since 1970.
        var expires: Int
    }

    static var invalid: FirebaseError { FirebaseError("INVALID_PENDING_TOKEN", "The pending token is not valid: sign in with the provider again.") }
    static var used: FirebaseError { FirebaseError("INVALID_PENDING_TOKEN", "The pending token was used already: sign in with the provider again.") }

    /// The pending token of `pending`.
    func issue(_ pending: Pending, on database: PostgresClient) async throws -> String {
        try Self.seal(pending, key: try await key.bytes(on: database))
    }

    /// What `token` stands for.
    ///
    /// - Throws: `INVALID_PENDING_TOKEN` for a token that is not this server's, was altered, or has expired.
    func open(_ token: String, now: Date, on database: PostgresClient) async throws -> Pending {
        try Self.open(token, now: now, key: try await key.bytes(on: database))
    }

    /// ``issue(_:on:)`` under `key`.
    static func seal(_ pending: Pending, key: [UInt8]) throws -> String {
        let box = try AESGCM.seal(Array(try JSONEncoder().encode(pending)), key: key, authenticating: context)
        return prefix + Base64URL.encode(box.combined)
    }

    /// ``open(_:now:on:)`` under `key`.
    static func open(_ token: String, now: Date, key: [UInt8]) throws(FirebaseError) -> Pending {
        guard token.hasPrefix(prefix), let combined = try? Base64URL.decode(String(token.dropFirst(prefix.count))),
              let box = try? AESGCM.SealedBox(combined: combined),
              let plaintext = try? AESGCM.open(box, key: key, authenticating: context),
              let pending = try? JSONDecoder().decode(Pending.self, from: Data(plaintext)),
              Double(pending.expires) > now.timeIntervalSince1970 else { throw invalid }
        return pending
    }

    /// The single use of what `pending` stands for: an id of the credential (its token's nonce, or the token when it
    /// had none), kept until the pending token expires. Every pending token of one credential has it: of a refusal,
    /// and of a redemption refused again.
    static func singleUse(of pending: Pending) -> UsedNonce {
        let credential = pending.identity.spentNonce?.hash ?? pending.echoed["oauthIdToken"] ?? ""
        let text = Array("\(pending.providerId) \(pending.identity.uid) \(credential)".utf8)
        return UsedNonce(
            scope: nonceScope, hash: DigestAlgorithm.sha256.hash(text).hexString, expiresAt: Date(timeIntervalSince1970: TimeInterval(pending.expires)))
    }
}
