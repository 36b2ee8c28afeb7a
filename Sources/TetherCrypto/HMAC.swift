import COpenSSL
import Foundation

/// HMAC (RFC 2104) through OpenSSL's `EVP_MAC`.
public enum HMAC: Sendable {
    /// The HMAC of `message` under `key` with the hash function `digest`.
    public static func authenticationCode(
        for message: some ContiguousBytes, key: some ContiguousBytes, digest: DigestAlgorithm
    ) -> [UInt8] {
        key.withUnsafeBytes { keyBytes in
            message.withUnsafeBytes { messageBytes in
                authenticationCode(for: messageBytes, key: keyBytes, digest: digest)
            }
        }
    }

    /// Whether `code` is the HMAC of `message`, compared in constant time.
    public static func isValidAuthenticationCode(
        _ code: some ContiguousBytes, for message: some ContiguousBytes, key: some ContiguousBytes,
        digest: DigestAlgorithm
    ) -> Bool {
        let expected = authenticationCode(for: message, key: key, digest: digest)
        return ConstantTime.isEqual(expected, code)
    }

    static func authenticationCode(
        for message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, digest: DigestAlgorithm
    ) -> [UInt8] {
        guard let context = EVP_MAC_CTX_new(OpenSSL.hmac) else {
            fatalError("EVP_MAC_CTX_new failed: \(OpenSSL.failure(.operationFailed, "EVP_MAC_CTX_new"))")
        }
        defer { EVP_MAC_CTX_free(context) }
        let digestName: StaticString = switch digest {
        case .sha1: "SHA1"
        case .sha256: "SHA256"
        case .sha384: "SHA384"
        case .sha512: "SHA512"
        }
        var params = [
            OSSL_PARAM_construct_utf8_string(
                OpenSSL.cString("digest"), UnsafeMutablePointer(mutating: OpenSSL.cString(digestName)), 0),
            OSSL_PARAM_construct_end(),
        ]
        // HMAC accepts an empty key; OpenSSL wants a non-NULL pointer for it.
        var empty: UInt8 = 0
        let status: Int32 = withUnsafePointer(to: &empty) { fallback in
            let keyPointer = key.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? fallback
            return EVP_MAC_init(context, keyPointer, key.count, &params)
        }
        var code = [UInt8](repeating: 0, count: digest.byteCount)
        var length = 0
        guard status == 1,
              EVP_MAC_update(context, message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count) == 1,
              EVP_MAC_final(context, &code, &length, code.count) == 1 else {
            // Only reachable on allocation failure: there is no invalid input to HMAC.
            fatalError("HMAC failed: \(OpenSSL.failure(.operationFailed, "EVP_MAC"))")
        }
        return code
    }
}
