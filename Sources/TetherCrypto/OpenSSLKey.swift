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
