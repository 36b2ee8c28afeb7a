import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherProviders

/// What providers tell Tether outside a sign-in (API.md "Provider callbacks"):
/// - `POST /v1/providers/apple/notifications` `{"payload": "<JWS>"}`: Sign in with Apple's
///   server-to-server notifications. `consent-revoked` unlinks Apple and ends the sessions it started;
///   `account-delete` (or `account-deleted`) does the same, and erases a user Apple was the only way in
///   for; `email-disabled` and `email-enabled` record the relay address's status on the user. A repeat
///   (same `jti`, or event time and subject) changes nothing. 200 once recorded; 4xx for a forged or
///   malformed payload; 5xx only when it could not be recorded, so Apple retries.
/// - `POST /v1/providers/facebook/data-deletion` with `signed_request` (HMAC-SHA256 with the app
///   secret): unlinks Facebook, or erases a user Facebook was the only way in for, and answers
///   `{url, confirmation_code}`; `GET` on that url answers the request's status.
public struct ProviderCallbackRoutes: Sendable {
    let callbacks: ProviderCallbacks
    let apple: AppleNotificationVerifier?
    let facebookAppSecret: String?
    let publicURL: URL?

    public init(accounts: AccountService, apple: AppleNotificationVerifier?, facebookAppSecret: String?, publicURL: URL?) {
        self.callbacks = ProviderCallbacks(accounts: accounts)
        self.apple = apple
        self.facebookAppSecret = facebookAppSecret
        self.publicURL = publicURL
    }

    private struct NotificationBody: Decodable {
        var payload: String
    }

    public func register(on router: inout Router) {
        router.post("/v1/providers/apple/notifications") { request in
            let body = try request.decodeJSON(NotificationBody.self)
            guard let apple else { throw ProviderError.unsupportedProvider.with(detail: "Sign in with Apple is not configured (TETHER_APPLE_CLIENT_IDS).") }
            let notification = try await apple.verify(body.payload)
            let outcome = try await callbacks.apple(notification, context: Self.context(request, "apple"))
            return try HTTPResponse.json(["status": outcome.duplicate ? "duplicate" : "processed", "outcome": outcome.outcome])
        }
        router.post("/v1/providers/facebook/data-deletion") { request in
            guard let secret = facebookAppSecret else {
                throw ProviderError.unsupportedProvider.with(detail: "Facebook data deletion needs TETHER_FACEBOOK_APP_SECRET.")
            }
            let fields = Dictionary(HTTPRequest.formFields(String(decoding: request.body, as: UTF8.self)).map { ($0.name, $0.value) }) { first, _ in first }
            guard let signed = fields["signed_request"], !signed.isEmpty else {
                throw AccountError.invalidRequest("The form must carry signed_request.")
            }
            let userId = try Self.facebookUser(signedRequest: signed, appSecret: secret)
            let code = try await callbacks.facebookDeletion(
                of: userId, request: ProviderCallbacks.requestKey(signed), context: Self.context(request, "facebook"))
            return try HTTPResponse.json(["url": statusURL(code, request), "confirmation_code": code])
        }
        router.get("/v1/providers/facebook/data-deletion/{code}") { request in
            let code = request.pathParameters["code"] ?? ""
            guard let (status, requestedAt) = try await callbacks.facebookDeletionStatus(code) else {
                throw Problem.notFound(detail: "No data deletion request has this confirmation code.")
            }
            return try HTTPResponse.json([
                "confirmation_code": .string(code), "status": .string(status),
                "requestedAt": .string(ISO8601Milliseconds.format(requestedAt)),
                "detail": .string(status == "completed"
                    ? "Tether no longer holds data linked to this Facebook account: the identity was removed, and a user who had no other way in was erased."
                    : "Tether held no account linked to this Facebook user."),
            ] as JSONValue)
        }
    }

    /// How old a `signed_request` may be (its `issued_at`): Facebook sends one as the person asks. An older one
    /// is refused, so that one kept somewhere cannot erase the account the same person made later; a repeat of
    /// one within this time is answered its first confirmation code (``ProviderCallbacks/facebookDeletion``).
    static let signedRequestLifetime: TimeInterval = 24 * 3600

    /// The Facebook user id of a `signed_request`: `<base64url signature>.<base64url payload>`, the
    /// signature HMAC-SHA256 of the payload's text with the app secret, compared in constant time, the
    /// payload's `algorithm` `HMAC-SHA256`, and its `issued_at`, when it has one, within
    /// ``signedRequestLifetime`` before `now` (and not over five minutes after it).
    static func facebookUser(signedRequest: String, appSecret: String, now: Date = Date()) throws -> String {
        let parts = signedRequest.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let signature = try? Base64URL.decode(parts[0]), let payload = try? Base64URL.decode(parts[1]) else {
            throw AccountError.invalidRequest("signed_request is not <signature>.<payload> in base64url.")
        }
        let expected = HMAC.authenticationCode(for: Array(parts[1].utf8), key: Array(appSecret.utf8), digest: .sha256)
        guard ConstantTime.isEqual(signature, expected) else {
            throw ProviderError.invalidCredential(.signature).with(provider: "facebook").with(detail: "signed_request's signature does not match")
        }
        guard case .object(let claims)? = try? JSONValue(parsing: payload) else {
            throw AccountError.invalidRequest("signed_request's payload is not a JSON object.")
        }
        guard case .string(let algorithm)? = claims["algorithm"], algorithm.uppercased() == "HMAC-SHA256" else {
            throw ProviderError.invalidCredential(.algorithm).with(provider: "facebook").with(detail: "signed_request's algorithm must be HMAC-SHA256")
        }
        let userId: String? = switch claims["user_id"] {
        case .string(let text)?: text
        case .int(let number)?: String(number)
        default: nil
        }
        guard let userId, !userId.isEmpty else { throw AccountError.invalidRequest("signed_request names no user_id.") }
        let issuedAt: Double? = switch claims["issued_at"] {
        case .int(let seconds)?: Double(seconds)
        case .double(let seconds)?: seconds
        case nil, .null?: nil
        default: throw AccountError.invalidRequest("signed_request's issued_at is not a number.")
        }
        if let issuedAt {
            let age = now.timeIntervalSince1970 - issuedAt
            guard age <= signedRequestLifetime else {
                throw ProviderError.invalidCredential(.expired).with(provider: "facebook").with(detail: "signed_request was issued \(Int(age)) s ago")
            }
            guard age >= -300 else {
                throw ProviderError.invalidCredential(.issuedInFuture).with(provider: "facebook").with(detail: "signed_request's issued_at is ahead")
            }
        }
        return userId
    }

    /// Where the person checks their request: `TETHER_PUBLIC_URL` (or the request's host) and the code.
    private func statusURL(_ code: String, _ request: HTTPRequest) -> String {
        let base = PublicBase.root(publicURL, host: request.headers["host"], allowingHost: true) ?? ""
        return "\(base)/v1/providers/facebook/data-deletion/\(code)"
    }

    static func context(_ request: HTTPRequest, _ provider: String) -> CommandContext {
        CommandContext(metadata: EventMetadata(
            actor: .system("\(provider) callback"), clientIP: request.remoteAddress, userAgent: request.headers["user-agent"], surface: "provider"))
    }
}
