import COpenSSL
import Foundation

/// Signing or verification contexts kept per algorithm so that a signature or a verify is one
/// `EVP_PKEY_sign` or `EVP_PKEY_verify` over a digest.
///
/// Creating and initialising an `EVP_PKEY_CTX` fetches the signature
/// implementation from the provider store, which costs a large share of an
/// RSA-2048 verification and of an ECDSA P-256 signature. A context is not
/// thread-safe, so each one is taken out of the pool under the lock, used by
/// one thread, and put back.
///
/// `@unchecked Sendable` invariant: `idle` is only read or written while `lock`
/// is held, and a context is in `idle` or in use by exactly one caller.
final class KeyContextPool: @unchecked Sendable {
    /// What the pool's contexts are initialised for.
    enum Operation {
        case sign, verify
    }

    private static let maximumIdlePerAlgorithm = 16
    private let operation: Operation
    private let lock = NSLock()
    // A key is used with one or two algorithms, so a short list beats hashing the enum twice per use.
    private var idle: [(algorithm: SignatureAlgorithm, contexts: [OpaquePointer])] = []

    init(_ operation: Operation) {
        self.operation = operation
    }

    deinit {
        for entry in idle {
            for context in entry.contexts { EVP_PKEY_CTX_free(context) }
        }
    }

    /// Runs `body` with a context for `algorithm` on `key`; a context that saw a failure (`body` answering
    /// anything but 1) is discarded. Answers whether `body` succeeded.
    func use(_ key: OpenSSLKey, algorithm: SignatureAlgorithm, _ body: (OpaquePointer) -> Int32) -> Bool {
        let pooled = lock.withLock { () -> OpaquePointer? in
            guard let index = idle.firstIndex(where: { $0.algorithm == algorithm }) else { return nil }
            return idle[index].contexts.popLast()
        }
        guard let context = pooled ?? makeContext(key.pointer, algorithm) else {
            OpenSSL.clearErrors()
            return false
        }
        guard body(context) == 1 else {
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

    private func makeContext(_ pkey: OpaquePointer, _ algorithm: SignatureAlgorithm) -> OpaquePointer? {
        guard let digest = algorithm.digest, let context = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { return nil }
        let initialised = switch operation {
        case .sign: EVP_PKEY_sign_init(context)
        case .verify: EVP_PKEY_verify_init(context)
        }
        guard initialised == 1,
              EVP_PKEY_CTX_set_signature_md(context, digest.evpMD) == 1,
              algorithm.configurePadding(context) else {
            EVP_PKEY_CTX_free(context)
            return nil
        }
        return context
    }
}
