import COpenSSL
import Foundation

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
