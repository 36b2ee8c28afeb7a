/// The form of credential an identity was proven with.
public enum CredentialForm: String, Sendable, Hashable, Codable, CaseIterable {
    /// An Apple identity token.
    case appleIdentityToken = "apple_identity_token"
    /// A classic Facebook access token, checked with Graph `debug_token` and `/me`.
    case facebookAccessToken = "facebook_access_token"
    /// A Facebook Limited Login authentication token (a JWT).
    case facebookLimitedLogin = "facebook_limited_login"
    /// A Facebook session-info token with a client-supplied profile.
    case facebookSessionInfo = "facebook_session_info"
    /// A Google ID token.
    case googleIDToken = "google_id_token"
    /// An email and password.
    case password
    /// Nothing but an id the client holds (an anonymous user).
    case anonymous
    /// A Firebase custom token signed by a service account (verified by the Firebase surface).
    case customToken = "custom_token"
}
