import Foundation
import Synchronization
import TetherCore
import TetherCrypto
import TetherJOSE

/// How Tether talks to Apple's token endpoints as the app's server: `TETHER_APPLE_TEAM_ID`,
/// `TETHER_APPLE_KEY_ID`, `TETHER_APPLE_PRIVATE_KEY_FILE` (the team's `.p8` key, ES256) and the
/// endpoints (`TETHER_APPLE_TOKEN_URL`, `TETHER_APPLE_REVOKE_URL`).
public struct AppleGrantsConfiguration: Sendable {
    public var teamID: String
    public var keyID: String
    /// The team's Sign in with Apple key (P-256).
    public var privateKey: PrivateKey
    public var tokenURL: URL
    public var revokeURL: URL
    /// How long one call may take.
    public var timeout: TimeInterval = 10

    public static let productionTokenURL = URL(string: "https://appleid.apple.com/auth/token")!
    public static let productionRevokeURL = URL(string: "https://appleid.apple.com/auth/revoke")!

    public init(teamID: String, keyID: String, privateKey: PrivateKey, tokenURL: URL = productionTokenURL, revokeURL: URL = productionRevokeURL) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKey = privateKey
        self.tokenURL = tokenURL
        self.revokeURL = revokeURL
    }

    /// The variables, all three of the key's or none (Apple's authorization codes are then not redeemed).
    static func fromEnvironment(_ reader: EnvironmentReader) throws(ProvidersConfiguration.Invalid) -> AppleGrantsConfiguration? {
        // Checked whether or not the key is set: a bad URL stops the start, as every other URL setting does.
        let tokenURL = try reader.url("TETHER_APPLE_TOKEN_URL") ?? productionTokenURL
        let revokeURL = try reader.url("TETHER_APPLE_REVOKE_URL") ?? productionRevokeURL
        let names = ["TETHER_APPLE_TEAM_ID", "TETHER_APPLE_KEY_ID", "TETHER_APPLE_PRIVATE_KEY_FILE"]
        let values = names.map(reader.value)
        guard values.contains(where: { $0 != nil }) else { return nil }
        for (name, value) in zip(names, values) where value == nil {
            throw ProvidersConfiguration.Invalid(name, "missing: the Apple client secret needs TETHER_APPLE_TEAM_ID, TETHER_APPLE_KEY_ID and TETHER_APPLE_PRIVATE_KEY_FILE together")
        }
        let path = values[2]!
        let key: PrivateKey
        do {
            key = try PrivateKey(pem: try String(contentsOfFile: path, encoding: .utf8))
        } catch {
            throw ProvidersConfiguration.Invalid("TETHER_APPLE_PRIVATE_KEY_FILE", "\(path) is not a readable PKCS#8 PEM key (Apple's .p8 file)")
        }
        guard key.type == .ecP256 else {
            throw ProvidersConfiguration.Invalid("TETHER_APPLE_PRIVATE_KEY_FILE", "\(path) is not a P-256 key: Apple's client secret is ES256")
        }
        return AppleGrantsConfiguration(
            teamID: values[0]!, keyID: values[1]!, privateKey: key, tokenURL: tokenURL, revokeURL: revokeURL)
    }
}

/// What a provider said about a stored grant.
public enum GrantStatus: String, Sendable {
    /// The grant still stands.
    case valid
    /// The person (or the provider) ended it: sessions from it end.
    case revoked
    /// No answer worth trusting (network, 5xx, throttling): nothing is concluded.
    case unreachable
}

/// Apple's `/auth/token` and `/auth/revoke`, with the client secret Tether signs itself.
public final class AppleGrantClient: Sendable {
    /// The client secret's lifetime (Apple allows up to six months); a secret is reused until an hour is left.
    static let secretLifetime: TimeInterval = 86_400
    private static let maximumResponseBytes = 64 * 1024

    let configuration: AppleGrantsConfiguration
    let httpClient: any ProviderHTTPClient
    let clock: any WallClock
    private let secrets = Mutex<[String: (secret: String, expiresAt: Date)]>([:])

    public init(configuration: AppleGrantsConfiguration, httpClient: any ProviderHTTPClient, clock: any WallClock = SystemWallClock()) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.clock = clock
    }

    /// The client secret for `clientID`: an ES256 JWT with the team as `iss`, the client as `sub`,
    /// `https://appleid.apple.com` as `aud` and the key's id as `kid`.
    public func clientSecret(for clientID: String) throws -> String {
        let now = clock.now()
        if let kept = secrets.withLock({ $0[clientID] }), kept.expiresAt.timeIntervalSince(now) > 3600 { return kept.secret }
        let issuedAt = now.timeIntervalSince1970.rounded(.down)
        let signer = try JWTSigner(privateKey: configuration.privateKey, algorithm: .es256, keyID: configuration.keyID)
        let secret = try signer.sign(claims: [
            "iss": .string(configuration.teamID), "sub": .string(clientID), "aud": "https://appleid.apple.com",
            "iat": .number(issuedAt), "exp": .number(issuedAt + Self.secretLifetime),
        ], type: nil)
        secrets.withLock { $0[clientID] = (secret, Date(timeIntervalSince1970: issuedAt + Self.secretLifetime)) }
        return secret
    }

    /// What redeeming an authorization code came to.
    public enum Redemption: Sendable {
        /// Apple's tokens: the refresh token, and the subject of the `id_token` it answered with.
        case redeemed(refreshToken: String, subject: String?)
        /// The code was used, expired or is not this client's (`invalid_grant`).
        case invalidGrant(String)
        /// Apple refused the request itself (`invalid_client` and the like): a configuration problem.
        case refused(String)
        /// No usable answer.
        case unreachable(String)
    }

    /// Redeems `code` (grant `authorization_code`) for `clientID`.
    public func redeem(code: String, clientID: String) async -> Redemption {
        switch await post(configuration.tokenURL, clientID: clientID, ["grant_type": "authorization_code", "code": code]) {
        case .answer(let status, let body) where status == 200:
            guard case .string(let refreshToken)? = body["refresh_token"] else { return .unreachable("Apple's token answer has no refresh_token") }
            return .redeemed(refreshToken: refreshToken, subject: Self.subject(ofIDToken: body["id_token"]))
        case .answer(let status, let body):
            let error = Self.errorCode(body) ?? "status \(status)"
            return error == "invalid_grant" ? .invalidGrant(error) : status >= 500 || status == 429 ? .unreachable(error) : .refused(error)
        case .failure(let reason):
            return .unreachable(reason)
        }
    }

    /// Validates a refresh token (grant `refresh_token`): Apple asks that this be done at most once a day.
    public func validate(refreshToken: String, clientID: String) async -> GrantStatus {
        switch await post(configuration.tokenURL, clientID: clientID, ["grant_type": "refresh_token", "refresh_token": refreshToken]) {
        case .answer(200, _): .valid
        case .answer(let status, let body) where status < 500 && status != 429 && Self.errorCode(body) == "invalid_grant": .revoked
        case .answer, .failure: .unreachable
        }
    }

    /// Revokes `token` (a refresh token) at Apple; throws with the reason when Apple did not confirm it.
    /// A token Apple no longer knows (`invalid_grant`) counts as revoked.
    public func revoke(token: String, clientID: String) async throws(ProviderError) {
        switch await post(configuration.revokeURL, clientID: clientID, ["token": token, "token_type_hint": "refresh_token"]) {
        case .answer(200, _): return
        case .answer(let status, let body):
            let error = Self.errorCode(body) ?? "status \(status)"
            if error == "invalid_grant" { return }
            throw ProviderError.providerUnavailable.with(provider: "apple").with(detail: "Apple's revoke endpoint answered \(status) \(error)")
        case .failure(let reason):
            throw ProviderError.providerUnavailable.with(provider: "apple").with(detail: reason)
        }
    }

    private enum Answer {
        case answer(Int, JOSEObject)
        case failure(String)
    }

    /// POSTs a form with the client's id and secret.
    private func post(_ url: URL, clientID: String, _ fields: [String: String]) async -> Answer {
        let secret: String
        do { secret = try clientSecret(for: clientID) } catch { return .failure("the client secret could not be signed: \(error)") }
        var form = fields
        form["client_id"] = clientID
        form["client_secret"] = secret
        let body = Array(formEncoded(form.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }).utf8)
        do {
            let response = try await httpClient.post(
                url: url, headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                body: body, timeout: configuration.timeout, maxBytes: Self.maximumResponseBytes)
            let object = response.body.isEmpty ? JOSEObject() : (try? JOSEObject(parsing: response.body)) ?? JOSEObject()
            return .answer(response.status, object)
        } catch {
            return .failure("\(url.host ?? "Apple"): \(error)")
        }
    }

    private static func errorCode(_ body: JOSEObject) -> String? {
        if case .string(let code)? = body["error"] { code } else { nil }
    }

    /// The `sub` of the `id_token` Apple answered with (read, not verified: it came straight from Apple over TLS).
    private static func subject(ofIDToken value: JOSEValue?) -> String? {
        guard case .string(let token)? = value, let jws = try? CompactJWS(parsing: token),
              let claims = try? JOSEObject(parsing: jws.payload), case .string(let subject)? = claims["sub"] else { return nil }
        return subject
    }
}

/// The calls Tether makes about stored grants: checking they still stand, and revoking them. Used on
/// refresh (checks) and by the outbox (revocations), never on the sign-in path.
public struct ProviderGrantCalls: Sendable {
    let apple: AppleGrantClient?
    let facebook: FacebookGraph?

    /// Whether `provider`'s grants can be checked and revoked with this configuration.
    public func handles(_ provider: String) -> Bool {
        switch provider {
        case "apple": apple != nil
        case "facebook": facebook != nil
        default: false
        }
    }

    /// Asks the provider whether `grant` still stands.
    public func check(_ provider: String, grant: ProviderGrant) async -> GrantStatus {
        switch provider {
        case "apple":
            guard let apple, let clientID = grant.clientId else { return .unreachable }
            return await apple.validate(refreshToken: grant.token, clientID: clientID)
        case "facebook":
            guard let facebook else { return .unreachable }
            do {
                _ = try await facebook.inspect(grant.token)
                return .valid
            } catch {
                return error.isRetryable ? .unreachable : .revoked
            }
        default:
            return .unreachable
        }
    }

    /// Whether Apple's tokens can be redeemed and revoked (Apple's client secret is configured).
    public var revokesAppleCodes: Bool { apple != nil }

    /// Redeems Apple's authorization `code` for the first of `clientIDs` it was issued to, and revokes the refresh token
    /// it gives at once: what an app asks when its user deletes their account (Sign in with Apple's token revocation;
    /// Identity Toolkit's `accounts:revokeToken`). The code must be `subject`'s (the caller's Apple ID): another
    /// person's is redeemed (codes are single use) but its token is not revoked. Throws `invalid_credential` when no
    /// client redeems it (used, expired, or another app's) or it is another person's, `provider_unavailable` when
    /// Apple did not answer, refused every client (a configuration problem), or is not configured.
    public func revokeAppleCode(_ code: String, clientIDs: [String], subject: String) async throws(ProviderError) {
        guard let apple else { throw ProviderError.providerUnavailable.with(provider: "apple").with(detail: "Apple's client secret is not configured") }
        var refusal: String?
        for clientID in clientIDs {
            switch await apple.redeem(code: code, clientID: clientID) {
            case .redeemed(let refreshToken, let redeemedFor):
                guard redeemedFor == nil || redeemedFor == subject else {
                    throw ProviderError.invalidCredential(.subject).with(provider: "apple")
                        .with(detail: "the authorization code was issued for another Apple ID")
                }
                try await apple.revoke(token: refreshToken, clientID: clientID)
                return
            case .invalidGrant:
                continue
            case .refused(let reason):
                refusal = reason  // this client's configuration; another may take the code
            case .unreachable(let reason):
                throw ProviderError.providerUnavailable.with(provider: "apple").with(detail: "Apple's token endpoint: \(reason)")
            }
        }
        if let refusal {
            throw ProviderError.providerUnavailable.with(provider: "apple").with(detail: "Apple's token endpoint refused: \(refusal)")
        }
        throw ProviderError.invalidCredential(.tokenInvalid).with(provider: "apple")
            .with(detail: "no client of this server redeems the authorization code (used, expired, or another app's)")
    }

    /// Revokes `grant` of the person `uid` at the provider; throws `provider_unavailable` with the reason
    /// when the provider did not confirm it (the outbox retries).
    public func revoke(_ provider: String, grant: ProviderGrant, uid: String) async throws(ProviderError) {
        switch provider {
        case "apple":
            guard let apple, let clientID = grant.clientId else {
                throw ProviderError.providerUnavailable.with(detail: "Apple's client secret is not configured (TETHER_APPLE_TEAM_ID …)")
            }
            try await apple.revoke(token: grant.token, clientID: clientID)
        case "facebook":
            guard let facebook else { throw ProviderError.providerUnavailable.with(detail: "Facebook is not configured") }
            try await facebook.revokePermissions(userID: uid, token: grant.token)
        default:
            throw ProviderError.unsupportedProvider.with(provider: provider)
        }
    }
}
