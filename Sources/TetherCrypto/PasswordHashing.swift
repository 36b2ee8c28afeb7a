/// Turns passwords into self-describing stored hashes and checks passwords against them.
///
/// The seam between password sign-in and the hash function, so that the
/// sign-in code can be shown to run the same work whether or not an account exists.
public protocol PasswordHashing: Sendable {
    /// A new hash of `password` with a fresh salt, carrying its own parameters.
    func hash(_ password: [UInt8]) throws -> String
    /// Whether `password` matches `storedHash`; throws when `storedHash` is not a hash this hasher reads.
    func verify(_ password: [UInt8], against storedHash: String) throws -> Bool
    /// Whether `storedHash` was made with weaker parameters than the current ones (rehash after a successful sign-in).
    func needsRehash(_ storedHash: String) -> Bool
}
