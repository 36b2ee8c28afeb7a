import COpenSSL
import Foundation

/// An RSA, P-256 or Ed25519 key pair, used to sign.
///
/// Import from JWK numbers (``PrivateKeyComponents``) or PKCS#8 PEM, or
/// generate one. Imported key pairs must pass OpenSSL's consistency checks,
/// so a JWK whose public and private halves disagree is refused.
public final class PrivateKey: Sendable {
    let key: OpenSSLKey
    let signingContexts = KeyContextPool(.sign)

    /// The public half, as a separate public-only key.
    public let publicKey: PublicKey

    init(key: OpenSSLKey) throws {
        self.key = key
        self.publicKey = try PublicKey(components: PublicKey.exportComponents(key))
    }

    /// The key family.
    public var type: KeyType { key.type }

    /// The key size in bits.
    public var bitCount: Int { key.bitCount }

    /// Generates a fresh key pair; `rsaBitCount` applies to RSA only (2048…8192).
    public static func generate(_ type: KeyType, rsaBitCount: Int = 2048) throws -> PrivateKey {
        let pkey: OpaquePointer?
        switch type {
        case .rsa:
            guard (OpenSSLKey.minimumRSABitCount...OpenSSLKey.maximumRSABitCount).contains(rsaBitCount) else {
                throw CryptoError.weakKey.with(detail: "RSA keys are 2048 to 8192 bits")
            }
            pkey = COpenSSL_EVP_PKEY_Q_keygen_RSA(rsaBitCount)
        case .ecP256:
            pkey = COpenSSL_EVP_PKEY_Q_keygen_EC("P-256")
        case .ed25519:
            pkey = COpenSSL_EVP_PKEY_Q_keygen_ED25519()
        }
        guard let pkey else { throw OpenSSL.failure(.operationFailed, "EVP_PKEY_Q_keygen") }
        return try PrivateKey(key: OpenSSLKey(taking: pkey, isPrivate: true))
    }

    /// Builds a key pair from its numbers.
    public convenience init(components: PrivateKeyComponents) throws {
        let builder = try KeyParameterBuilder()
        let pkey: OpaquePointer
        switch components {
        case .rsa(let rsa):
            try builder.push("n", integer: rsa.modulus)
            try builder.push("e", integer: rsa.exponent)
            try builder.push("d", integer: rsa.privateExponent)
            try builder.push("rsa-factor1", integer: rsa.firstPrime)
            try builder.push("rsa-factor2", integer: rsa.secondPrime)
            try builder.push("rsa-exponent1", integer: rsa.firstExponent)
            try builder.push("rsa-exponent2", integer: rsa.secondExponent)
            try builder.push("rsa-coefficient1", integer: rsa.coefficient)
            pkey = try builder.makeKey(type: "RSA", isPrivate: true)
        case .ecP256(let x, let y, let d):
            guard x.count == 32, y.count == 32, d.count == 32 else {
                throw CryptoError.invalidKey.with(detail: "P-256 numbers must be 32 bytes")
            }
            try builder.push("group", text: "prime256v1")
            try builder.push("pub", octets: [0x04] + x + y)
            try builder.push("priv", integer: d)
            pkey = try builder.makeKey(type: "EC", isPrivate: true)
        case .ed25519(let x, let d):
            guard x.count == 32, d.count == 32 else { throw CryptoError.invalidKey.with(detail: "Ed25519 keys are 32 bytes") }
            // Import the seed alone so OpenSSL derives the public key, then insist it matches `x`.
            try builder.push("priv", octets: d)
            pkey = try builder.makeKey(type: "ED25519", isPrivate: true)
            let derived = try? OpenSSL.octets(pkey, "pub")
            guard derived == x else {
                EVP_PKEY_free(pkey)
                throw CryptoError.invalidKey.with(detail: "Ed25519 public key does not match the private key")
            }
        }
        try self.init(key: OpenSSLKey(taking: pkey, isPrivate: true))
    }

    /// Reads an unencrypted `-----BEGIN PRIVATE KEY-----` (PKCS#8) PEM block.
    ///
    /// Encrypted PEM is refused instead of prompting on the terminal, which
    /// is what OpenSSL's default password callback would do.
    public convenience init(pem: String) throws {
        let pkey = OpenSSL.read(Array(pem.utf8)) { bio in
            PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let pkey else { throw OpenSSL.failure(.invalidEncoding, "PEM_read_bio_PrivateKey") }
        try self.init(key: OpenSSLKey(taking: pkey, isPrivate: true))
    }

    /// The key pair as an unencrypted `-----BEGIN PRIVATE KEY-----` (PKCS#8) PEM block.
    public func pemEncoded() throws -> String {
        let bytes = try OpenSSL.writtenText("PEM_write_bio_PrivateKey") { bio in
            PEM_write_bio_PrivateKey(bio, key.pointer, nil, nil, 0, nil, nil)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The key pair's numbers, for JWK export. Handle the result as a secret.
    public func components() throws -> PrivateKeyComponents {
        let pkey = key.pointer
        switch type {
        case .rsa:
            return .rsa(RSAPrivateKeyComponents(
                modulus: try OpenSSL.integer(pkey, "n"), exponent: try OpenSSL.integer(pkey, "e"),
                privateExponent: try OpenSSL.integer(pkey, "d"),
                firstPrime: try OpenSSL.integer(pkey, "rsa-factor1"), secondPrime: try OpenSSL.integer(pkey, "rsa-factor2"),
                firstExponent: try OpenSSL.integer(pkey, "rsa-exponent1"),
                secondExponent: try OpenSSL.integer(pkey, "rsa-exponent2"),
                coefficient: try OpenSSL.integer(pkey, "rsa-coefficient1")))
        case .ecP256:
            return .ecP256(x: try OpenSSL.integer(pkey, "qx", width: 32), y: try OpenSSL.integer(pkey, "qy", width: 32),
                           d: try OpenSSL.integer(pkey, "priv", width: 32))
        case .ed25519:
            return .ed25519(x: try OpenSSL.octets(pkey, "pub"), d: try OpenSSL.octets(pkey, "priv"))
        }
    }

    /// Signs `message` with `algorithm`; ECDSA output is the raw 64-byte `r‖s` form of JWS.
    public func signature(for message: some ContiguousBytes, algorithm: SignatureAlgorithm) throws -> [UInt8] {
        guard algorithm.keyType == type, algorithm.isAccepted else {
            throw CryptoError.invalidKey.with(detail: "a \(type) key cannot sign with \(algorithm)")
        }
        let signature = try message.withUnsafeBytes { raw in
            algorithm.digest == nil ? try signOneShot(raw, algorithm) : try signPrehashed(raw, algorithm)
        }
        guard algorithm == .ecdsaP256SHA256 else { return signature }
        guard let raw = ECDSASignature.raw(fromDER: signature) else {
            throw CryptoError.operationFailed.with(detail: "OpenSSL returned a malformed ECDSA signature")
        }
        return raw
    }

    /// Hashes `message` on the stack and runs `EVP_PKEY_sign` on a pooled context (a DER signature for ECDSA).
    private func signPrehashed(_ message: UnsafeRawBufferPointer, _ algorithm: SignatureAlgorithm) throws -> [UInt8] {
        guard let digest = algorithm.digest else { throw CryptoError.operationFailed.with(detail: "\(algorithm) has no digest") }
        let capacity = Int(EVP_PKEY_get_size(key.pointer))
        guard capacity > 0 else { throw OpenSSL.failure(.operationFailed, "EVP_PKEY_get_size") }
        var signature = [UInt8](repeating: 0, count: capacity)
        var length = capacity
        let signed = withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { hash in
            let hashLength = digest.hash(message, into: hash)
            return signature.withUnsafeMutableBufferPointer { output in
                signingContexts.use(key, algorithm: algorithm) { context in
                    EVP_PKEY_sign(context, output.baseAddress, &length, hash.baseAddress!.assumingMemoryBound(to: UInt8.self), hashLength)
                }
            }
        }
        guard signed, length <= capacity else { throw OpenSSL.failure(.operationFailed, "EVP_PKEY_sign") }
        signature.removeLast(capacity - length)
        return signature
    }

    /// Ed25519 hashes internally, so it signs through the one-shot DigestSign.
    private func signOneShot(_ message: UnsafeRawBufferPointer, _ algorithm: SignatureAlgorithm) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw OpenSSL.failure(.operationFailed, "EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        var signContext: OpaquePointer?
        guard EVP_DigestSignInit(context, &signContext, nil, nil, key.pointer) == 1, signContext != nil else {
            throw OpenSSL.failure(.operationFailed, "EVP_DigestSignInit")
        }
        return try OpenSSL.withBytePointer(message) { messagePointer -> [UInt8] in
            var length = 0
            guard EVP_DigestSign(context, nil, &length, messagePointer, message.count) == 1 else {
                throw OpenSSL.failure(.operationFailed, "EVP_DigestSign")
            }
            var signature = [UInt8](repeating: 0, count: length)
            guard EVP_DigestSign(context, &signature, &length, messagePointer, message.count) == 1 else {
                throw OpenSSL.failure(.operationFailed, "EVP_DigestSign")
            }
            return Array(signature[..<length])
        }
    }
}
