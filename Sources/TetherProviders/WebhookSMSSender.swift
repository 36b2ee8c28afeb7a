import Foundation
import TetherCore
import TetherJOSE

/// The production SMS sender: POSTs each message as signed JSON to a webhook that delivers it.
///
/// The request body is `{"body": "…", "to": "+15555550100"}`, signed and retried as
/// ``SignedWebhook`` describes. When the message cannot be handed over,
/// ``send(_:)`` throws ``WebhookDeliveryError``, which clients see as 503
/// `sms_unavailable`.
public struct WebhookSMSSender: SMSSender {
    public typealias Configuration = SignedWebhook.Configuration

    let webhook: SignedWebhook
    public var configuration: Configuration { webhook.configuration }

    /// A sender posting through `httpClient`, stamping signatures with `clock`'s time.
    public init(
        configuration: Configuration, httpClient: any ProviderHTTPClient = CurlProviderHTTPClient(),
        clock: any WallClock = SystemWallClock()
    ) {
        webhook = SignedWebhook(configuration: configuration, channel: .sms, httpClient: httpClient, clock: clock)
    }

    /// Posts `message` to the webhook, retrying what may pass later.
    ///
    /// - Throws: ``WebhookDeliveryError`` when no attempt got a 2xx answer.
    public func send(_ message: SMSMessage) async throws {
        try await webhook.post(SignedWebhook.body(["to": message.phoneNumber, "body": message.body]))
    }
}
