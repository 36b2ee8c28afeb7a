import COpenSSL
import Foundation

/// AES-256-GCM authenticated encryption with 12-byte nonces and 16-byte tags.
public enum AESGCM: Sendable {
    /// Key size: AES-256.
    public static let keyByteCount = 32
    /// Nonce size: the 96-bit IV GCM is designed for (NIST SP 800-38D §8.2).
    public static let nonceByteCount = 12
    /// Tag size: the full 128-bit tag.
    public static let tagByteCount = 16

    /// The output of ``seal(_:key:nonce:authenticating:)``.
    public struct SealedBox: Sendable, Hashable {
        /// The nonce used; never reuse one with the same key.
        public var nonce: [UInt8]
        /// The encrypted bytes, as long as the plaintext.
        public var ciphertext: [UInt8]
        /// The authentication tag.
        public var tag: [UInt8]

        /// Collects the three parts, checking the nonce and tag sizes.
        public init(nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) throws {
            guard nonce.count == AESGCM.nonceByteCount, tag.count == AESGCM.tagByteCount else {
                throw CryptoError.invalidInput.with(detail: "AES-GCM needs a 12-byte nonce and a 16-byte tag")
            }
            self.nonce = nonce
            self.ciphertext = ciphertext
            self.tag = tag
        }

        /// Splits `nonce ‖ ciphertext ‖ tag`.
        public init(combined: [UInt8]) throws {
            self = try combined.withUnsafeBufferPointer { try Self(splitting: $0) }
        }

        /// Splits `nonce ‖ ciphertext ‖ tag` held in `Data` (decoded from Base64, say), with no copy made first.
        public init(combined: Data) throws {
            self = try combined.withUnsafeBytes { try Self(splitting: $0.assumingMemoryBound(to: UInt8.self)) }
        }

        private init(splitting combined: UnsafeBufferPointer<UInt8>) throws {
            guard combined.count >= AESGCM.nonceByteCount + AESGCM.tagByteCount else {
                throw CryptoError.invalidInput.with(detail: "sealed box is too short")
            }
            let tagStart = combined.count - AESGCM.tagByteCount
            try self.init(nonce: Array(combined[..<AESGCM.nonceByteCount]),
                          ciphertext: Array(combined[AESGCM.nonceByteCount..<tagStart]),
                          tag: Array(combined[tagStart...]))
        }

        /// `nonce ‖ ciphertext ‖ tag`, the form to store.
        public var combined: [UInt8] { nonce + ciphertext + tag }
    }

    /// Encrypts and authenticates `plaintext`, and authenticates `aad`; a random nonce is drawn when none is given.
    public static func seal(
        _ plaintext: some ContiguousBytes, key: some ContiguousBytes, nonce: [UInt8]? = nil,
        authenticating aad: some ContiguousBytes = [UInt8]()
    ) throws -> SealedBox {
        try ScheduledKey(key).seal(plaintext, nonce: nonce, authenticating: aad)
    }

    /// Checks and decrypts `box`; throws ``CryptoError/authenticationFailed`` if anything was altered.
    public static func open(
        _ box: SealedBox, key: some ContiguousBytes, authenticating aad: some ContiguousBytes = [UInt8]()
    ) throws -> [UInt8] {
        try ScheduledKey(key).open(box, authenticating: aad)
    }

    /// A key made ready once (its AES round keys and its GHASH table, in an OpenSSL cipher context) for
    /// many seals and opens: each then only sets its nonce. Opening the 50 events of a history page with
    /// one user's key made the key ready 50 times, a tenth of the page's CPU.
    ///
    /// Not `Sendable`: its context is used by one caller at a time. Dropped, it frees and clears the context.
    public final class ScheduledKey {
        private let context: OpaquePointer

        /// `key`, 32 bytes, made ready.
        public init(_ key: some ContiguousBytes) throws {
            guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSL.failure(.operationFailed, "EVP_CIPHER_CTX_new") }
            do {
                try key.withUnsafeBytes { keyBytes in
                    guard keyBytes.count == keyByteCount else { throw CryptoError.invalidInput.with(detail: "key must be 32 bytes") }
                    guard EVP_CipherInit_ex2(context, OpenSSL.aes256GCM, keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                             nil, 1, nil) == 1 else {
                        throw OpenSSL.failure(.operationFailed, "EVP_CipherInit_ex2")
                    }
                }
            } catch {
                EVP_CIPHER_CTX_free(context)
                throw error
            }
            self.context = context
        }

        deinit {
            // EVP_CIPHER_CTX_free clears the round keys before freeing them.
            EVP_CIPHER_CTX_free(context)
        }

        /// ``AESGCM/seal(_:key:nonce:authenticating:)`` with this key.
        public func seal(
            _ plaintext: some ContiguousBytes, nonce: [UInt8]? = nil, authenticating aad: some ContiguousBytes = [UInt8]()
        ) throws -> SealedBox {
            let nonce = nonce ?? SecureRandom.bytes(count: nonceByteCount)
            var tag = [UInt8](repeating: 0, count: tagByteCount)
            let ciphertext = try run(isEncrypting: true, nonce: nonce, aad: aad, input: plaintext) { context in
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(tagByteCount), &tag) == 1
            }
            return try SealedBox(nonce: nonce, ciphertext: ciphertext, tag: tag)
        }

        /// ``AESGCM/open(_:key:authenticating:)`` with this key.
        public func open(_ box: SealedBox, authenticating aad: some ContiguousBytes = [UInt8]()) throws -> [UInt8] {
            var tag = box.tag
            return try run(isEncrypting: false, nonce: box.nonce, aad: aad, input: box.ciphertext) { context in
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(tagByteCount), &tag) == 1
            }
        }

        /// One pass of GCM under a fresh nonce; `tagStep` sets the expected tag before the final step (decrypt)
        /// or reads it after (encrypt).
        private func run(
            isEncrypting: Bool, nonce: [UInt8], aad: some ContiguousBytes, input: some ContiguousBytes,
            tagStep: (OpaquePointer) -> Bool
        ) throws -> [UInt8] {
            guard nonce.count == nonceByteCount else { throw CryptoError.invalidInput.with(detail: "nonce must be 12 bytes") }
            // No cipher and no key: the context keeps its key's schedule and starts over with this nonce.
            guard EVP_CipherInit_ex2(context, nil, nil, nonce, isEncrypting ? 1 : 0, nil) == 1 else {
                throw OpenSSL.failure(.operationFailed, "EVP_CipherInit_ex2")
            }
            // With a NULL output buffer, EVP_CipherUpdate feeds additional authenticated data. Its length
            // output is the AAD's and must not be taken for the ciphertext's when the plaintext is empty.
            try aad.withUnsafeBytes { aadBytes in
                guard let base = aadBytes.baseAddress, aadBytes.count > 0 else { return }
                var aadLength: Int32 = 0
                guard aadBytes.count < Int32.max,
                      EVP_CipherUpdate(context, nil, &aadLength, base.assumingMemoryBound(to: UInt8.self), Int32(aadBytes.count)) == 1 else {
                    throw OpenSSL.failure(.operationFailed, "EVP_CipherUpdate(aad)")
                }
            }
            var length: Int32 = 0
            var output = try input.withUnsafeBytes { inputBytes -> [UInt8] in
                guard inputBytes.count < Int32.max else { throw CryptoError.invalidInput.with(detail: "input too large") }
                var output = [UInt8](repeating: 0, count: inputBytes.count + tagByteCount)
                if let base = inputBytes.baseAddress, inputBytes.count > 0 {
                    guard EVP_CipherUpdate(context, &output, &length, base.assumingMemoryBound(to: UInt8.self),
                                           Int32(inputBytes.count)) == 1 else {
                        throw OpenSSL.failure(.operationFailed, "EVP_CipherUpdate")
                    }
                }
                return output
            }
            let produced = Int(length)
            if !isEncrypting {
                guard tagStep(context) else { throw OpenSSL.failure(.operationFailed, "EVP_CTRL_AEAD_SET_TAG") }
            }
            var finalLength: Int32 = 0
            let finalStatus = output.withUnsafeMutableBufferPointer { buffer in
                EVP_CipherFinal_ex(context, buffer.baseAddress! + produced, &finalLength)
            }
            guard finalStatus == 1 else {
                // Do not hand out unauthenticated plaintext.
                output.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
                if isEncrypting { throw OpenSSL.failure(.operationFailed, "EVP_CipherFinal_ex") }
                OpenSSL.clearErrors()
                throw CryptoError.authenticationFailed
            }
            if isEncrypting {
                guard tagStep(context) else { throw OpenSSL.failure(.operationFailed, "EVP_CTRL_AEAD_GET_TAG") }
            }
            output.removeSubrange((produced + Int(finalLength))...)
            return output
        }
    }
}
