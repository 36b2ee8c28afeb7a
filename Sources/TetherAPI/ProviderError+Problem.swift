import TetherCore
import TetherHTTP
import TetherProviders

/// Provider errors are answered once, here: the status and problem API.md gives each outcome.
extension ProviderError: ProblemConvertible {
    /// The problem details answered to the client; internal details stay in logs.
    public var problem: Problem {
        var extensions: [String: JSONValue] = [:]
        if let provider { extensions["provider"] = .string(provider) }
        let name = provider.map(Self.displayName) ?? "The identity provider"
        switch reason {
        case .invalidCredential:
            let rejection = self.rejection ?? .signature
            extensions["reason"] = .string(rejection.rawValue)
            let detail = rejection == .password
                ? "The email or password is wrong."
                : "The \(provider.map(Self.displayName) ?? "provider") credential was rejected (\(rejection.rawValue))."
            return Problem(status: 401, code: code, title: "Invalid credential", detail: detail, extensions: extensions)
        case .unsupportedProvider:
            return Problem(
                status: 400, code: code, title: "Unsupported provider",
                detail: clientDetail
                    ?? provider.map { "Sign-in with \($0) is not enabled on this server." } ?? "This provider is not enabled on this server.",
                extensions: extensions)
        case .providerUnavailable:
            extensions["retryable"] = .bool(true)
            return Problem(
                status: 503, code: code, title: "Provider unavailable",
                detail: "\(name) could not be reached to check the credential; try again shortly.",
                extensions: extensions, headers: ["Retry-After": String(Self.retryAfterSeconds)])
        case .invalidRequest:
            if let pointer { extensions["pointer"] = .string(pointer) }
            return Problem.badRequest(detail: detail, extensions: extensions)
        }
    }

    /// What a surface that words its own errors (Parse, Firebase) tells the client beside its code: the sentence
    /// the error was given for clients, or else /v1's problem detail; never ``detail``, which is for logs.
    var clientSentence: String {
        clientDetail ?? problem.detail ?? problem.title
    }

    private static func displayName(_ provider: String) -> String {
        switch provider {
        case "apple": "Apple"
        case "facebook": "Facebook"
        case "google": "Google"
        case "password": "Password"
        default: provider
        }
    }
}

/// A message that could not be sent is the server's trouble, never the client's: 503 with `Retry-After`.
extension WebhookDeliveryError: ProblemConvertible {
    /// 503 `sms_unavailable` or `mail_unavailable` with `Retry-After`.
    public var problem: Problem {
        channel.unavailable(
            channel == .sms ? "The text message could not be sent; try again shortly." : "The mail could not be sent; try again shortly.",
            retryAfterSeconds: retryAfterSeconds)
    }
}

extension WebhookDeliveryError.Channel {
    /// 503 `sms_unavailable` or `mail_unavailable`: a message of this channel could not be sent (or this
    /// server has no sender for it), with `detail` and `Retry-After`.
    func unavailable(_ detail: String, retryAfterSeconds: Int = 30) -> Problem {
        Problem(
            status: 503, code: "\(rawValue)_unavailable", title: self == .sms ? "SMS unavailable" : "Mail unavailable", detail: detail,
            headers: ["Retry-After": String(retryAfterSeconds)])
    }
}
