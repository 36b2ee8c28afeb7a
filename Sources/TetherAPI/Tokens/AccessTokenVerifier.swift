import Foundation
import TetherJOSE

/// Verifies Tether's access tokens against the published signing keys.
///
/// Pinned to ES256 whatever the header says, exact `iss`, `typ: at+jwt`
/// required, `exp` with a small leeway, and every claim the issuer writes
/// present with the right type. Any failure is ``TokenError/invalidToken``;
/// a database failure while loading keys is passed on as itself (a 503, not a sign-out).
public struct AccessTokenVerifier: Sendable {
    /// The header `typ` of access tokens (RFC 9068 §2.1).
    public static let tokenType = "at+jwt"

    /// What a token must satisfy.
    public struct Configuration: Sendable {
        /// The exact `iss` required.
        public var issuer: String
        /// Clock skew tolerated on `exp` and `iat`, in seconds.
        public var leeway: TimeInterval

        /// Defaults: issuer `tether`, 30 s leeway.
        public init(issuer: String = "tether", leeway: TimeInterval = 30) {
            self.issuer = issuer
            self.leeway = leeway
        }
    }

    /// The acceptance rules.
    public let configuration: Configuration
    private let keys: SigningKeyStore
    private let verifier: JWTVerifier

    /// A verifier trusting the keys `keys` publishes.
    public init(keys: SigningKeyStore, configuration: Configuration = Configuration(), clock: any WallClock = SystemWallClock()) {
        self.keys = keys
        self.configuration = configuration
        self.verifier = JWTVerifier(
            configuration: JWTVerifier.Configuration(
                allowedAlgorithms: [.es256], issuer: configuration.issuer, leeway: configuration.leeway,
                requiredClaims: ["exp", "iat", "sub", "sid", "auth_time", "amr"],
                typeRequirement: .oneOf([Self.tokenType])),
            clock: clock)
    }

    /// The claims of `token`, or ``TokenError/invalidToken`` naming the failed check.
    public func verify(_ token: String) async throws -> AccessTokenClaims {
        let keyID: String?
        do {
            keyID = try CompactJWS(parsing: token).header.keyID
        } catch let error as JOSEError {
            throw Self.invalid(error)
        }
        // Outside the JOSE catch: a key store failure is the server's problem, not the token's.
        let keySet = try await keys.verificationKeys(forKeyID: keyID)
        let verified: VerifiedJWT
        do {
            verified = try verifier.verify(token, keys: keySet)
        } catch let error as JOSEError {
            throw Self.invalid(error)
        }
        return try Self.claims(verified.claims)
    }

    private static func claims(_ claims: JWTClaims) throws(TokenError) -> AccessTokenClaims {
        guard let subject = claims.subject, let userId = UUID(text: subject), subject == subject.lowercased() else {
            throw TokenError.invalidToken.with(detail: "sub is not a user id")
        }
        guard let sid = claims["sid"]?.stringValue, let sessionId = UUID(text: sid) else {
            throw TokenError.invalidToken.with(detail: "sid is not a session id")
        }
        guard let issuedAt = claims.issuedAt, let expiresAt = claims.expiresAt,
              let authTime = claims["auth_time"]?.numberValue.map(Date.init(timeIntervalSince1970:)) else {
            throw TokenError.invalidToken.with(detail: "iat, exp and auth_time must be NumericDates")
        }
        guard let entries = claims["amr"]?.arrayValue, case let amr = entries.compactMap(\.stringValue),
              amr.count == entries.count else {
            throw TokenError.invalidToken.with(detail: "amr must be an array of strings")
        }
        var jkt: String?
        if let confirmation = claims["cnf"] {
            guard let thumbprint = confirmation.objectValue?["jkt"]?.stringValue, !thumbprint.isEmpty else {
                throw TokenError.invalidToken.with(detail: "cnf must carry a jkt")
            }
            jkt = thumbprint
        }
        return AccessTokenClaims(userId: userId, sessionId: sessionId, issuedAt: issuedAt, expiresAt: expiresAt,
                                 authTime: authTime, amr: amr, jkt: jkt)
    }

    private static func invalid(_ error: JOSEError) -> TokenError {
        switch error {
        case .expired: TokenError.invalidToken.with(detail: "The access token has expired.")
        case .unknownKey: TokenError.invalidToken.with(detail: "The access token was signed by a key that is not (or no longer) published.")
        default: TokenError.invalidToken.with(detail: "The access token failed the \(error.reason) check.")
        }
    }
}
