import COpenSSL
import Foundation

/// An RSA, P-256 or Ed25519 public key, used to verify signatures.
///
/// Import from JWK numbers (``PublicKeyComponents``), SPKI PEM or SPKI DER.
/// RSA keys under 2048 bits and curves other than P-256 are refused, and
/// every key passes OpenSSL's public-key check on import. Instances are
/// immutable and safe to share between concurrent verifications.
public final class PublicKey: Sendable {
    let key: OpenSSLKey
    let contexts = KeyContextPool(.verify)

    /// The public numbers, for JWK export and thumbprints.
    public let components: PublicKeyComponents

    init(key: OpenSSLKey) throws {
        self.key = key
        self.components = try Self.exportComponents(key)
    }

    /// The key family.
    public var type: KeyType { key.type }

    /// The key size in bits (modulus size for RSA, 256 for P-256, 253 for Ed25519).
    public var bitCount: Int { key.bitCount }

    /// Builds a key from its public numbers.
    public convenience init(components: PublicKeyComponents) throws {
        let builder = try KeyParameterBuilder()
        let pkey: OpaquePointer
        switch components {
        case .rsa(let modulus, let exponent):
            try builder.push("n", integer: modulus)
            try builder.push("e", integer: exponent)
            pkey = try builder.makeKey(type: "RSA", isPrivate: false)
        case .ecP256(let x, let y):
            // JWK requires full-length coordinates (RFC 7518 §6.2.1.2); shorter ones hint at a broken encoder.
            guard x.count == 32, y.count == 32 else { throw CryptoError.invalidKey.with(detail: "P-256 coordinates must be 32 bytes") }
            try builder.push("group", text: "prime256v1")
            try builder.push("pub", octets: [0x04] + x + y)
            pkey = try builder.makeKey(type: "EC", isPrivate: false)
        case .ed25519(let x):
            guard x.count == 32 else { throw CryptoError.invalidKey.with(detail: "Ed25519 keys are 32 bytes") }
            try builder.push("pub", octets: x)
            pkey = try builder.makeKey(type: "ED25519", isPrivate: false)
        }
        try self.init(key: OpenSSLKey(taking: pkey, isPrivate: false))
    }

    /// Reads a `-----BEGIN PUBLIC KEY-----` (SPKI) PEM block.
    public convenience init(pem: String) throws {
        let pkey = OpenSSL.read(Array(pem.utf8)) { bio in PEM_read_bio_PUBKEY(bio, nil, nil, nil) }
        guard let pkey else { throw OpenSSL.failure(.invalidEncoding, "PEM_read_bio_PUBKEY") }
        try self.init(key: OpenSSLKey(taking: pkey, isPrivate: false))
    }

    /// Reads a DER SubjectPublicKeyInfo.
    public convenience init(spkiDER der: some ContiguousBytes) throws {
        let pkey: OpaquePointer? = der.withUnsafeBytes { raw in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            let pkey = d2i_PUBKEY(nil, &cursor, raw.count)
            // Trailing bytes after the structure mean the input was not one SPKI.
            guard let pkey, cursor == base + raw.count else {
                EVP_PKEY_free(pkey)
                return nil
            }
            return pkey
        }
        guard let pkey else { throw OpenSSL.failure(.invalidEncoding, "d2i_PUBKEY") }
        try self.init(key: OpenSSLKey(taking: pkey, isPrivate: false))
    }

    /// The key as a `-----BEGIN PUBLIC KEY-----` (SPKI) PEM block.
    public func pemEncoded() throws -> String {
        let bytes = try OpenSSL.writtenText("PEM_write_bio_PUBKEY") { bio in PEM_write_bio_PUBKEY(bio, key.pointer) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The key as a DER SubjectPublicKeyInfo.
    public func spkiDER() throws -> [UInt8] {
        let length = i2d_PUBKEY(key.pointer, nil)
        guard length > 0 else { throw OpenSSL.failure(.operationFailed, "i2d_PUBKEY") }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_PUBKEY(key.pointer, &cursor)
        }
        guard written == length else { throw OpenSSL.failure(.operationFailed, "i2d_PUBKEY") }
        return bytes
    }

    static func exportComponents(_ key: OpenSSLKey) throws -> PublicKeyComponents {
        switch key.type {
        case .rsa:
            return .rsa(modulus: try OpenSSL.integer(key.pointer, "n"), exponent: try OpenSSL.integer(key.pointer, "e"))
        case .ecP256:
            return .ecP256(x: try OpenSSL.integer(key.pointer, "qx", width: 32),
                           y: try OpenSSL.integer(key.pointer, "qy", width: 32))
        case .ed25519:
            return .ed25519(x: try OpenSSL.octets(key.pointer, "pub"))
        }
    }
}
