import COpenSSL
import Foundation

extension PublicKey {
    /// Whether `signature` is a valid signature of `message` under this key with `algorithm`.
    ///
    /// ECDSA signatures are the raw 64-byte `r‖s` form of JWS; use
    /// ``isValidECDSASignature(der:for:)`` for DER. A key of the wrong family,
    /// SHA-1, or a signature of the wrong length is simply invalid.
    public func isValidSignature(
        _ signature: some ContiguousBytes, for message: some ContiguousBytes, algorithm: SignatureAlgorithm
    ) -> Bool {
        signature.withUnsafeBytes { signatureBytes in
            message.withUnsafeBytes { messageBytes in
                isValidSignature(signatureBytes, for: messageBytes, algorithm: algorithm)
            }
        }
    }

    /// Whether `signature` is a valid DER-encoded ECDSA P-256/SHA-256 signature of `message`.
    public func isValidECDSASignature(der signature: some ContiguousBytes, for message: some ContiguousBytes) -> Bool {
        guard type == .ecP256 else { return false }
        return signature.withUnsafeBytes { signatureBytes in
            message.withUnsafeBytes { messageBytes in
                verifyPrehashed(signatureBytes, messageBytes, algorithm: .ecdsaP256SHA256)
            }
        }
    }

    private func isValidSignature(
        _ signature: UnsafeRawBufferPointer, for message: UnsafeRawBufferPointer, algorithm: SignatureAlgorithm
    ) -> Bool {
        guard algorithm.keyType == type, algorithm.isAccepted else { return false }
        switch algorithm {
        case .rsaPKCS1v15, .rsaPSS:
            // RFC 8017 §8.2.2 step 1: the signature is exactly as long as the modulus.
            guard signature.count == (bitCount + 7) / 8 else { return false }
            return verifyPrehashed(signature, message, algorithm: algorithm)
        case .ecdsaP256SHA256:
            guard let der = ECDSASignature.der(fromRaw: signature) else { return false }
            return der.withUnsafeBytes { verifyPrehashed($0, message, algorithm: algorithm) }
        case .ed25519:
            guard signature.count == 64 else { return false }
            return verifyEd25519(signature, message)
        }
    }

    /// Hashes `message` on the stack and runs `EVP_PKEY_verify` on a pooled context.
    private func verifyPrehashed(
        _ signature: UnsafeRawBufferPointer, _ message: UnsafeRawBufferPointer, algorithm: SignatureAlgorithm
    ) -> Bool {
        guard let digest = algorithm.digest, let signatureBase = signature.baseAddress else { return false }
        return withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { hash in
            let hashLength = digest.hash(message, into: hash)
            return contexts.use(key, algorithm: algorithm) { context in
                EVP_PKEY_verify(context, signatureBase.assumingMemoryBound(to: UInt8.self), signature.count,
                                hash.baseAddress!.assumingMemoryBound(to: UInt8.self), hashLength)
            }
        }
    }

    /// Ed25519 hashes internally, so it goes through the one-shot DigestVerify.
    private func verifyEd25519(_ signature: UnsafeRawBufferPointer, _ message: UnsafeRawBufferPointer) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        let isValid = OpenSSL.withBytePointer(message) { messagePointer in
            EVP_DigestVerifyInit_ex(context, nil, nil, nil, nil, key.pointer, nil) == 1
                && EVP_DigestVerify(context, signature.baseAddress!.assumingMemoryBound(to: UInt8.self), signature.count,
                                    messagePointer, message.count) == 1
        }
        if !isValid { OpenSSL.clearErrors() }
        return isValid
    }
}
