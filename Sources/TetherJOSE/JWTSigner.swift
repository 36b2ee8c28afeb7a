import Foundation
import TetherCrypto

/// Signs JWTs (and other compact JWS) with a private key or HMAC secret, stamping its `kid`.
public struct JWTSigner: Sendable {
    /// The signing key.
    public let key: JWK
    /// The algorithm every signature uses.
    public let algorithm: JWSAlgorithm

    /// A signer for `key`; the algorithm defaults to the key's own `alg` and must fit the key.
    public init(key: JWK, algorithm: JWSAlgorithm? = nil) throws {
        guard key.isUsableForSigning else { throw JOSEError.key.with(detail: "key cannot sign") }
        guard let chosen = algorithm ?? key.algorithm else { throw JOSEError.algorithm.with(detail: "no algorithm for signing") }
        if let pinned = key.algorithm, pinned != chosen {
            throw JOSEError.algorithm.with(detail: "key is for \(pinned.rawValue), not \(chosen.rawValue)")
        }
        guard chosen.fits(key.material) else {
            throw JOSEError.algorithm.with(detail: "\(chosen.rawValue) does not fit a \(key.keyType) key")
        }
        self.key = key
        self.algorithm = chosen
    }

    /// A signer for `privateKey` with `algorithm`, announcing `keyID` in every header.
    public init(privateKey: PrivateKey, algorithm: JWSAlgorithm, keyID: String? = nil) throws {
        guard algorithm.fits(.privateKey(privateKey)) else {
            throw JOSEError.algorithm.with(detail: "\(algorithm.rawValue) does not fit a \(privateKey.type) key")
        }
        try self.init(key: JWK(material: .privateKey(privateKey), keyID: keyID, algorithm: algorithm), algorithm: algorithm)
    }

    /// A compact JWT over `claims` with header `alg`, `typ` (unless nil), `kid` and `header`'s extra members.
    public func sign(claims: JOSEObject, type: String? = "JWT", header: JOSEObject = [:]) throws -> String {
        var extra = header
        if let type, extra["typ"] == nil { extra["typ"] = .string(type) }
        return try sign(payload: claims.jsonBytes, header: extra)
    }

    /// A compact JWS over `payload`; `header` may add members but not replace `alg`.
    public func sign(payload: [UInt8], header: JOSEObject = [:]) throws -> String {
        guard header["alg"] == nil else { throw JOSEError.header.with(detail: "alg is set by the signer") }
        var fullHeader: JOSEObject = ["alg": .string(algorithm.rawValue)]
        if let keyID = key.keyID, header["kid"] == nil { fullHeader["kid"] = .string(keyID) }
        for member in header.members { fullHeader[member.name] = member.value }
        let signingInput = Base64URL.encode(fullHeader.jsonBytes) + "." + Base64URL.encode(payload)
        let input = Array(signingInput.utf8)
        let signature: [UInt8]
        do {
            switch key.material {
            case .privateKey(let privateKey):
                signature = try privateKey.signature(for: input, algorithm: algorithm.signatureAlgorithm!)
            case .symmetric(let secret):
                signature = HMAC.authenticationCode(for: input, key: secret, digest: algorithm.hmacDigest!)
            case .publicKey:
                throw JOSEError.key.with(detail: "a public key cannot sign")
            }
        } catch let error as CryptoError {
            throw JOSEError.key.with(detail: error.description)
        }
        return signingInput + "." + Base64URL.encode(signature)
    }
}
