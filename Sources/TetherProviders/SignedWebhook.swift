import Foundation
import TetherCore
import TetherCrypto
import TetherJOSE

/// Posts JSON bodies to a webhook, signed and retried: what the SMS and mail senders share.
///
/// Each request carries `Content-Type: application/json` and two headers:
/// - `X-Tether-Signature: t=<unix seconds>,v1=<hex>` where `<hex>` is
///   HMAC-SHA256 with the shared secret over `"<t>." + body` (the exact bytes
///   sent). Receivers recompute it, compare in constant time, and refuse a `t`
///   far from their clock, which stops replays of a captured request.
/// - `Idempotency-Key`: one id per message, the same on every attempt, so a
///   receiver can drop the duplicate a retry after a lost answer would cause.
///
/// A 2xx answer means the message was handed over. Network errors, timeouts,
/// 5xx, 429 and 408 are retried with exponential backoff (0.2 s, 0.4 s, … by
/// default), or after the receiver's `Retry-After` when that is short enough;
/// other answers are not retried.
public struct SignedWebhook: Sendable {
    /// Where and how messages are posted.
    public struct Configuration: Sendable {
        /// The webhook's URL (`TETHER_SMS_WEBHOOK_URL`, `TETHER_MAIL_WEBHOOK_URL`).
        public var url: URL
        /// The HMAC key of the signature (`TETHER_SMS_WEBHOOK_SECRET`, `TETHER_MAIL_WEBHOOK_SECRET`).
        public var secret: String
        /// Seconds one attempt may take, answer included.
        public var timeout: TimeInterval = 5
        /// Attempts per message, the first included.
        public var maxAttempts = 3
        /// The wait before the second attempt; it doubles for each further one.
        public var initialBackoff: Duration = .milliseconds(200)
        /// The longest `Retry-After` waited for; a receiver asking for more ends the attempts at once.
        public var longestRetryAfter: Duration = .seconds(2)

        /// Posts to `url`, signing with `secret`, with the default timeout, attempts and backoff.
        public init(url: URL, secret: String) {
            self.url = url
            self.secret = secret
        }
    }

    /// The header carrying the signature.
    public static let signatureHeader = "X-Tether-Signature"
    /// Answers are read only to be discarded; anything larger is a misbehaving receiver.
    static let maximumAnswerBytes = 64 * 1024

    public let configuration: Configuration
    let channel: WebhookDeliveryError.Channel
    private let httpClient: any ProviderHTTPClient
    private let clock: any WallClock

    /// A webhook of `channel` posted through `httpClient`, stamping signatures with `clock`'s time.
    public init(
        configuration: Configuration, channel: WebhookDeliveryError.Channel, httpClient: any ProviderHTTPClient = CurlProviderHTTPClient(),
        clock: any WallClock = SystemWallClock()
    ) {
        self.configuration = configuration
        self.channel = channel
        self.httpClient = httpClient
        self.clock = clock
    }

    /// Posts `body`, retrying what may pass later.
    ///
    /// - Throws: ``WebhookDeliveryError`` (of this webhook's channel) when no attempt got a 2xx answer.
    public func post(_ body: [UInt8]) async throws {
        let idempotencyKey = UUID.random().lowercasedText
        var backoff = configuration.initialBackoff
        var attempt = 1
        while true {
            let failure: WebhookDeliveryError, retryAfter: Duration?
            do {
                let timestamp = Int(clock.now().timeIntervalSince1970)
                let answer = try await httpClient.post(
                    url: configuration.url,
                    headers: [
                        "Content-Type": "application/json", "Idempotency-Key": idempotencyKey,
                        Self.signatureHeader: Self.signature(of: body, secret: configuration.secret, timestamp: timestamp),
                    ],
                    body: body, timeout: configuration.timeout, maxBytes: Self.maximumAnswerBytes)
                if (200..<300).contains(answer.status) { return }
                retryAfter = answer.headers["retry-after"].flatMap { Self.parseRetryAfter($0, now: clock.now()) }
                failure = [408, 429].contains(answer.status) || answer.status >= 500
                    ? WebhookDeliveryError.receiverFailed.with(detail: "the webhook answered \(answer.status)")
                    : WebhookDeliveryError.rejected.with(detail: "the webhook answered \(answer.status); not retried")
            } catch {
                retryAfter = nil
                failure = WebhookDeliveryError.unreachable.with(detail: String(describing: error))
            }
            let attempts = "after \(attempt) attempt\(attempt == 1 ? "" : "s")"
            var final = failure.on(channel).with(detail: "\(failure.detail) \(attempts)")
            if let retryAfter { final = final.with(retryAfterSeconds: Int(retryAfter.components.seconds)) }
            guard failure != .rejected, attempt < configuration.maxAttempts else { throw final }
            if let retryAfter, retryAfter > configuration.longestRetryAfter { throw final }
            do {
                try await Task.sleep(for: max(backoff, retryAfter ?? .zero))
            } catch {
                throw final.with(detail: "\(final.detail); cancelled while waiting to retry")
            }
            backoff *= 2
            attempt += 1
        }
    }

    /// The JSON body of string members, with sorted keys, as the senders post it.
    static func body(_ members: [String: String]) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings always encode.
        return Array(try! encoder.encode(members))
    }

    /// The `X-Tether-Signature` value: `t=<timestamp>,v1=<hex HMAC-SHA256(secret, "<timestamp>." + body)>`.
    public static func signature(of body: [UInt8], secret: String, timestamp: Int) -> String {
        let signed = Array("\(timestamp).".utf8) + body
        let code = HMAC.authenticationCode(for: signed, key: Array(secret.utf8), digest: .sha256)
        return "t=\(timestamp),v1=\(code.hexString)"
    }

    /// `Retry-After` as delay-seconds or an HTTP date; nil when it is neither.
    static func parseRetryAfter(_ value: String, now: Date) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(text), seconds >= 0 { return .seconds(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: text) else { return nil }
        return .seconds(max(0, Int(date.timeIntervalSince(now).rounded(.up))))
    }
}
