import Foundation
import TetherCore

/// Verifies email-and-password credentials against a ``PasswordAccountDirectory``.
///
/// An unknown email runs the same key derivation as a wrong password
/// (``PasswordVerifier/verifyAgainstDummy(_:)``) and fails with the same error.
public struct PasswordIdentityVerifier: IdentityVerifier {
    /// Hashing and the equal-work rule.
    public let passwords: PasswordVerifier
    /// Where accounts are looked up.
    public let directory: any PasswordAccountDirectory

    /// A verifier over `directory`.
    public init(passwords: PasswordVerifier, directory: any PasswordAccountDirectory) {
        self.passwords = passwords
        self.directory = directory
    }

    /// Verifies a ``ProviderCredential/password(email:password:)`` credential.
    public func verify(_ credential: ProviderCredential) async throws -> VerifiedIdentity {
        guard case .password(let email, let password) = credential else {
            throw ProviderError.unsupportedProvider.with(provider: ProviderName.password.rawValue).with(detail: "not a password credential")
        }
        let found = try await directory.passwordAccount(forEmail: email)
        let account = try await BlockingWork.run { [passwords] in
            guard let found else { try passwords.verifyAgainstDummy(password) }
            try passwords.verify(password, storedHash: found.passwordHash)
            return found
        }
        var verified = VerifiedIdentity(
            provider: ProviderName.password.rawValue, credentialForm: .password, uid: account.email, email: account.email,
            isEmailVerified: account.isEmailVerified)
        verified.verifiedPasswordHash = account.passwordHash
        return verified
    }
}
