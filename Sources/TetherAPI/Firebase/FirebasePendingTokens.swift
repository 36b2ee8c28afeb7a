import Foundation
import TetherCore
import TetherCrypto
import TetherJOSE
import TetherPostgres

/// The `pendingToken` of an `accounts:signInWithIdp` answer that refuses an IdP token carrying a nonce
/// (`needConfirmation`, or `errorMessage` `FEDERATED_USER_ID_ALREADY_LINKED` / `EMAIL_EXISTS`).
///
/// The SDKs build the credential they offer the app for the next step (link it to the account that holds
/// the email, sign in to the user who holds it) from `oauthIdToken` and `pendingToken`, never from the raw
/// nonce (WIRE-FACTS §6b): the iOS SDK posts the token without its nonce beside the `pendingToken`, the JS
/// SDK the `pendingToken` alone. A token with a nonce needs its raw nonce, so the pending token carries the
/// credential that was posted: the provider, the token and its raw nonce, sealed (AES-256-GCM under a key
/// of its own in `hash_keys`) with an expiry. Presented again, it stands for that credential, which is then
/// verified as a posted one is: signature, audience, age, and the nonce not spent (a refusal gives it back).
struct FirebasePendingTokens: Sendable {
    static let keyName = "firebase-pending-tokens"
    static let prefix = "tpt1."
    /// How long a pending token stands for its credential; the IdP token's own age limit applies as well.
    static let lifetime: TimeInterval = 3600
    /// The `postBody` fields a pending token keeps.
    static let fields = ["providerId", "id_token", "nonce"]
    private static let context = Array("tether firebase pending token".utf8)
    private let key = LoadedHashKey(keyName)

    static var invalid: FirebaseError { FirebaseError("INVALID_PENDING_TOKEN", "The pending token is not valid: sign in with the provider again.") }

    /// The pending token of the posted credential `fields` (``fields``: those it keeps).
    func issue(_ fields: [String: String], now: Date, on database: PostgresClient) async throws -> String {
        try Self.seal(fields, now: now, key: try await key.bytes(on: database))
    }

    /// The credential fields `token` stands for.
    ///
    /// - Throws: `INVALID_PENDING_TOKEN` for a token that is not this server's, was altered, or has expired.
    func fields(of token: String, now: Date, on database: PostgresClient) async throws -> [String: String] {
        try Self.open(token, now: now, key: try await key.bytes(on: database))
    }

    /// ``issue(_:now:on:)`` under `key`.
    static func seal(_ fields: [String: String], now: Date, key: [UInt8]) throws -> String {
        var members = fields.filter { Self.fields.contains($0.key) }.mapValues(JSONValue.string)
        members["exp"] = .int(Int(now.timeIntervalSince1970 + lifetime))
        let box = try AESGCM.seal(try JSONValue.object(members).jsonBytes(), key: key, authenticating: context)
        return prefix + Base64URL.encode(box.combined)
    }

    /// ``fields(of:now:on:)`` under `key`.
    static func open(_ token: String, now: Date, key: [UInt8]) throws(FirebaseError) -> [String: String] {
        guard token.hasPrefix(prefix), let combined = try? Base64URL.decode(String(token.dropFirst(prefix.count))),
              let box = try? AESGCM.SealedBox(combined: combined),
              let plaintext = try? AESGCM.open(box, key: key, authenticating: context),
              case .object(let members)? = try? CompactJSONDecoder().decode(JSONValue.self, from: plaintext),
              case .int(let expiry)? = members["exp"], Double(expiry) > now.timeIntervalSince1970 else { throw invalid }
        return members.compactMapValues { if case .string(let text) = $0 { text } else { nil } }
    }
}
