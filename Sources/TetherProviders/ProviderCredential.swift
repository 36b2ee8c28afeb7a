import Foundation

/// A credential a client presents to sign in or link, in one of the shapes of API.md.
///
/// Secrets never appear in ``description``, so a credential can be logged safely.
public enum ProviderCredential: Sendable, Hashable, CustomStringConvertible {
    /// `{"identityToken", "rawNonce"?, "fullName"?, "authorizationCode"?}`: an Apple identity token, the
    /// name the app received on the user's first sign-in (Apple sends it to the app only then, never in
    /// the token), and the authorization code of the same sign-in, which Tether redeems for a refresh
    /// token (kept to revoke the grant when the account goes, and to check it now and then).
    case apple(identityToken: String, rawNonce: String?, fullName: PersonName?, authorizationCode: String? = nil)
    /// `{"accessToken"}`: a classic Facebook user access token.
    case facebookAccessToken(String)
    /// `{"authenticationToken", "rawNonce"?}`: a Facebook Limited Login token.
    case facebookLimitedLogin(authenticationToken: String, rawNonce: String?)
    /// `{"sessionInfoToken", "profile"}`: a token from Graph's `fb_attenuate_token` exchange and the
    /// profile the app fetched itself (client-asserted).
    case facebookSessionInfo(sessionInfoToken: String, profile: FacebookProfile)
    /// `{"idToken", "rawNonce"?}`: a Google ID token.
    case google(idToken: String, rawNonce: String?)
    /// `{"email", "password"}`.
    case password(email: String, password: String)
    /// An anonymous user: `id` is the id the client keeps (Parse's `authData.anonymous.id`); nil
    /// makes a new anonymous user (`/v1`'s `{}`).
    case anonymous(id: String?)
    /// A Firebase custom token (`accounts:signInWithCustomToken`), verified by that surface itself.
    case customToken(String)

    /// The provider the credential is for.
    public var provider: ProviderName {
        switch self {
        case .apple: .apple
        case .facebookAccessToken, .facebookLimitedLogin, .facebookSessionInfo: .facebook
        case .google: .google
        case .password: .password
        case .anonymous: .anonymous
        case .customToken: .custom
        }
    }

    /// The form of the credential.
    public var form: CredentialForm {
        switch self {
        case .apple: .appleIdentityToken
        case .facebookAccessToken: .facebookAccessToken
        case .facebookLimitedLogin: .facebookLimitedLogin
        case .facebookSessionInfo: .facebookSessionInfo
        case .google: .googleIDToken
        case .password: .password
        case .anonymous: .anonymous
        case .customToken: .customToken
        }
    }

    /// The provider and form, without tokens or passwords.
    public var description: String {
        switch self {
        case .password(let email, _): "password(email: \(email))"
        default: "\(provider.rawValue)(\(form.rawValue))"
        }
    }
}
