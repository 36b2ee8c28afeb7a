/// A signature scheme together with its hash function.
public enum SignatureAlgorithm: Sendable, Hashable {
    /// RSASSA-PKCS1-v1_5 (JWS `RS256`/`RS384`/`RS512`).
    case rsaPKCS1v15(DigestAlgorithm)
    /// RSASSA-PSS with MGF1 over the same hash and a salt as long as the hash (JWS `PS256`/`PS384`/`PS512`).
    case rsaPSS(DigestAlgorithm)
    /// ECDSA over P-256 with SHA-256 (JWS `ES256`); signatures are raw `r‖s`, 64 bytes.
    case ecdsaP256SHA256
    /// Ed25519 (JWS `EdDSA`); the message is signed whole, not pre-hashed.
    case ed25519

    /// The key family this algorithm needs.
    public var keyType: KeyType {
        switch self {
        case .rsaPKCS1v15, .rsaPSS: .rsa
        case .ecdsaP256SHA256: .ecP256
        case .ed25519: .ed25519
        }
    }

    /// The pre-hash, or nil for Ed25519 which hashes internally.
    var digest: DigestAlgorithm? {
        switch self {
        case .rsaPKCS1v15(let digest), .rsaPSS(let digest): digest
        case .ecdsaP256SHA256: .sha256
        case .ed25519: nil
        }
    }

    /// Whether Tether accepts this combination: SHA-1 signatures are refused.
    var isAccepted: Bool { digest != .sha1 }
}
