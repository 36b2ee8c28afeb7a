/// The asymmetric key families Tether signs and verifies with.
public enum KeyType: String, Sendable, Hashable, CaseIterable {
    /// RSA with a modulus of 2048 to 8192 bits.
    case rsa
    /// ECDSA over NIST P-256 (secp256r1).
    case ecP256
    /// EdDSA over Curve25519 (RFC 8032).
    case ed25519
}
