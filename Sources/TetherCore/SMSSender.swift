import Foundation

/// Sends text messages (one-time codes for phone MFA).
///
/// Production posts to the configured webhook; `tether dev` and tests keep the
/// messages in an outbox that `GET /dev-idp/sms` shows.
public protocol SMSSender: Sendable {
    /// Sends `message`; throws when it could not be handed over for delivery.
    func send(_ message: SMSMessage) async throws
}

/// One text message to a phone number.
public struct SMSMessage: Sendable, Hashable, Codable {
    /// The recipient in E.164 form (`+15555550100`).
    public var phoneNumber: String
    /// The text as the recipient reads it.
    public var body: String
    /// The one-time code the message carries, if any, so that dev tools can show it without parsing `body`.
    public var code: String?

    /// Describes a message.
    public init(phoneNumber: String, body: String, code: String? = nil) {
        self.phoneNumber = phoneNumber
        self.body = body
        self.code = code
    }
}
