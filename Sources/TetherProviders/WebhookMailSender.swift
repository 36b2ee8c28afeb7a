import Foundation
import TetherCore
import TetherJOSE

/// The production mail sender: POSTs each mail as signed JSON to a webhook that renders and delivers it.
///
/// The body is `{"code", "expiresAt", "link", "locale", "template", "to"}` (sorted keys; `expiresAt`
/// in ISO 8601 with milliseconds), signed and retried as ``SignedWebhook`` describes, the way SMS
/// messages are. When the mail cannot be handed over, ``send(_:)`` throws ``WebhookDeliveryError``
/// (channel `mail`), which clients see as 503 `mail_unavailable` where an answer may say so.
public struct WebhookMailSender: MailSender {
    public typealias Configuration = SignedWebhook.Configuration

    let webhook: SignedWebhook
    public var configuration: Configuration { webhook.configuration }

    /// A sender posting through `httpClient`, stamping signatures with `clock`'s time.
    public init(
        configuration: Configuration, httpClient: any ProviderHTTPClient = CurlProviderHTTPClient(),
        clock: any WallClock = SystemWallClock()
    ) {
        webhook = SignedWebhook(configuration: configuration, channel: .mail, httpClient: httpClient, clock: clock)
    }

    /// Posts `mail` to the webhook, retrying what may pass later.
    public func send(_ mail: MailMessage) async throws {
        try await webhook.post(Self.body(for: mail))
    }

    /// The webhook's JSON body for `mail`.
    static func body(for mail: MailMessage) -> [UInt8] {
        SignedWebhook.body([
            "to": mail.to, "template": mail.template.rawValue, "locale": mail.locale, "link": mail.link, "code": mail.code,
            "expiresAt": ISO8601Milliseconds.format(mail.expiresAt),
        ])
    }
}
