import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Cryptographically secure random bytes from OpenSSL's DRBG.
///
/// Small requests are served from a pool of each thread's own, drawn from the DRBG 4 KiB at a time, each
/// byte handed out once and zeroed as it goes. A sign-in asks for a dozen bytes several times (an AES-GCM
/// nonce for each event it seals, its refresh token), and one `RAND_bytes` call, with its locks and its
/// generator's set-up, cost about as much for 12 bytes as for 4 KiB: 2% of tether's CPU a sign-in. (One
/// pool behind a lock was slower still: the threads queued on it.)
public enum SecureRandom: Sendable {
    /// The largest request the pool serves; larger ones go to the DRBG themselves.
    static let pooledLimit = 256

    private final class Pool {
        var bytes = [UInt8](repeating: 0, count: 4096)
        /// Where the bytes not yet handed out begin.
        var next = 4096
    }

    /// Each thread's pool, released with the thread.
    private static let poolKey: pthread_key_t = {
        var key = pthread_key_t()
        #if canImport(Darwin)
        let created = pthread_key_create(&key) { pool in Unmanaged<AnyObject>.fromOpaque(pool).release() }
        #else
        let created = pthread_key_create(&key) { pool in
            guard let pool else { return }
            Unmanaged<AnyObject>.fromOpaque(pool).release()
        }
        #endif
        precondition(created == 0, "pthread_key_create failed: \(created)")
        return key
    }()

    /// The calling thread's pool.
    private static var threadPool: Pool {
        if let pool = pthread_getspecific(poolKey) {
            return Unmanaged<Pool>.fromOpaque(pool).takeUnretainedValue()
        }
        let pool = Pool()
        pthread_setspecific(poolKey, Unmanaged.passRetained(pool).toOpaque())
        return pool
    }

    /// `count` random bytes.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "random byte count out of range")
        guard count > 0 else { return [] }
        guard count <= pooledLimit else { return drawn(count) }
        let pool = threadPool
        if pool.bytes.count - pool.next < count {
            pool.bytes = drawn(pool.bytes.count)
            pool.next = 0
        }
        let range = pool.next..<(pool.next + count)
        defer {
            pool.bytes.replaceSubrange(range, with: repeatElement(0, count: count))
            pool.next = range.upperBound
        }
        return Array(pool.bytes[range])
    }

    /// `count` bytes from the DRBG itself.
    private static func drawn(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        // RAND_bytes fails only if the DRBG cannot be seeded; carrying on would hand out
        // predictable secrets, so this is a hard stop rather than a thrown error.
        guard RAND_bytes(&bytes, Int32(count)) == 1 else {
            fatalError("RAND_bytes failed: \(OpenSSL.failure(.operationFailed, "RAND_bytes"))")
        }
        return bytes
    }
}
