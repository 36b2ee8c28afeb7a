import Foundation
import TetherJOSE

/// One of Tether's ES256 access-token signing keys, as recorded in `signing_keys`.
public struct SigningKey: Sendable {
    /// The `kid`: the RFC 7638 thumbprint of the public key.
    public let keyID: String
    /// Signs with the private half, stamping ``keyID`` and `alg: ES256`.
    public let signer: JWTSigner
    /// The public half as published in the JWKS (`kid`, `alg`, `use: sig`).
    public let publicJWK: JWK
    /// When the key was generated.
    public let createdAt: Date
    /// The first moment the key may sign; a successor is published before this.
    public let activatedAt: Date
    /// The first moment the key is no longer published, once a successor exists.
    public let retiredAt: Date?

    /// Whether the key is in the published set at `date`.
    public func isPublished(at date: Date) -> Bool {
        retiredAt.map { date < $0 } ?? true
    }
}
