import COpenSSL
import Foundation

/// Sole owner of one `EVP_PKEY`, freed when the last reference goes.
///
/// `@unchecked Sendable` invariant: `pointer` is assigned once in `init` and
/// released only in `deinit`; in between Tether only reads the key (verify,
/// sign, export), which OpenSSL 3 supports concurrently on a shared `EVP_PKEY`.
final class OpenSSLKey: @unchecked Sendable {
    /// RSA keys below this size are refused everywhere in Tether.
    static let minimumRSABitCount = 2048
    /// Larger RSA moduli make every verification a cheap denial-of-service lever.
    static let maximumRSABitCount = 8192

    let pointer: OpaquePointer
    let type: KeyType
    let bitCount: Int

    /// Takes ownership of `pointer` (freeing it if it is refused) after checking its type, size and consistency.
    init(taking pointer: OpaquePointer, isPrivate: Bool) throws {
        do {
            (type, bitCount) = try Self.inspect(pointer)
            try Self.check(pointer, isPrivate: isPrivate)
        } catch {
            EVP_PKEY_free(pointer)
            throw error
        }
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    private static func inspect(_ pkey: OpaquePointer) throws -> (KeyType, Int) {
        let bits = Int(EVP_PKEY_get_bits(pkey))
        if EVP_PKEY_is_a(pkey, "RSA") == 1 {
            guard bits >= minimumRSABitCount else { throw CryptoError.weakKey.with(detail: "RSA key of \(bits) bits") }
            guard bits <= maximumRSABitCount else { throw CryptoError.unsupportedKey.with(detail: "RSA key of \(bits) bits") }
            return (.rsa, bits)
        }
        if EVP_PKEY_is_a(pkey, "EC") == 1 {
            let group = OpenSSL.text(pkey, "group")
            guard group == "prime256v1" || group == "P-256" else {
                throw CryptoError.unsupportedKey.with(detail: "EC curve \(group ?? "unknown")")
            }
            return (.ecP256, bits)
        }
        if EVP_PKEY_is_a(pkey, "ED25519") == 1 {
            return (.ed25519, bits)
        }
        throw CryptoError.unsupportedKey.with(detail: "key type \(String(cString: EVP_PKEY_get0_type_name(pkey)))")
    }

    /// Rejects public keys that are not valid group elements / RSA moduli and
    /// private keys whose halves do not belong together.
    private static func check(_ pkey: OpaquePointer, isPrivate: Bool) throws {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
            throw OpenSSL.failure(.operationFailed, "EVP_PKEY_CTX_new_from_pkey")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_public_check(context) == 1 else { throw OpenSSL.failure(.invalidKey, "EVP_PKEY_public_check") }
        // Ed25519 has no pairwise check in OpenSSL 3.0; its import derives the public half instead.
        if isPrivate, EVP_PKEY_is_a(pkey, "ED25519") != 1 {
            guard EVP_PKEY_pairwise_check(context) == 1 else { throw OpenSSL.failure(.invalidKey, "EVP_PKEY_pairwise_check") }
        }
    }
}

/// Verification contexts kept per algorithm so that a verify is one `EVP_PKEY_verify`.
///
/// Creating and initialising an `EVP_PKEY_CTX` fetches the signature
/// implementation from the provider store, which costs a large share of an
/// RSA-2048 verification. A context is not thread-safe, so each one is taken
/// out of the pool under the lock, used by one thread, and put back.
///
/// `@unchecked Sendable` invariant: `idle` is only read or written while `lock`
/// is held, and a context is in `idle` or in use by exactly one caller.
final class VerificationContextPool: @unchecked Sendable {
    private static let maximumIdlePerAlgorithm = 16
    private let lock = NSLock()
    // A key is used with one or two algorithms, so a short list beats hashing the enum twice per verify.
    private var idle: [(algorithm: SignatureAlgorithm, contexts: [OpaquePointer])] = []

    deinit {
        for entry in idle {
            for context in entry.contexts { EVP_PKEY_CTX_free(context) }
        }
    }

    /// Runs `verify` with a context for `algorithm` on `key`; a context that saw a failure is discarded.
    func verify(with key: OpenSSLKey, algorithm: SignatureAlgorithm, _ verify: (OpaquePointer) -> Int32) -> Bool {
        let pooled = lock.withLock { () -> OpaquePointer? in
            guard let index = idle.firstIndex(where: { $0.algorithm == algorithm }) else { return nil }
            return idle[index].contexts.popLast()
        }
        guard let context = pooled ?? Self.makeContext(key.pointer, algorithm) else {
            OpenSSL.clearErrors()
            return false
        }
        guard verify(context) == 1 else {
            EVP_PKEY_CTX_free(context)
            OpenSSL.clearErrors()
            return false
        }
        let isKept = lock.withLock { () -> Bool in
            guard let index = idle.firstIndex(where: { $0.algorithm == algorithm }) else {
                idle.append((algorithm, [context]))
                return true
            }
            guard idle[index].contexts.count < Self.maximumIdlePerAlgorithm else { return false }
            idle[index].contexts.append(context)
            return true
        }
        if !isKept { EVP_PKEY_CTX_free(context) }
        return true
    }

    private static func makeContext(_ pkey: OpaquePointer, _ algorithm: SignatureAlgorithm) -> OpaquePointer? {
        guard let digest = algorithm.digest, let context = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { return nil }
        guard EVP_PKEY_verify_init(context) == 1,
              EVP_PKEY_CTX_set_signature_md(context, digest.evpMD) == 1,
              algorithm.configurePadding(context) else {
            EVP_PKEY_CTX_free(context)
            return nil
        }
        return context
    }
}

extension SignatureAlgorithm {
    /// Applies the RSA padding mode (and PSS salt/MGF1) to a sign or verify context.
    func configurePadding(_ context: OpaquePointer) -> Bool {
        switch self {
        case .rsaPKCS1v15:
            return EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1
        case .rsaPSS(let digest):
            // JWS fixes the salt to the hash length (RFC 7518 §3.5); "auto" would accept other salts.
            return EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PSS_PADDING) == 1
                && EVP_PKEY_CTX_set_rsa_pss_saltlen(context, RSA_PSS_SALTLEN_DIGEST) == 1
                && EVP_PKEY_CTX_set_rsa_mgf1_md(context, digest.evpMD) == 1
        case .ecdsaP256SHA256, .ed25519:
            return true
        }
    }
}
