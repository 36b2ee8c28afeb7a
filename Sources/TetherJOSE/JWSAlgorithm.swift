import TetherCrypto

/// A JWS `alg` value Tether can verify (RFC 7518 §3, RFC 8037 §3.1).
///
/// `none` is not a case: it cannot be configured, parsed or allowed.
public enum JWSAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    case rs384 = "RS384"
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    case rs512 = "RS512"
    /// RSASSA-PSS with SHA-256.
    case ps256 = "PS256"
    /// RSASSA-PSS with SHA-384.
    case ps384 = "PS384"
    /// RSASSA-PSS with SHA-512.
    case ps512 = "PS512"
    /// ECDSA P-256 with SHA-256.
    case es256 = "ES256"
    /// Ed25519.
    case edDSA = "EdDSA"
    /// HMAC with SHA-256.
    case hs256 = "HS256"
    /// HMAC with SHA-384.
    case hs384 = "HS384"
    /// HMAC with SHA-512.
    case hs512 = "HS512"

    /// Every asymmetric algorithm: the safe default allowlist for tokens from identity providers.
    public static let asymmetric: Set<JWSAlgorithm> = Set(allCases.filter { !$0.isSymmetric })

    /// Whether this is an HMAC algorithm (shared secret).
    public var isSymmetric: Bool { hmacDigest != nil }

    /// The signature scheme for asymmetric algorithms.
    public var signatureAlgorithm: SignatureAlgorithm? {
        switch self {
        case .rs256: .rsaPKCS1v15(.sha256)
        case .rs384: .rsaPKCS1v15(.sha384)
        case .rs512: .rsaPKCS1v15(.sha512)
        case .ps256: .rsaPSS(.sha256)
        case .ps384: .rsaPSS(.sha384)
        case .ps512: .rsaPSS(.sha512)
        case .es256: .ecdsaP256SHA256
        case .edDSA: .ed25519
        case .hs256, .hs384, .hs512: nil
        }
    }

    /// The HMAC hash for symmetric algorithms.
    public var hmacDigest: DigestAlgorithm? {
        switch self {
        case .hs256: .sha256
        case .hs384: .sha384
        case .hs512: .sha512
        default: nil
        }
    }

    /// Whether `material` can sign or verify with this algorithm.
    ///
    /// HMAC keys must be at least as long as the hash (RFC 7518 §3.2), and an
    /// HMAC algorithm never pairs with an asymmetric key, which is what stops
    /// a public key from being used as an HMAC secret.
    func fits(_ material: JWK.Material) -> Bool {
        switch material {
        case .publicKey(let key): signatureAlgorithm?.keyType == key.type
        case .privateKey(let key): signatureAlgorithm?.keyType == key.type
        case .symmetric(let secret): hmacDigest.map { secret.count >= $0.byteCount } ?? false
        }
    }
}
