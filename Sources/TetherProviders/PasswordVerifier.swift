import Foundation
import TetherCrypto

/// Hashes new passwords and checks presented ones, taking the same time whether or not the account exists.
///
/// Every check runs exactly one key derivation: against the stored hash when
/// the account exists, against a dummy hash made at start-up with the same
/// parameters when it does not. Both end in the same `invalid_credential`
/// (`password`) error, so neither the answer nor its timing tells an attacker
/// which emails have accounts.
public struct PasswordVerifier: Sendable {
    /// The hash function (scrypt in production).
    public let hasher: any PasswordHashing
    /// The rules for new passwords.
    public let policy: PasswordPolicy
    private let dummyHash: String

    /// A verifier; makes the dummy hash now, so the first unknown-email sign-in costs no more than later ones.
    public init(hasher: any PasswordHashing = ScryptPasswordHasher(), policy: PasswordPolicy = PasswordPolicy()) throws {
        self.hasher = hasher
        self.policy = policy
        dummyHash = try hasher.hash(SecureRandom.bytes(count: 16))
    }

    /// The stored form of a new password, after checking it against ``policy``.
    ///
    /// - Throws: `invalid_request` when the password breaks the policy.
    public func hash(_ password: String) throws -> String {
        try policy.validate(password)
        return try hasher.hash(Self.bytes(password))
    }

    /// Checks `password` against an account's `storedHash`.
    ///
    /// - Throws: `invalid_credential` (`password`) when it does not match;
    ///   ``CryptoError`` when `storedHash` is not a hash the hasher reads (a storage fault, not the user's).
    public func verify(_ password: String, storedHash: String) throws {
        // A hash imported from another system is checked as that system hashed: the password's own UTF-8.
        let matches = ImportedPasswordHash.isImported(storedHash)
            ? try ImportedPasswordHash.verify(Array(password.utf8), against: storedHash)
            : try hasher.verify(Self.bytes(password), against: storedHash)
        guard matches else { throw Self.mismatch }
    }

    /// Does the work of ``verify(_:storedHash:)`` for an email without an account, then fails the same way.
    public func verifyAgainstDummy(_ password: String) throws -> Never {
        // The outcome is irrelevant; running the derivation is the point.
        _ = try? hasher.verify(Self.bytes(password), against: dummyHash)
        throw Self.mismatch
    }

    /// Whether `storedHash` should be replaced by a fresh ``hash(_:)`` after a successful sign-in.
    public func needsRehash(_ storedHash: String) -> Bool {
        ImportedPasswordHash.isImported(storedHash) || hasher.needsRehash(storedHash)
    }

    private static let mismatch = ProviderError.invalidCredential(.password)
        .with(provider: ProviderName.password.rawValue).with(detail: "email or password does not match")

    private static func bytes(_ password: String) -> [UInt8] {
        Array(PasswordPolicy.normalized(password).utf8)
    }
}
