import Foundation

/// Remembers single-use values until they expire, so that each is accepted once.
///
/// Identity tokens from Apple, Facebook Limited Login and Google carry a
/// `nonce` that is the SHA-256 of a raw nonce the client sends beside the
/// token. Recording every accepted nonce until its token expires means a
/// captured sign-in request cannot be replayed while the token is still valid.
public protocol NonceStore: Sendable {
    /// Records `nonce` as used, unless an unexpired record of it already exists.
    ///
    /// - Parameters:
    ///   - nonce: what to record; its hash, never the raw nonce.
    ///   - now: the current time, against which earlier records' expiry is judged.
    /// - Returns: ``NonceConsumption/accepted`` the first time, ``NonceConsumption/alreadyUsed`` afterwards.
    func consume(_ nonce: UsedNonce, now: Date) async throws -> NonceConsumption

    /// Forgets a nonce accepted moments ago whose sign-in then failed on the server's side
    /// (the database went away before the command was recorded), so that the client's
    /// retry with the same token is not refused as a replay.
    func release(_ nonce: UsedNonce) async throws
}

/// A nonce to record as used: its scope, its hash and how long to remember it.
public struct UsedNonce: Sendable, Hashable, Codable {
    /// Keeps unrelated uses apart (the identity provider, such as `apple` or `google`).
    public var scope: String
    /// A hash of the raw nonce (lowercase hex SHA-256); the raw nonce itself is never stored.
    public var hash: String
    /// When the record may be forgotten: once the token carrying the nonce can no longer be accepted.
    public var expiresAt: Date

    /// Describes a nonce to record.
    public init(scope: String, hash: String, expiresAt: Date) {
        self.scope = scope
        self.hash = hash
        self.expiresAt = expiresAt
    }
}

/// What happened when a nonce was presented to a ``NonceStore``.
public enum NonceConsumption: Sendable, Hashable {
    /// The nonce had not been used (or its earlier record had expired) and is now recorded.
    case accepted
    /// The nonce was used before and its record has not expired: the request is a replay.
    case alreadyUsed
}
