import Foundation
import TetherCore
import TetherJOSE

/// Verifies Google ID tokens.
///
/// The shared ID-token checks, with `iss` either `https://accounts.google.com`
/// or `accounts.google.com` (Google issues both), and `email_verified` and the
/// profile (name, picture) taken from the signed token.
public struct GoogleIdentityVerifier: IdentityVerifier {
    private let token: IDTokenVerifier

    /// A verifier for `configuration`'s Google settings, fetching keys through `httpClient`.
    public init(
        configuration: ProvidersConfiguration, httpClient: any HTTPClient, nonceStore: any NonceStore,
        clock: any WallClock = SystemWallClock()
    ) throws {
        token = try IDTokenVerifier(
            .google, configuration.google, in: configuration, httpClient: httpClient, nonceStore: nonceStore, clock: clock)
    }

    /// Verifies a ``ProviderCredential/google(idToken:rawNonce:)`` credential.
    public func verify(_ credential: ProviderCredential) async throws -> VerifiedIdentity {
        guard case .google(let idToken, let rawNonce) = credential else {
            throw token.fail(.unsupportedProvider, "not a Google credential")
        }
        let checked = try await token.check(idToken, rawNonce: rawNonce)
        let claims = checked.claims
        let email = try token.string(claims, "email")
        let isEmailVerified = try token.flexibleBool(claims, "email_verified") ?? false
        var identity = VerifiedIdentity(
            provider: ProviderName.google.rawValue, credentialForm: .googleIDToken, uid: checked.subject, email: email,
            isEmailVerified: email != nil && isEmailVerified, displayName: try token.string(claims, "name"),
            givenName: try token.string(claims, "given_name"), familyName: try token.string(claims, "family_name"),
            photoURL: try token.string(claims, "picture").flatMap(URL.httpURL), rawClaims: token.rawClaims(checked),
            audience: token.audience(of: checked), tokenExpiresAt: claims.expiresAt)
        identity.spentNonce = try await token.consumeNonce(of: checked)
        return identity
    }
}
