import Foundation

/// A freshly signed access token and its validity window, for the session response.
public struct IssuedAccessToken: Sendable, Hashable {
    /// The compact JWT.
    public let token: String
    /// Its `iat`.
    public let issuedAt: Date
    /// Its `exp`.
    public let expiresAt: Date

    /// Seconds from issue to expiry: the `expiresIn` of the session response.
    public var expiresIn: Int { Int(expiresAt.timeIntervalSince(issuedAt)) }
}
