/// The identity providers Tether verifies credentials of.
public enum ProviderName: String, Sendable, Hashable, CaseIterable, Codable {
    /// Sign in with Apple.
    case apple
    /// Facebook Login (classic, Limited Login, session-info exchange).
    case facebook
    /// Google Sign-In.
    case google
    /// Email and password kept by Tether itself.
    case password
    /// An anonymous user: no credential, or (Parse) an id the client made up and keeps.
    case anonymous
    /// A uid a developer's backend vouches for with a Firebase custom token; only the Firebase surface
    /// verifies those (no identity provider takes them).
    case custom
}
