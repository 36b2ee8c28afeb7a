import Foundation
import TetherCore
import TetherJOSE

/// Verifies the three forms of Facebook credential.
///
/// - Limited Login tokens: the shared ID-token checks plus a non-empty `jti`;
///   the profile claims are kept.
/// - Classic access tokens: Graph `debug_token` must vouch for the token, app,
///   type and user, then `/me` gives the profile, whose `id` must be that user.
/// - Session-info tokens: `debug_token` vouches for the token, app and user;
///   the profile is the app's own and is recorded as client-asserted.
///
/// Facebook never says whether an email is verified, so it is never treated as verified.
public struct FacebookIdentityVerifier: IdentityVerifier {
    private let limitedLogin: IDTokenVerifier
    private let graph: FacebookGraph?

    /// A verifier for `configuration`'s Facebook settings; without an app secret only Limited Login works.
    public init(
        configuration: ProvidersConfiguration, httpClient: any ProviderHTTPClient, nonceStore: any NonceStore,
        clock: any WallClock = SystemWallClock()
    ) throws {
        let facebook = configuration.facebook
        limitedLogin = try IDTokenVerifier(
            .facebook, facebook.limitedLogin, in: configuration, httpClient: httpClient, nonceStore: nonceStore, clock: clock)
        graph = FacebookGraph(configuration, httpClient: httpClient, clock: clock)
    }

    /// Verifies any of the three Facebook credential forms.
    public func verify(_ credential: ProviderCredential) async throws -> VerifiedIdentity {
        switch credential {
        case .facebookLimitedLogin(let authenticationToken, let rawNonce):
            return try await verifyLimitedLogin(authenticationToken, rawNonce: rawNonce)
        case .facebookAccessToken(let accessToken):
            return try await verifyAccessToken(accessToken)
        case .facebookSessionInfo(let sessionInfoToken, let profile):
            return try await verifySessionInfo(sessionInfoToken, profile: profile)
        default:
            throw limitedLogin.fail(.unsupportedProvider, "not a Facebook credential")
        }
    }

    private func verifyLimitedLogin(_ token: String, rawNonce: String?) async throws -> VerifiedIdentity {
        let checked = try await limitedLogin.check(token, rawNonce: rawNonce)
        let claims = checked.claims
        guard let jwtID = try limitedLogin.string(claims, "jti"), !jwtID.allSatisfy(\.isWhitespace) else {
            throw limitedLogin.fail(.invalidCredential(.tokenID), "jti missing or empty")
        }
        var identity = VerifiedIdentity(
            provider: ProviderName.facebook.rawValue, credentialForm: .facebookLimitedLogin, uid: checked.subject,
            email: try limitedLogin.string(claims, "email"), displayName: try limitedLogin.string(claims, "name"),
            givenName: try limitedLogin.string(claims, "given_name"), familyName: try limitedLogin.string(claims, "family_name"),
            photoURL: try limitedLogin.string(claims, "picture").flatMap(URL.httpURL), rawClaims: limitedLogin.rawClaims(checked),
            audience: limitedLogin.audience(of: checked), tokenExpiresAt: claims.expiresAt)
        identity.spentNonce = try await limitedLogin.consumeNonce(of: checked)
        return identity
    }

    private func verifyAccessToken(_ token: String) async throws(ProviderError) -> VerifiedIdentity {
        let graph = try requireGraph()
        do throws(ProviderError) {
            // The two Graph calls go out together: a sign-in waits for one round trip to Facebook, not two.
            // debug_token's verdict still comes first: when it refuses the token, /me's answer is not read.
            async let asked = Self.outcome { () async throws(ProviderError) in try await graph.profile(token) }
            let info = try await graph.inspect(token)
            let profile = try await asked.get()
            guard FacebookGraph.identifier(profile["id"]) == info.userID else {
                throw ProviderError.invalidCredential(.userMismatch).with(detail: "/me id differs from debug_token user_id")
            }
            let picture = profile["picture"]?.objectValue?["data"]?.objectValue?["url"]?.stringValue
            var identity = VerifiedIdentity(
                provider: ProviderName.facebook.rawValue, credentialForm: .facebookAccessToken, uid: info.userID,
                email: Self.text(profile["email"]), displayName: Self.text(profile["name"]),
                givenName: Self.text(profile["first_name"]), familyName: Self.text(profile["last_name"]),
                photoURL: picture.flatMap(URL.httpURL), rawClaims: Dictionary(profile), audience: info.appID,
                tokenExpiresAt: info.expiresAt)
            // Kept to revoke the app's permissions when the identity goes, and to check the grant on refresh.
            identity.providerGrant = ProviderGrant(kind: "access_token", token: token, clientId: info.appID)
            return identity
        } catch {
            throw error.with(provider: ProviderName.facebook.rawValue)
        }
    }

    private func verifySessionInfo(_ token: String, profile: FacebookProfile) async throws(ProviderError) -> VerifiedIdentity {
        let graph = try requireGraph()
        do throws(ProviderError) {
            let info = try await graph.inspect(token)
            guard profile.id == info.userID else {
                throw ProviderError.invalidCredential(.userMismatch).with(detail: "profile id differs from debug_token user_id")
            }
            return VerifiedIdentity(
                provider: ProviderName.facebook.rawValue, credentialForm: .facebookSessionInfo, uid: info.userID,
                email: profile.email, displayName: profile.name, givenName: profile.firstName, familyName: profile.lastName,
                photoURL: profile.pictureURL, isNameClientAsserted: true, isProfileClientAsserted: true,
                rawClaims: profile.raw, audience: info.appID, tokenExpiresAt: info.expiresAt)
        } catch {
            throw error.with(provider: ProviderName.facebook.rawValue)
        }
    }

    private func requireGraph() throws(ProviderError) -> FacebookGraph {
        guard let graph else {
            // "Facebook is not enabled" would be wrong: Limited Login tokens are verified without the secret.
            throw limitedLogin.fail(.unsupportedProvider, "classic and session-info tokens need TETHER_FACEBOOK_APP_SECRET")
                .telling(client: "Facebook access tokens (classic and session-info) are not accepted on this server; Limited Login tokens are.")
        }
        return graph
    }

    /// What `work` returns or throws, as a value: a child task's typed error kept through `async let`.
    private static func outcome<Value>(_ work: () async throws(ProviderError) -> Value) async -> Result<Value, ProviderError> {
        do throws(ProviderError) { return .success(try await work()) } catch { return .failure(error) }
    }

    private static func text(_ value: JOSEValue?) -> String? {
        guard let text = value?.stringValue, !text.isEmpty else { return nil }
        return text
    }
}
