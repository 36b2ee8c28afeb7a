import Foundation

/// A JWT whose signature and claims passed verification.
public struct VerifiedJWT: Sendable {
    /// The protected header.
    public let header: JOSEHeader
    /// The verified claims.
    public let claims: JWTClaims
    /// The key that verified the signature.
    public let key: JWK
    /// The raw claim-set JSON, for decoding into application types.
    public let payload: [UInt8]

    /// Decodes the claim set into `type` with `JSONDecoder`.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: Data(payload))
    }
}
