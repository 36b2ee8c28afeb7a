import COpenSSL
import Foundation

/// The scrypt key-derivation function (RFC 7914) through OpenSSL's `EVP_KDF`.
///
/// scrypt needs `128 · r · N` bytes of memory per derivation, which is what
/// makes guessing passwords on GPUs and ASICs expensive.
public enum Scrypt: Sendable {
    /// The most memory one derivation may use: more is refused rather than allocated.
    public static let maximumMemoryBytes: UInt64 = 1 << 30

    /// Derives `length` bytes from `password` and `salt` with cost `n` (a power of two above 1), block size `r` and parallelism `p`.
    ///
    /// - Throws: ``CryptoError/invalidInput`` for parameters outside RFC 7914's
    ///   ranges or needing more than ``maximumMemoryBytes``.
    public static func deriveKey(
        password: some ContiguousBytes, salt: some ContiguousBytes, n: UInt64, r: UInt32, p: UInt32, length: Int
    ) throws -> [UInt8] {
        guard n > 1, n & (n - 1) == 0, r > 0, p > 0, length > 0, length <= 1024 else {
            throw CryptoError.invalidInput.with(detail: "scrypt parameters out of range")
        }
        let (memory, overflow) = (128 * UInt64(r)).multipliedReportingOverflow(by: n)
        guard !overflow, memory <= maximumMemoryBytes else {
            throw CryptoError.invalidInput.with(detail: "scrypt would need more than \(maximumMemoryBytes) bytes")
        }
        return try password.withUnsafeBytes { passwordBytes in
            try salt.withUnsafeBytes { saltBytes in
                try derive(passwordBytes, saltBytes, n: n, r: r, p: p, length: length)
            }
        }
    }

    private static func derive(
        _ password: UnsafeRawBufferPointer, _ salt: UnsafeRawBufferPointer, n: UInt64, r: UInt32, p: UInt32, length: Int
    ) throws -> [UInt8] {
        guard let context = EVP_KDF_CTX_new(kdf) else { throw OpenSSL.failure(.operationFailed, "EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(context) }
        // OSSL_PARAM keeps pointers to the integers, so they need storage that outlives
        // the parameter array, not the call-long pointers `&n` would give.
        let wide = UnsafeMutablePointer<UInt64>.allocate(capacity: 2)
        let narrow = UnsafeMutablePointer<UInt32>.allocate(capacity: 2)
        defer {
            wide.deallocate()
            narrow.deallocate()
        }
        // OpenSSL's default cap is about 1 GiB too; stating it keeps the limit ours, not the library's.
        wide.initialize(to: n)
        (wide + 1).initialize(to: maximumMemoryBytes + 1024 * 1024)
        narrow.initialize(to: r)
        (narrow + 1).initialize(to: p)
        var output = [UInt8](repeating: 0, count: length)
        let status = OpenSSL.withBytePointer(password) { passwordPointer in
            OpenSSL.withBytePointer(salt) { saltPointer in
                var params = [
                    OSSL_PARAM_construct_octet_string(
                        OpenSSL.cString("pass"), UnsafeMutableRawPointer(mutating: passwordPointer), password.count),
                    OSSL_PARAM_construct_octet_string(
                        OpenSSL.cString("salt"), UnsafeMutableRawPointer(mutating: saltPointer), salt.count),
                    OSSL_PARAM_construct_uint64(OpenSSL.cString("n"), wide),
                    OSSL_PARAM_construct_uint32(OpenSSL.cString("r"), narrow),
                    OSSL_PARAM_construct_uint32(OpenSSL.cString("p"), narrow + 1),
                    OSSL_PARAM_construct_uint64(OpenSSL.cString("maxmem_bytes"), wide + 1),
                    OSSL_PARAM_construct_end(),
                ]
                return EVP_KDF_derive(context, &output, length, &params)
            }
        }
        guard status == 1 else { throw OpenSSL.failure(.operationFailed, "EVP_KDF_derive(SCRYPT)") }
        return output
    }

    // Fetched once, like the digests: the fetch walks the provider store under a lock.
    // EVP_KDF objects are immutable and reference-counted, so sharing one is safe.
    nonisolated(unsafe) private static let kdf: OpaquePointer = {
        guard let kdf = EVP_KDF_fetch(nil, "SCRYPT", nil) else {
            fatalError("OpenSSL default provider has no SCRYPT: \(OpenSSL.failure(.operationFailed, "EVP_KDF_fetch"))")
        }
        return kdf
    }()
}
