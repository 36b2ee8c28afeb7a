/// The check a rejected credential failed: the `reason` member of an `invalid_credential` problem.
///
/// The raw values are stable machine codes; clients and logs branch on them.
public enum CredentialRejection: String, Sendable, Hashable, CaseIterable, Codable {
    /// Not a well-formed token, or a claim of the wrong type.
    case malformed
    /// The token's `alg` is `none`, not the provider's pinned algorithm, or does not fit the key.
    case algorithm
    /// A header the verifier refuses (`jku`, `x5u`, unknown `crit`, an odd `typ` or `kid`).
    case header
    /// No key of the provider's key set has the token's `kid`, even after a refetch.
    case unknownKey = "unknown_key"
    /// The signature does not verify.
    case signature
    /// `iss` is not the provider's issuer.
    case issuer
    /// `aud` (or the Graph `app_id`) names none of the configured client or app ids.
    case audience
    /// The token has expired (beyond the leeway).
    case expired
    /// `nbf` lies in the future (beyond the leeway).
    case notYetValid = "not_yet_valid"
    /// `iat` lies in the future (beyond the leeway).
    case issuedInFuture = "issued_in_future"
    /// `iat` is older than the provider's maximum token age.
    case tooOld = "too_old"
    /// A required claim (`exp`, `iat`) is absent.
    case missingClaim = "missing_claim"
    /// `sub` (or the Graph `user_id`) is missing or empty.
    case subject
    /// A Facebook Limited Login token without a non-empty `jti`.
    case tokenID = "token_id"
    /// An Apple token with an `events` claim: a server-to-server notification, not a sign-in.
    case eventsClaim = "events_claim"
    /// One of `rawNonce` and the token's `nonce` is present without the other.
    case nonceMissing = "nonce_missing"
    /// The token's `nonce` is not the lowercase hex SHA-256 of `rawNonce`.
    case nonceMismatch = "nonce_mismatch"
    /// The raw nonce was accepted before: the request is a replay.
    case nonceReused = "nonce_reused"
    /// Graph `debug_token` names an app that is not configured.
    case appID = "app_id"
    /// Graph `debug_token` says the token is not a user token.
    case tokenType = "token_type"
    /// Facebook says the access token is not valid (revoked, expired, or not a token at all).
    case tokenInvalid = "token_invalid"
    /// The Graph profile, or the client's profile, belongs to another user than the token.
    case userMismatch = "user_mismatch"
    /// The email and password do not match an account (the same answer whether or not the email exists).
    case password
}
