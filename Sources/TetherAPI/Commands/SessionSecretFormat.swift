import Foundation
import TetherCore

/// How a surface makes the secret of a session it opens. The command layer stores only its hash
/// and its kind (the `SessionStarted` event records which); the secret itself goes to the client.
///
/// `/v1` hands out a rotating refresh token beside short-lived ES256 access tokens
/// (``RefreshTokenFormat``); Parse's `r:` session tokens and Firebase's tokens come as their own formats.
public protocol SessionSecretFormat: Sendable {
    /// The kind of secret, as the session's events record it.
    var kind: SessionSecretKind { get }
    /// A new random secret, in the form the client receives.
    func newSecret() -> String
    /// What is kept of a secret: its SHA-256, hex.
    func hash(_ secret: String) -> String
}

extension SessionSecretFormat {
    /// A session to open with a new secret of this format, and that secret.
    public func newSession(amr: [String], jkt: String?) -> (session: NewSession, secret: String) {
        let secret = newSecret()
        return (NewSession(id: UUID.random(), refreshTokenHash: hash(secret), amr: amr, jkt: jkt, secretKind: kind), secret)
    }
}

/// `/v1`'s sessions: the refresh token is the session's secret (it rotates on every use); access
/// tokens are signed per request by ``AccessTokenIssuer`` and never stored.
public struct RefreshTokenFormat: SessionSecretFormat {
    public init() {}
    public var kind: SessionSecretKind { .accessAndRefreshTokens }
    public func newSecret() -> String { RefreshTokens.generate() }
    public func hash(_ secret: String) -> String { RefreshTokens.hash(secret) }
}
