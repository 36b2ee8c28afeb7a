import Foundation
import TetherCore
import TetherJOSE

/// Issues and reads `mfaPendingCredential`s: what a first-factor sign-in gets instead of tokens.
///
/// A pending credential is a JWT signed (ES256) with the access-token keys but with its
/// own `typ`, so neither kind can stand in for the other. It names the user (`sub`) and
/// the challenge (`jti`), which the user's stream records with its first factor, expiry,
/// attempts and whether it is used up: the signature makes it unforgeable, the stream
/// makes it single-use.
public struct MFAPendingCredentials: Sendable {
    /// The header `typ` of pending credentials.
    public static let tokenType = "mfa-pending+jwt"

    private let keys: SigningKeyStore
    private let issuer: String
    private let verifier: JWTVerifier

    public init(keys: SigningKeyStore, issuer: String = "tether", clock: any WallClock = SystemWallClock()) {
        self.keys = keys
        self.issuer = issuer
        self.verifier = JWTVerifier(
            configuration: JWTVerifier.Configuration(
                allowedAlgorithms: [.es256], issuer: issuer, leeway: 5, requiredClaims: ["exp", "iat", "sub", "jti"],
                typeRequirement: .oneOf([Self.tokenType])),
            clock: clock)
    }

    /// A credential for the challenge `challengeId` of `userId`, valid until `expiresAt`.
    public func issue(userId: UUID, challengeId: UUID, issuedAt: Date, expiresAt: Date) async throws -> String {
        let key = try await keys.currentSigningKey()
        let claims: JOSEObject = [
            "iss": .string(issuer),
            "sub": .string(userId.lowercasedText),
            "jti": .string(challengeId.lowercasedText),
            "iat": .number(issuedAt.timeIntervalSince1970.rounded(.down)),
            "exp": .number(expiresAt.timeIntervalSince1970.rounded(.down)),
        ]
        return try key.signer.sign(claims: claims, type: Self.tokenType)
    }

    /// The user and challenge a credential names, or `invalid_mfa_pending_credential`.
    public func read(_ credential: String) async throws -> (userId: UUID, challengeId: UUID) {
        let keyID: String?
        do {
            keyID = try CompactJWS(parsing: credential).header.keyID
        } catch {
            throw AccountError.invalidMFAPendingCredential("The pending credential is malformed.")
        }
        let keySet = try await keys.verificationKeys(forKeyID: keyID)
        let verified: VerifiedJWT
        do {
            verified = try verifier.verify(credential, keys: keySet)
        } catch let error as JOSEError {
            throw AccountError.invalidMFAPendingCredential("The pending credential failed the \(error.reason) check.")
        }
        guard let subject = verified.claims.subject, let userId = UUID(text: subject),
              let jti = verified.claims["jti"]?.stringValue, let challengeId = UUID(text: jti) else {
            throw AccountError.invalidMFAPendingCredential("The pending credential names no user or challenge.")
        }
        return (userId, challengeId)
    }
}
