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

    /// A verifier for `configuration`'s Apple settings, fetching keys through `httpClient`.
    public init(
        configuration: ProvidersConfiguration, httpClient: any HTTPClient, nonceStore: any NonceStore,
        clock: any WallClock = SystemWallClock()
    ) throws {
        token = try IDTokenVerifier(
            .apple, configuration.apple, in: configuration, httpClient: httpClient, nonceStore: nonceStore, clock: clock)
    }

    /// Verifies an ``ProviderCredential/apple(identityToken:rawNonce:fullName:)`` credential.
    public func verify(_ credential: ProviderCredential) async throws -> VerifiedIdentity {
        guard case .apple(let identityToken, let rawNonce, let fullName) = credential else {
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
        return identity
    }
}
