import Foundation
import TetherCore

/// Where each identity provider's keys and APIs are, and which client ids it accepts.
///
/// Every endpoint and audience is configuration, so tests, the dev identity
/// provider and production run the same verification code. A provider without
/// client (or app) ids is disabled: its credentials fail with `unsupported_provider`.
public struct ProvidersConfiguration: Sendable {
    /// An OpenID Connect provider whose ID tokens Tether verifies: Apple or Google.
    public struct TokenIssuer: Sendable {
        /// `TETHER_<PROVIDER>_CLIENT_IDS`: the client ids (Apple bundle or Services ids) accepted as `aud`.
        public var clientIDs: [String]
        /// `TETHER_<PROVIDER>_JWKS_URL`.
        public var jwksURL: URL
        /// `TETHER_<PROVIDER>_ISSUER`: the exact `iss` (Google's scheme-less twin is accepted too).
        public var issuer: String
        /// The greatest age of an ID token, measured from `iat`.
        public var maximumTokenAge: TimeInterval

        /// A provider's endpoints; disabled until `clientIDs` is set.
        public init(clientIDs: [String] = [], jwksURL: URL, issuer: String, maximumTokenAge: TimeInterval) {
            self.clientIDs = clientIDs
            self.jwksURL = jwksURL
            self.issuer = issuer
            self.maximumTokenAge = maximumTokenAge
        }

        /// Sign in with Apple's production endpoints; identity tokens may be 10 minutes old.
        public static let apple = TokenIssuer(
            jwksURL: URL(string: "https://appleid.apple.com/auth/keys")!, issuer: "https://appleid.apple.com",
            maximumTokenAge: 600)

        /// Google's production endpoints; ID tokens live one hour.
        public static let google = TokenIssuer(
            jwksURL: URL(string: "https://www.googleapis.com/oauth2/v3/certs")!, issuer: "https://accounts.google.com",
            maximumTokenAge: 3600)

        /// Whether sign-in with this provider is on (some client id is configured).
        public var isEnabled: Bool { !clientIDs.isEmpty }
    }

    /// Facebook Login: classic access tokens, Limited Login tokens and session-info tokens.
    public struct Facebook: Sendable {
        /// `TETHER_FACEBOOK_APP_IDS`; the first is the app `appSecret` belongs to.
        public var appIDs: [String]
        /// `TETHER_FACEBOOK_APP_SECRET`: signs `appsecret_proof` and forms the app token for `debug_token`.
        /// Without it only Limited Login tokens can be verified.
        public var appSecret: String?
        /// `TETHER_FACEBOOK_GRAPH_URL`: the versioned Graph API base.
        public var graphURL: URL
        /// `TETHER_FACEBOOK_LIMITED_JWKS_URL`.
        public var limitedLoginJWKSURL: URL
        /// `TETHER_FACEBOOK_LIMITED_ISSUER`.
        public var limitedLoginIssuer: String
        /// The greatest age of a Limited Login token, measured from `iat`.
        public var maximumTokenAge: TimeInterval
        /// How long one Graph API call may take before the provider counts as unavailable.
        public var graphTimeout: TimeInterval

        /// Facebook's production endpoints; disabled until `appIDs` is set.
        public init(
            appIDs: [String] = [], appSecret: String? = nil,
            graphURL: URL = URL(string: "https://graph.facebook.com/v21.0")!,
            limitedLoginJWKSURL: URL = URL(string: "https://limited.facebook.com/.well-known/oauth/openid/jwks/")!,
            limitedLoginIssuer: String = "https://www.facebook.com", maximumTokenAge: TimeInterval = 600,
            graphTimeout: TimeInterval = 5
        ) {
            self.appIDs = appIDs
            self.appSecret = appSecret
            self.graphURL = graphURL
            self.limitedLoginJWKSURL = limitedLoginJWKSURL
            self.limitedLoginIssuer = limitedLoginIssuer
            self.maximumTokenAge = maximumTokenAge
            self.graphTimeout = graphTimeout
        }

        /// The Limited Login token settings: app ids as audiences, the Limited Login key set and issuer.
        public var limitedLogin: TokenIssuer {
            TokenIssuer(
                clientIDs: appIDs, jwksURL: limitedLoginJWKSURL, issuer: limitedLoginIssuer, maximumTokenAge: maximumTokenAge)
        }

        /// Whether Facebook sign-in is on (some app id is configured).
        public var isEnabled: Bool { !appIDs.isEmpty }
    }

    /// Sign in with Apple.
    public var apple: TokenIssuer
    /// Facebook settings.
    public var facebook: Facebook
    /// Google Sign-In.
    public var google: TokenIssuer
    /// Clock skew tolerated on `exp`, `iat` and the maximum token ages, in seconds.
    public var leeway: TimeInterval
    /// How long one key-set fetch may take.
    public var jwksTimeout: TimeInterval
    /// Apple's client secret and token endpoints, for authorization codes, revocation and checks; nil
    /// when `TETHER_APPLE_TEAM_ID`, `TETHER_APPLE_KEY_ID` and `TETHER_APPLE_PRIVATE_KEY_FILE` are unset.
    public var appleGrants: AppleGrantsConfiguration?
    /// Whether anonymous users may be made (`TETHER_ANONYMOUS_USERS`, on unless `off`), as Parse's
    /// `enableAnonymousUsers`: when off, the `anonymous` provider is refused like an unconfigured one.
    public var allowsAnonymousUsers = true

    /// Every provider disabled unless configured, with production endpoints.
    public init(
        apple: TokenIssuer = .apple, facebook: Facebook = Facebook(), google: TokenIssuer = .google, leeway: TimeInterval = 60,
        jwksTimeout: TimeInterval = 5
    ) {
        self.apple = apple
        self.facebook = facebook
        self.google = google
        self.leeway = leeway
        self.jwksTimeout = jwksTimeout
    }

    /// A configuration problem: one line naming the variable.
    public typealias Invalid = ConfigurationError

    /// Reads the `TETHER_APPLE_*`, `TETHER_FACEBOOK_*` and `TETHER_GOOGLE_*` variables of `environment`.
    ///
    /// Unset or blank variables keep their defaults.
    ///
    /// - Throws: ``Invalid`` for a URL that is not `https` (plain `http` only on
    ///   loopback), a list without entries, or an empty app secret.
    public static func fromEnvironment(_ environment: [String: String]) throws(Invalid) -> ProvidersConfiguration {
        let reader = EnvironmentReader(environment)
        var configuration = ProvidersConfiguration()
        configuration.apple = try reader.tokenIssuer("TETHER_APPLE", defaults: .apple)
        configuration.google = try reader.tokenIssuer("TETHER_GOOGLE", defaults: .google)
        configuration.appleGrants = try AppleGrantsConfiguration.fromEnvironment(reader)
        let facebook = configuration.facebook
        configuration.facebook = Facebook(
            appIDs: try reader.list("TETHER_FACEBOOK_APP_IDS") ?? facebook.appIDs,
            appSecret: try reader.secret("TETHER_FACEBOOK_APP_SECRET"),
            graphURL: try reader.url("TETHER_FACEBOOK_GRAPH_URL") ?? facebook.graphURL,
            limitedLoginJWKSURL: try reader.url("TETHER_FACEBOOK_LIMITED_JWKS_URL") ?? facebook.limitedLoginJWKSURL,
            limitedLoginIssuer: try reader.issuer("TETHER_FACEBOOK_LIMITED_ISSUER") ?? facebook.limitedLoginIssuer)
        switch environment["TETHER_ANONYMOUS_USERS"]?.trimmingCharacters(in: .whitespaces).lowercased() {
        case nil, "", "on", "true", "1": configuration.allowsAnonymousUsers = true
        case "off", "false", "0": configuration.allowsAnonymousUsers = false
        case let value?: throw Invalid("TETHER_ANONYMOUS_USERS", "must be on or off, not \(value)")
        }
        return configuration
    }
}
