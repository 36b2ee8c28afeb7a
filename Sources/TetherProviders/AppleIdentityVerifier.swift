import Foundation
import TetherCore
import TetherJOSE

/// Verifies Sign in with Apple identity tokens.
///
/// On top of the shared ID-token checks: a token with an `events` claim is
/// refused, because Apple's server-to-server notifications are signed with the
/// same keys for the same audience and must never pass for a sign-in;
/// `email_verified` and `is_private_email` may be Booleans or the strings
/// "true"/"false"; `real_user_status` is kept. The name comes only from the
/// app's `fullName` (Apple gives it to the app on the first sign-in only) and
/// is marked client-asserted.
public struct AppleIdentityVerifier: IdentityVerifier {
    private let token: IDTokenVerifier
    /// Redeems authorization codes, when Apple's client secret is configured.
    private let grants: AppleGrantClient?

    /// A verifier for `configuration`'s Apple settings, fetching keys through `httpClient`; `grants`
    /// redeems the authorization codes that come with identity tokens.
    public init(
        configuration: ProvidersConfiguration, httpClient: any HTTPClient, nonceStore: any NonceStore,
        clock: any WallClock = SystemWallClock(), grants: AppleGrantClient? = nil
    ) throws {
        token = try IDTokenVerifier(
            .apple, configuration.apple, in: configuration, httpClient: httpClient, nonceStore: nonceStore, clock: clock)
        self.grants = grants
    }

    /// Verifies an ``ProviderCredential/apple(identityToken:rawNonce:fullName:authorizationCode:)`` credential.
    ///
    /// With an authorization code, the identity token is verified first, then the code is redeemed at
    /// Apple for a refresh token, which must name the same `sub`. A used or expired code refuses the
    /// sign-in (`invalid_credential`); Apple out of reach does not: the sign-in goes on with the identity
    /// token alone, and the identity says why the code was not redeemed.
    public func verify(_ credential: ProviderCredential) async throws -> VerifiedIdentity {
        guard case .apple(let identityToken, let rawNonce, let fullName, let authorizationCode) = credential else {
            throw token.fail(.unsupportedProvider, "not an Apple credential")
        }
        let checked = try await token.check(identityToken, rawNonce: rawNonce)
        let claims = checked.claims
        guard claims["events"] == nil else {
            throw token.fail(.invalidCredential(.eventsClaim), "a server-to-server notification is not a sign-in")
        }
        let email = try token.string(claims, "email")
        let isEmailVerified = try token.flexibleBool(claims, "email_verified") ?? false
        let isPrivateEmail = try token.flexibleBool(claims, "is_private_email") ?? false
        let realUserStatus: Int?
        switch claims["real_user_status"] {
        case nil, .null?: realUserStatus = nil
        case .number(let value)? where value.rounded() == value && (0...2).contains(value): realUserStatus = Int(value)
        default: throw token.fail(.invalidCredential(.malformed), "real_user_status must be 0, 1 or 2")
        }
        let spentNonce = try await token.consumeNonce(of: checked)
        var identity = VerifiedIdentity(
            provider: ProviderName.apple.rawValue, credentialForm: .appleIdentityToken, uid: checked.subject,
            email: email, isEmailVerified: email != nil && isEmailVerified, isPrivateEmail: isPrivateEmail,
            displayName: fullName?.formatted, givenName: fullName?.givenName, familyName: fullName?.familyName,
            isNameClientAsserted: fullName != nil, rawClaims: token.rawClaims(checked),
            audience: token.audience(of: checked), tokenExpiresAt: claims.expiresAt, realUserStatus: realUserStatus)
        identity.spentNonce = spentNonce
        if let authorizationCode {
            do {
                try await redeem(authorizationCode, for: &identity)
            } catch {
                // A code refused (used, expired, someone else's) refuses the credential, not its token: the
                // token may come again without it, which a nonce spent here would turn into a replay.
                await token.release(spentNonce)
                throw error
            }
        }
        return identity
    }

    private func redeem(_ code: String, for identity: inout VerifiedIdentity) async throws {
        guard let grants, let clientID = identity.audience else {
            identity.codeNotRedeemed = "not_configured"
            return
        }
        switch await grants.redeem(code: code, clientID: clientID) {
        case .redeemed(let refreshToken, let subject):
            guard subject == nil || subject == identity.uid else {
                throw token.fail(.invalidCredential(.subject), "the authorization code was issued for another Apple ID")
            }
            identity.providerGrant = ProviderGrant(kind: "refresh_token", token: refreshToken, clientId: clientID)
        case .invalidGrant(let reason):
            throw token.fail(.invalidCredential(.tokenInvalid), "the authorization code was used, has expired or is not this app's (\(reason))")
        case .refused(let reason):
            identity.codeNotRedeemed = "refused: " + reason
        case .unreachable:
            identity.codeNotRedeemed = "provider_unavailable"
        }
    }
}
