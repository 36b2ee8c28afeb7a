import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG.
public enum SecureRandom: Sendable {
    /// `count` random bytes.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "random byte count out of range")
        var bytes = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return bytes }
        // RAND_bytes fails only if the DRBG cannot be seeded; carrying on would hand out
        // predictable secrets, so this is a hard stop rather than a thrown error.
        guard RAND_bytes(&bytes, Int32(count)) == 1 else {
            fatalError("RAND_bytes failed: \(OpenSSL.failure(.operationFailed, "RAND_bytes"))")
        }
        return bytes
    }
}
