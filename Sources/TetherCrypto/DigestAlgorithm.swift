import COpenSSL
import Foundation

/// A SHA family hash function, used for digests, HMAC, signatures and TOTP.
public enum DigestAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// SHA-1: only for HMAC in HOTP/TOTP, where RFC 4226 still requires it.
    case sha1 = "SHA1"
    /// SHA-256.
    case sha256 = "SHA256"
    /// SHA-384.
    case sha384 = "SHA384"
    /// SHA-512.
    case sha512 = "SHA512"

    /// The size of the digest in bytes.
    public var byteCount: Int {
        switch self {
        case .sha1: 20
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }

    /// The cached `EVP_MD` for this algorithm.
    var evpMD: OpaquePointer {
        switch self {
        case .sha1: OpenSSL.sha1
        case .sha256: OpenSSL.sha256
        case .sha384: OpenSSL.sha384
        case .sha512: OpenSSL.sha512
        }
    }

    /// The digest of `data`.
    public func hash(_ data: some ContiguousBytes) -> [UInt8] {
        data.withUnsafeBytes { input in
            [UInt8](unsafeUninitializedCapacity: byteCount) { output, initialized in
                initialized = hash(input, into: UnsafeMutableRawBufferPointer(output))
            }
        }
    }

    /// Hashes `input` into `output` (at least ``byteCount`` bytes) and returns the digest length.
    func hash(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Int {
        var length: UInt32 = 0
        // A NULL data pointer with zero length is fine for EVP_Digest, but be explicit.
        let source = input.baseAddress ?? UnsafeRawPointer(output.baseAddress!)
        let status = EVP_Digest(source, input.count, output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                &length, evpMD, nil)
        // EVP_Digest only fails on allocation failure with a fetched, valid EVP_MD.
        precondition(status == 1, "EVP_Digest failed: \(OpenSSL.failure(.operationFailed, "EVP_Digest"))")
        return Int(length)
    }
}
