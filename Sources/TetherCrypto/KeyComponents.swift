/// The public numbers of a key, in the big-endian forms JWK uses (RFC 7518 §6).
public enum PublicKeyComponents: Sendable, Hashable {
    /// RSA modulus (`n`) and public exponent (`e`).
    case rsa(modulus: [UInt8], exponent: [UInt8])
    /// P-256 point coordinates (`x`, `y`), 32 bytes each.
    case ecP256(x: [UInt8], y: [UInt8])
    /// Ed25519 public key (`x`), 32 bytes.
    case ed25519(x: [UInt8])

    /// The key family these numbers describe.
    public var keyType: KeyType {
        switch self {
        case .rsa: .rsa
        case .ecP256: .ecP256
        case .ed25519: .ed25519
        }
    }
}

/// The numbers of an RSA private key, with the CRT values JWK carries (RFC 7518 §6.3.2).
public struct RSAPrivateKeyComponents: Sendable, Hashable {
    /// Modulus `n`.
    public var modulus: [UInt8]
    /// Public exponent `e`.
    public var exponent: [UInt8]
    /// Private exponent `d`.
    public var privateExponent: [UInt8]
    /// First prime factor `p`.
    public var firstPrime: [UInt8]
    /// Second prime factor `q`.
    public var secondPrime: [UInt8]
    /// `d mod (p-1)`, JWK `dp`.
    public var firstExponent: [UInt8]
    /// `d mod (q-1)`, JWK `dq`.
    public var secondExponent: [UInt8]
    /// `q⁻¹ mod p`, JWK `qi`.
    public var coefficient: [UInt8]

    /// Collects the numbers; the CRT values are required so the key can be checked for consistency.
    public init(
        modulus: [UInt8], exponent: [UInt8], privateExponent: [UInt8], firstPrime: [UInt8], secondPrime: [UInt8],
        firstExponent: [UInt8], secondExponent: [UInt8], coefficient: [UInt8]
    ) {
        self.modulus = modulus
        self.exponent = exponent
        self.privateExponent = privateExponent
        self.firstPrime = firstPrime
        self.secondPrime = secondPrime
        self.firstExponent = firstExponent
        self.secondExponent = secondExponent
        self.coefficient = coefficient
    }
}

/// The numbers of a private key, in the big-endian forms JWK uses.
public enum PrivateKeyComponents: Sendable, Hashable {
    /// An RSA key pair.
    case rsa(RSAPrivateKeyComponents)
    /// A P-256 key pair: point (`x`, `y`) and scalar `d`, 32 bytes each.
    case ecP256(x: [UInt8], y: [UInt8], d: [UInt8])
    /// An Ed25519 key pair: public `x` and private seed `d`, 32 bytes each.
    case ed25519(x: [UInt8], d: [UInt8])

    /// The public half.
    public var publicComponents: PublicKeyComponents {
        switch self {
        case .rsa(let rsa): .rsa(modulus: rsa.modulus, exponent: rsa.exponent)
        case .ecP256(let x, let y, _): .ecP256(x: x, y: y)
        case .ed25519(let x, _): .ed25519(x: x)
        }
    }
}
