import TetherCrypto

/// Why a message could not be handed to a webhook (SMS or mail), after every attempt.
///
/// Whatever the cause, clients get one answer: 503 `sms_unavailable` or
/// `mail_unavailable` with `Retry-After`, never an error that would blame the
/// code, the phone number or the address. The reason and detail (status codes,
/// attempts) are for logs.
public struct WebhookDeliveryError: ReasonCodedError {
    private enum Kind: String, Sendable {
        /// No HTTP answer: connection refused, TLS, timeout.
        case unreachable
        /// The receiver kept failing (5xx, 429, 408) until the attempts ran out.
        case receiverFailed = "receiver_failed"
        /// The receiver refused the message (another 4xx, or a redirect); retrying would not help.
        case rejected
    }

    /// What the webhook carries: `sms` or `mail`, which names the clients' error.
    public enum Channel: String, Sendable {
        case sms
        case mail
    }

    private let kind: Kind
    public let channel: Channel
    /// Status codes, attempts and causes, for logs; may name the webhook's host, so it never reaches clients.
    public let detail: String
    /// How long clients are told to wait (`Retry-After`, seconds).
    public let retryAfterSeconds: Int

    private init(_ kind: Kind, channel: Channel = .sms, detail: String = "", retryAfterSeconds: Int = Self.defaultRetryAfterSeconds) {
        self.kind = kind
        self.channel = channel
        self.detail = detail
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// `Retry-After` when the receiver named no longer wait.
    public static let defaultRetryAfterSeconds = 10

    /// No HTTP answer arrived.
    public static let unreachable = WebhookDeliveryError(.unreachable)
    /// The receiver answered with server errors (or asked to slow down) on every attempt.
    public static let receiverFailed = WebhookDeliveryError(.receiverFailed)
    /// The receiver refused the message.
    public static let rejected = WebhookDeliveryError(.rejected)

    /// The stable reason for logs: `unreachable`, `receiver_failed` or `rejected`.
    public var reason: String { kind.rawValue }

    /// The same error with `detail` attached.
    public func with(detail: String) -> WebhookDeliveryError {
        WebhookDeliveryError(kind, channel: channel, detail: detail, retryAfterSeconds: retryAfterSeconds)
    }

    /// The same error, about a message of `channel`.
    public func on(_ channel: Channel) -> WebhookDeliveryError {
        WebhookDeliveryError(kind, channel: channel, detail: detail, retryAfterSeconds: retryAfterSeconds)
    }

    /// The same error telling clients to wait `seconds` (at least 1).
    public func with(retryAfterSeconds seconds: Int) -> WebhookDeliveryError {
        WebhookDeliveryError(kind, channel: channel, detail: detail, retryAfterSeconds: max(1, seconds))
    }
}
