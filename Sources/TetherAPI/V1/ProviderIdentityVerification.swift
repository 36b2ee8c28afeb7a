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

    public func verify(_ credential: ProviderCredential) async throws -> ExternalIdentity {
        let verified = try await providers.verify(credential)
        var identity = ExternalIdentity(
            provider: verified.provider, uid: verified.uid, email: verified.email,
            // Facebook never vouches for an email, whatever a profile says.
            isEmailVerified: verified.provider == "facebook" ? false : verified.isEmailVerified,
            displayName: verified.displayName, photoURL: verified.photoURL?.absoluteString)
        identity.spentNonce = verified.spentNonce
        identity.providerGrant = verified.providerGrant
        identity.codeNotRedeemed = verified.codeNotRedeemed
        identity.verifiedPasswordHash = verified.verifiedPasswordHash
        return identity
    }

    public func release(_ identity: ExternalIdentity) async {
        guard let nonce = identity.spentNonce else { return }
        // Best effort: when the database is down, the retry meets the same outage anyway.
        try? await providers.nonceStore.release(nonce)
    }

    public func spend(_ nonce: UsedNonce) async throws -> Bool {
        try await providers.nonceStore.consume(nonce, now: Date()) == .accepted
    }
}
