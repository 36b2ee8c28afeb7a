import Foundation

/// What a verified access token says about its bearer.
///
/// The signature, issuer and expiry have been checked; whether the session is
/// still alive (not signed out, not revoked) is the caller's check.
public struct AccessTokenClaims: Sendable, Hashable {
    /// `sub`: the user.
    public let userId: UUID
    /// `sid`: the session the token was issued for.
    public let sessionId: UUID
    /// `iat`: compare with the user's `validSince` to honour revoke-all.
    public let issuedAt: Date
    /// `exp`.
    public let expiresAt: Date
    /// `auth_time`: when the user last actually authenticated.
    public let authTime: Date
    /// `amr`: how the user authenticated (`apple`, `pwd`, `otp`, …).
    public let amr: [String]
    /// `cnf.jkt`: the thumbprint of the DPoP key the token is bound to, if any.
    public let jkt: String?

    /// Claims as read from a verified token (and as tests build them).
    public init(userId: UUID, sessionId: UUID, issuedAt: Date, expiresAt: Date, authTime: Date, amr: [String], jkt: String?) {
        self.userId = userId
        self.sessionId = sessionId
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.authTime = authTime
        self.amr = amr
        self.jkt = jkt
    }
}
