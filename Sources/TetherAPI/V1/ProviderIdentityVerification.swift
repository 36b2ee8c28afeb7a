import Foundation
import TetherCore
import TetherHTTP
import TetherProviders

/// Verifies API.md credentials with the configured identity providers.
public struct ProviderIdentityVerification: IdentityVerification {
    let providers: IdentityProviders

    public init(providers: IdentityProviders) {
        self.providers = providers
    }

    public func verify(provider: String, credential: JSONValue) async throws -> ExternalIdentity {
        let verified = try await providers.verify(ProviderCredential(provider: provider, credential: credential))
        return ExternalIdentity(
            provider: verified.provider, uid: verified.uid, email: verified.email,
            // Facebook never vouches for an email, whatever a profile says.
            isEmailVerified: verified.provider == "facebook" ? false : verified.isEmailVerified,
            displayName: verified.displayName, photoURL: verified.photoURL?.absoluteString)
    }
}
