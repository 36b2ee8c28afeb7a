/// Turns a credential into a verified identity, or says precisely why not.
///
/// Implementations throw ``ProviderError`` for everything about the credential
/// or the provider; a failure of Tether's own storage (the nonce store, the
/// password directory) propagates as that store's error.
public protocol IdentityVerifier: Sendable {
    /// Verifies `credential`.
    func verify(_ credential: ProviderCredential) async throws -> VerifiedIdentity
}
