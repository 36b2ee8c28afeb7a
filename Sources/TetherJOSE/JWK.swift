import TetherCrypto

/// A JSON Web Key (RFC 7517) for RSA, EC P-256, OKP Ed25519 or oct keys.
///
/// Parsing checks that `kty`, `crv`, `alg`, `use` and `key_ops` agree with
/// each other and with the key material; the material itself goes through
/// TetherCrypto's import checks (RSA ≥ 2048 bits, points on the curve,
/// matching private halves).
public struct JWK: Sendable {
    /// The key itself.
    public enum Material: Sendable {
        /// An asymmetric public key.
        case publicKey(PublicKey)
        /// An asymmetric key pair.
        case privateKey(PrivateKey)
        /// An HMAC secret (`kty: oct`).
        case symmetric([UInt8])
    }

    /// The key itself.
    public let material: Material
    /// The `kid`, if any.
    public let keyID: String?
    /// The `alg` the key is restricted to, if any; verification then uses exactly this algorithm.
    public let algorithm: JWSAlgorithm?
    /// The `use` (`sig` or `enc`), if any.
    public let use: String?
    /// The `key_ops`, if any.
    public let operations: [String]?

    /// Wraps key material with its metadata, checking that they agree.
    public init(material: Material, keyID: String? = nil, algorithm: JWSAlgorithm? = nil, use: String? = nil,
                operations: [String]? = nil) throws {
        if let keyID, !KeyID.isAcceptable(keyID) { throw JOSEError.keyID.with(detail: "unacceptable kid in JWK") }
        if let algorithm, !algorithm.fits(material) {
            throw JOSEError.key.with(detail: "alg \(algorithm.rawValue) does not fit a \(Self.keyType(of: material)) key")
        }
        if case .symmetric(let secret) = material, secret.isEmpty { throw JOSEError.key.with(detail: "empty oct key") }
        if let operations {
            guard Set(operations).count == operations.count else { throw JOSEError.key.with(detail: "duplicate key_ops") }
            // RFC 7517 §4.3: when both are present they must say the same thing.
            if let use {
                let allowed: Set<String> = use == "sig" ? ["sign", "verify"]
                    : ["encrypt", "decrypt", "wrapKey", "unwrapKey", "deriveKey", "deriveBits"]
                guard operations.allSatisfy(allowed.contains) else { throw JOSEError.key.with(detail: "use and key_ops disagree") }
            }
        }
        self.material = material
        self.keyID = keyID
        self.algorithm = algorithm
        self.use = use
        self.operations = operations
    }

    /// The `kty` value: `RSA`, `EC`, `OKP` or `oct`.
    public var keyType: String { Self.keyType(of: material) }

    /// Whether the JWK carries secret material (a private key or an HMAC secret).
    public var isSecret: Bool {
        if case .publicKey = material { false } else { true }
    }

    /// The public key, for asymmetric keys.
    public var publicKey: PublicKey? {
        switch material {
        case .publicKey(let key): key
        case .privateKey(let key): key.publicKey
        case .symmetric: nil
        }
    }

    /// The same key without private members, or nil for an HMAC secret, which has no public form.
    public var publicJWK: JWK? {
        guard let publicKey else { return nil }
        // A key that may sign publishes a public half that may verify.
        let publicOperations = operations.map { $0.contains { $0 == "sign" || $0 == "verify" } ? ["verify"] : [] }
        return try? JWK(material: .publicKey(publicKey), keyID: keyID, algorithm: algorithm, use: use,
                        operations: publicOperations)
    }

    /// Whether `use` and `key_ops` permit verifying signatures.
    public var isUsableForVerification: Bool {
        (use == nil || use == "sig") && (operations?.contains("verify") ?? true)
    }

    /// Whether `use` and `key_ops` permit signing, and there is secret material to sign with.
    public var isUsableForSigning: Bool {
        isSecret && (use == nil || use == "sig") && (operations?.contains("sign") ?? true)
    }

    private static func keyType(of material: Material) -> String {
        switch material {
        case .publicKey(let key): key.type.joseKeyType
        case .privateKey(let key): key.type.joseKeyType
        case .symmetric: "oct"
        }
    }
}

extension KeyType {
    /// The JWK `kty` for this key family.
    var joseKeyType: String {
        switch self {
        case .rsa: "RSA"
        case .ecP256: "EC"
        case .ed25519: "OKP"
        }
    }
}
