import Foundation
import TetherCore
import TetherJOSE

/// A stand-in for Apple, Facebook and Google that runs inside `tether dev` and the tests.
///
/// It signs real RS256 tokens with its own keys, serves their key sets, fakes
/// the part of the Graph API that Tether calls, and keeps an SMS outbox. Tokens
/// carry the real issuers by default, so the only configuration that differs
/// from production is where keys and the Graph API are fetched from
/// (``configuration(baseURL:)``).
///
/// - Important: anyone who can reach these routes can mint a valid sign-in for
///   any user. They must never be mounted by `tether serve`, and the server
///   that mounts them must listen on loopback only (127.0.0.1 or ::1).
public struct DevIdentityProvider: Sendable {
    /// The Apple client id (`aud`) minted tokens carry unless a request names another.
    public static let appleClientID = "dev.tether.apple"
    /// The Facebook app id minted tokens and Graph answers carry unless a request names another.
    public static let facebookAppID = "1000000000000001"
    /// The fake Graph API's app secret (for the app token and `appsecret_proof`).
    public static let facebookAppSecret = "dev-facebook-app-secret"
    /// The Google client id (`aud`) minted tokens carry unless a request names another.
    public static let googleClientID = "dev-tether.apps.googleusercontent.com"

    /// The outbox `GET /dev-idp/sms` shows; give it to whatever sends SMS under `tether dev`.
    public let smsOutbox: DevSMSOutbox
    /// The outbox `GET /dev-idp/mail` shows; give it to whatever sends mail under `tether dev`.
    public let mailOutbox: DevMailOutbox
    let keys: DevSigningKeys
    let graph: DevGraphTokens
    /// Apple's codes and refresh tokens, revocations received and outages switched on.
    let grants: DevProviderGrants
    let clock: any WallClock

    /// A dev identity provider.
    ///
    /// - Parameters:
    ///   - keyDirectory: where the RSA keys are kept as PEM files (made on first start, such as
    ///     `.tether/dev-idp`); nil makes fresh in-memory keys (tests).
    ///   - clock: the time tokens are stamped with.
    ///   - smsOutbox: the outbox to show at `/sms`.
    ///   - mailOutbox: the outbox to show at `/mail`.
    public init(
        keyDirectory: URL?, clock: any WallClock = SystemWallClock(), smsOutbox: DevSMSOutbox? = nil, mailOutbox: DevMailOutbox? = nil
    ) throws {
        keys = try DevSigningKeys(directory: keyDirectory)
        graph = DevGraphTokens()
        grants = DevProviderGrants()
        self.clock = clock
        self.smsOutbox = smsOutbox ?? DevSMSOutbox(clock: clock)
        self.mailOutbox = mailOutbox ?? DevMailOutbox(clock: clock)
    }

    /// The `TETHER_*` variables that point provider verification at a dev identity provider mounted at `baseURL`.
    ///
    /// Client ids, app id and secret are the dev ones; issuers stay the real
    /// defaults, because minted tokens carry them.
    ///
    /// - Parameter baseURL: where the routes are mounted, such as `http://127.0.0.1:8080/dev-idp`.
    public static func configuration(baseURL: URL) -> [String: String] {
        [
            "TETHER_APPLE_CLIENT_IDS": appleClientID,
            "TETHER_APPLE_JWKS_URL": endpoint(baseURL, "apple/auth/keys"),
            "TETHER_APPLE_TEAM_ID": appleTeam.teamID,
            "TETHER_APPLE_KEY_ID": appleTeam.keyID,
            "TETHER_APPLE_PRIVATE_KEY_FILE": appleTeam.file,
            "TETHER_APPLE_TOKEN_URL": endpoint(baseURL, "apple/auth/token"),
            "TETHER_APPLE_REVOKE_URL": endpoint(baseURL, "apple/auth/revoke"),
            "TETHER_FACEBOOK_APP_IDS": facebookAppID,
            "TETHER_FACEBOOK_APP_SECRET": facebookAppSecret,
            "TETHER_FACEBOOK_GRAPH_URL": endpoint(baseURL, "facebook/graph"),
            "TETHER_FACEBOOK_LIMITED_JWKS_URL": endpoint(baseURL, "facebook/jwks"),
            "TETHER_GOOGLE_CLIENT_IDS": googleClientID,
            "TETHER_GOOGLE_JWKS_URL": endpoint(baseURL, "google/certs"),
        ]
    }

    /// The JWKS `provider`'s tokens are checked against (every key still published), as JSON.
    public func publishedKeySet(_ provider: ProviderName) throws -> [UInt8] {
        try keys.ring(provider).published.publicJSONObject().jsonBytes
    }

    /// Starts signing `provider`'s tokens with a new key; the old one stays published. Answers the new `kid`.
    public func rotateKey(_ provider: ProviderName) throws -> String {
        try keys.rotate(provider)
    }

    /// `base/path` without a doubled slash.
    public static func endpoint(_ base: URL, _ path: String) -> String {
        var text = base.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        return text + "/" + path
    }
}
