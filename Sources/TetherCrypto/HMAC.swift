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
        let context = keyedContext(key, digest: digest)
        defer { EVP_MAC_CTX_free(context) }
        return finish(context, message, digest: digest)
    }

    /// A new `EVP_MAC_CTX` keyed with `key` for `digest`, ready for the message.
    fileprivate static func keyedContext(_ key: UnsafeRawBufferPointer, digest: DigestAlgorithm) -> OpaquePointer {
        guard let context = EVP_MAC_CTX_new(OpenSSL.hmac) else {
            fatalError("EVP_MAC_CTX_new failed: \(OpenSSL.failure(.operationFailed, "EVP_MAC_CTX_new"))")
        }
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
        // Only reachable on allocation failure: there is no invalid key to HMAC.
        precondition(status == 1, "HMAC failed: \(OpenSSL.failure(.operationFailed, "EVP_MAC_init"))")
        return context
    }

    /// The code of `message` on a keyed `context`, which is used up.
    fileprivate static func finish(_ context: OpaquePointer, _ message: UnsafeRawBufferPointer, digest: DigestAlgorithm) -> [UInt8] {
        var code = [UInt8](repeating: 0, count: digest.byteCount)
        var length = 0
        guard EVP_MAC_update(context, message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count) == 1,
              EVP_MAC_final(context, &code, &length, code.count) == 1 else {
            // Only reachable on allocation failure: there is no invalid input to HMAC.
            fatalError("HMAC failed: \(OpenSSL.failure(.operationFailed, "EVP_MAC"))")
        }
        return code
    }
}

/// An HMAC key used many times (a read model's seal, at every lookup of a sealed value): keyed once,
/// each code made on a copy of the keyed context. Keying fetches the digest from OpenSSL's provider
/// store and hashes the padded key twice, which cost more than the code of a short message.
///
/// `@unchecked Sendable` invariant: `keyed` is never used but to be copied (`EVP_MAC_CTX_dup` only
/// reads it), and is freed once, when the key is.
public final class HMACKey: @unchecked Sendable, Hashable {
    public let digest: DigestAlgorithm
    private let key: [UInt8]
    private let keyed: OpaquePointer

    public init(_ key: [UInt8], digest: DigestAlgorithm) {
        self.key = key
        self.digest = digest
        self.keyed = key.withUnsafeBytes { HMAC.keyedContext($0, digest: digest) }
    }

    deinit {
        EVP_MAC_CTX_free(keyed)
    }

    /// The HMAC of `message` under this key, as ``HMAC/authenticationCode(for:key:digest:)`` makes it.
    public func authenticationCode(for message: some ContiguousBytes) -> [UInt8] {
        guard let context = EVP_MAC_CTX_dup(keyed) else {
            fatalError("EVP_MAC_CTX_dup failed: \(OpenSSL.failure(.operationFailed, "EVP_MAC_CTX_dup"))")
        }
        defer { EVP_MAC_CTX_free(context) }
        return message.withUnsafeBytes { HMAC.finish(context, $0, digest: digest) }
    }

    public static func == (lhs: HMACKey, rhs: HMACKey) -> Bool {
        lhs.digest == rhs.digest && ConstantTime.isEqual(lhs.key, rhs.key)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(digest)
        hasher.combine(key)
    }
}
