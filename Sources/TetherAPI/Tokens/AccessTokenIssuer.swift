import Foundation
import TetherJOSE

/// Signs Tether's access tokens: ES256 JWTs with `typ: at+jwt` and the current key's `kid`.
///
/// Claims: `iss`, `sub` (user id, lowercase UUID), `sid`, `iat`, `exp`,
/// `auth_time`, `amr`, and `cnf.jkt` (RFC 9449 §6.1) for DPoP-bound sessions.
public struct AccessTokenIssuer: Sendable {
    /// What goes into every token.
    public struct Configuration: Sendable {
        /// The `iss` claim; verifiers require exactly this value.
        public var issuer: String
        /// Seconds from `iat` to `exp`.
        public var lifetime: TimeInterval

        /// Defaults: issuer `tether`, 15 minutes.
        public init(issuer: String = "tether", lifetime: TimeInterval = 900) {
            self.issuer = issuer
            self.lifetime = lifetime
        }
    }

    /// The claims policy.
    public let configuration: Configuration
    private let keys: SigningKeyStore
    private let clock: any WallClock

    /// An issuer signing with `keys`; `lifetime` may not exceed the keys' `maximumTokenLifetime`,
    /// or tokens would outlive the publication of the key that signed them.
    public init(keys: SigningKeyStore, configuration: Configuration = Configuration(), clock: any WallClock = SystemWallClock()) {
        precondition(configuration.lifetime > 0 && configuration.lifetime <= keys.configuration.maximumTokenLifetime,
                     "access token lifetime must be positive and at most the signing keys' maximumTokenLifetime")
        self.keys = keys
        self.configuration = configuration
        self.clock = clock
    }

    /// Signs a token for `sessionId` of `userId`.
    ///
    /// - Parameters:
    ///   - authTime: when the user last authenticated (kept across refreshes).
    ///   - amr: the authentication methods, in the order used.
    ///   - jkt: the DPoP key thumbprint of a bound session; becomes `cnf.jkt`.
    public func issue(userId: UUID, sessionId: UUID, authTime: Date, amr: [String], jkt: String? = nil) async throws
        -> IssuedAccessToken
    {
        let key = try await keys.currentSigningKey()
        // Whole seconds: NumericDates are compared in seconds, and a fraction would only differ between signers.
        let issuedAt = clock.now().timeIntervalSince1970.rounded(.down)
        let expiresAt = issuedAt + configuration.lifetime.rounded(.down)
        var claims: JOSEObject = [
            "iss": .string(configuration.issuer),
            "sub": .string(userId.lowercasedText),
            "sid": .string(sessionId.lowercasedText),
            "iat": .number(issuedAt),
            "exp": .number(expiresAt),
            "auth_time": .number(authTime.timeIntervalSince1970.rounded(.down)),
            "amr": .array(amr.map(JOSEValue.string)),
        ]
        if let jkt { claims["cnf"] = ["jkt": .string(jkt)] }
        let token = try key.signer.sign(claims: claims, type: AccessTokenVerifier.tokenType)
        return IssuedAccessToken(token: token, issuedAt: Date(timeIntervalSince1970: issuedAt),
                                 expiresAt: Date(timeIntervalSince1970: expiresAt))
    }
}
