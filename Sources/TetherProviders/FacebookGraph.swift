import Foundation
import TetherCrypto
import TetherJOSE

/// The two Graph API calls that prove a Facebook token: `debug_token` and `/me`.
///
/// Credentials travel in `Authorization` headers, never in URLs: the app token
/// (`app_id|app_secret`) for `debug_token`, the user token for `/me`, which
/// also carries `appsecret_proof` so a token stolen from another app cannot be
/// used through ours. Failures are sorted into the provider's fault
/// (timeouts, 5xx, throttling, answers that are not the expected JSON:
/// `provider_unavailable`) and the token's (`invalid_credential`).
struct FacebookGraph: Sendable {
    /// What `debug_token` says about a token.
    struct TokenInfo {
        let appID: String
        let userID: String
        /// nil when the token never expires (`expires_at` 0).
        let expiresAt: Date?
    }

    /// Graph error codes that mean "try again later" rather than "bad token":
    /// unknown/service errors and the rate limits.
    private static let transientErrorCodes: Set<Int> = [1, 2, 4, 17, 32, 341, 613]
    private static let maximumResponseBytes = 64 * 1024

    let baseURL: URL
    let appIDs: [String]
    let appSecret: String
    let timeout: TimeInterval
    let httpClient: any ProviderHTTPClient
    let clock: any WallClock

    /// The Graph API of `configuration`; nil without an app id and secret (only Limited Login works then).
    init?(_ configuration: ProvidersConfiguration, httpClient: any ProviderHTTPClient, clock: any WallClock) {
        let facebook = configuration.facebook
        guard let secret = facebook.appSecret, !facebook.appIDs.isEmpty else { return nil }
        self.init(
            baseURL: facebook.graphURL, appIDs: facebook.appIDs, appSecret: secret, timeout: facebook.graphTimeout,
            httpClient: httpClient, clock: clock)
    }

    init(baseURL: URL, appIDs: [String], appSecret: String, timeout: TimeInterval, httpClient: any ProviderHTTPClient, clock: any WallClock) {
        self.baseURL = baseURL
        self.appIDs = appIDs
        self.appSecret = appSecret
        self.timeout = timeout
        self.httpClient = httpClient
        self.clock = clock
    }

    /// Asks `debug_token` about `token` and checks validity, app, type, user and expiry.
    func inspect(_ token: String) async throws(ProviderError) -> TokenInfo {
        let body = try await call(
            "debug_token", query: [("input_token", token)], bearer: "\(appIDs[0])|\(appSecret)")
        guard let data = body["data"]?.objectValue else { throw unavailable("debug_token answer has no data object") }
        guard data["is_valid"]?.boolValue == true else {
            let message = data["error"]?.objectValue?["message"]?.stringValue ?? "is_valid is not true"
            throw ProviderError.invalidCredential(.tokenInvalid).with(detail: message)
        }
        guard let appID = Self.identifier(data["app_id"]), appIDs.contains(appID) else {
            throw ProviderError.invalidCredential(.appID).with(detail: "token belongs to app \(Self.identifier(data["app_id"]) ?? "none")")
        }
        guard data["type"]?.stringValue == "USER" else {
            throw ProviderError.invalidCredential(.tokenType).with(detail: "type \(data["type"]?.stringValue ?? "missing")")
        }
        guard let userID = Self.identifier(data["user_id"]), !userID.isEmpty else {
            throw ProviderError.invalidCredential(.subject).with(detail: "debug_token names no user_id")
        }
        guard let expiry = data["expires_at"]?.numberValue else { throw unavailable("debug_token answer has no expires_at") }
        let expiresAt = expiry == 0 ? nil : Date(timeIntervalSince1970: expiry)
        if let expiresAt, expiresAt <= clock.now() {
            throw ProviderError.invalidCredential(.expired).with(detail: "expired at \(expiresAt)")
        }
        return TokenInfo(appID: appID, userID: userID, expiresAt: expiresAt)
    }

    /// The user's profile from `/me`, read with `token` and its `appsecret_proof`.
    func profile(_ token: String) async throws(ProviderError) -> JOSEObject {
        let proof = HMAC.authenticationCode(for: Array(token.utf8), key: Array(appSecret.utf8), digest: .sha256).hexString
        let body = try await call(
            "me", query: [("fields", "id,name,email,first_name,last_name,picture"), ("appsecret_proof", proof)],
            bearer: token)
        guard Self.identifier(body["id"]) != nil else { throw unavailable("/me answer has no id") }
        return body
    }

    /// Revokes every permission the person `userID` gave the app (`DELETE /{user-id}/permissions`, sent as a
    /// POST with `method=delete`), with their token and its `appsecret_proof`. A token Graph no longer
    /// accepts (the grant is gone already) counts as revoked; throws `provider_unavailable` otherwise.
    func revokePermissions(userID: String, token: String) async throws(ProviderError) {
        let proof = HMAC.authenticationCode(for: Array(token.utf8), key: Array(appSecret.utf8), digest: .sha256).hexString
        let url = Self.url(baseURL, path: "\(userID)/permissions", query: [("method", "delete"), ("appsecret_proof", proof)])
        let response: HTTPClientResponse
        do {
            response = try await httpClient.post(
                url: url, headers: ["Authorization": "Bearer \(token)"], body: [], timeout: timeout, maxBytes: Self.maximumResponseBytes)
        } catch {
            throw unavailable("permissions: \(error)")
        }
        let body = (try? JOSEObject(parsing: response.body)) ?? JOSEObject()
        if response.status == 200, body["success"]?.boolValue == true { return }
        // 190: the token is invalid or expired, so the grant it stood for is gone already.
        if response.status < 500, body["error"]?.objectValue?["code"]?.numberValue == 190 { return }
        throw unavailable("permissions answered \(response.status)")
    }

    /// A Graph id: a string, or (defensively) an integral number written without a fraction.
    static func identifier(_ value: JOSEValue?) -> String? {
        switch value {
        case .string(let text)?: text
        case .number(let number)? where number.rounded() == number && number >= 0 && number < 9.0e15: String(Int64(number))
        default: nil
        }
    }

    private func call(_ path: String, query: [(String, String)], bearer: String) async throws(ProviderError) -> JOSEObject {
        let url = Self.url(baseURL, path: path, query: query)
        let response: HTTPClientResponse
        do {
            response = try await httpClient.get(
                url: url, headers: ["Authorization": "Bearer \(bearer)"], timeout: timeout, maxBytes: Self.maximumResponseBytes)
        } catch {
            throw unavailable("\(path): \(error)")
        }
        if response.status >= 500 || response.status == 429 {
            throw unavailable("\(path) answered \(response.status)")
        }
        guard let body = try? JOSEObject(parsing: response.body) else {
            throw unavailable("\(path) answered \(response.status) with a body that is not a JSON object")
        }
        guard response.status == 200 else {
            let error = body["error"]?.objectValue
            let message = error?["message"]?.stringValue ?? "status \(response.status)"
            let code = error?["code"]?.numberValue.map(Int.init)
            if error?["is_transient"]?.boolValue == true || code.map(Self.transientErrorCodes.contains) == true {
                throw unavailable("\(path): \(message)")
            }
            throw ProviderError.invalidCredential(.tokenInvalid).with(detail: "\(path): \(message)")
        }
        return body
    }

    private func unavailable(_ detail: String) -> ProviderError {
        ProviderError.providerUnavailable.with(detail: "Facebook Graph \(detail)")
    }

    /// `base/path?query`, every query value percent-encoded beyond the unreserved set.
    static func url(_ base: URL, path: String, query: [(String, String)]) -> URL {
        var text = base.absoluteString
        if !text.hasSuffix("/") { text += "/" }
        return URL(string: text + path + "?" + formEncoded(query.map { ($0.0, $0.1) }))!
    }
}
