import TetherCore
import TetherProviders

/// Revokes a user's Sign in with Apple authorization (the revocation Apple asks of an app before it deletes an
/// account): Firebase's `accounts:revokeToken` calls it, and any surface that offers the same would.
public struct AppleCodeRevocation: Sendable {
    /// Apple's token and revoke calls; nil when this server holds no Apple client secret.
    let grants: ProviderGrantCalls?
    /// The app's client ids, one of which a code was issued to.
    let clientIDs: [String]

    public init(grants: ProviderGrantCalls?, clientIDs: [String]) {
        self.grants = grants?.revokesAppleCodes == true ? grants : nil
        self.clientIDs = clientIDs
    }

    /// Redeems `code` with Apple and revokes the refresh token it gives at once, when it is a code of `account`'s own
    /// Apple ID: another person's, or a user with no Apple ID, is refused (`invalid_credential`), nothing revoked.
    func revoke(_ code: String, for account: UserAccount) async throws(ProviderError) {
        guard let grants else {
            throw ProviderError.unsupportedProvider.with(provider: ProviderName.apple.rawValue)
                .telling(client: "This server cannot revoke Apple tokens: it holds no Apple client secret.")
        }
        guard let apple = account.identities[ProviderName.apple.rawValue] else {
            throw ProviderError.invalidCredential(.subject).with(provider: ProviderName.apple.rawValue)
                .telling(client: "The signed-in user has no Apple ID to revoke a token of.")
        }
        try await grants.revokeAppleCode(code, clientIDs: clientIDs, subject: apple.uid)
    }
}
