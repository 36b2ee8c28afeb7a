import Foundation

/// Sends mails carrying single-use codes (password reset, email verification, email change).
///
/// Production posts to the configured mail webhook, which renders and delivers them;
/// `tether dev` and tests keep them in an outbox that `GET /dev-idp/mail` shows.
public protocol MailSender: Sendable {
    /// Sends `mail`; throws when it could not be handed over for delivery.
    func send(_ mail: MailMessage) async throws
}

/// One mail, as the mail webhook receives it: what to send, to whom, and the code and link it carries.
public struct MailMessage: Sendable, Hashable, Codable {
    /// Which mail: `password_reset`, `verify_email`, `change_email` (to the new address) or
    /// `email_changed` (the notice to the old address, with its undo link).
    public enum Template: String, Sendable, Hashable, Codable, CaseIterable {
        case passwordReset = "password_reset"
        case verifyEmail = "verify_email"
        case changeEmail = "change_email"
        case emailChanged = "email_changed"

        /// The mail that carries a code of `purpose`.
        public init(for purpose: EmailCodePurpose) {
            switch purpose {
            case .passwordReset: self = .passwordReset
            case .verifyEmail: self = .verifyEmail
            case .changeEmail: self = .changeEmail
            case .undoEmailChange: self = .emailChanged
            }
        }

        /// The purpose of the code the mail carries.
        public var purpose: EmailCodePurpose {
            switch self {
            case .passwordReset: .passwordReset
            case .verifyEmail: .verifyEmail
            case .changeEmail: .changeEmail
            case .emailChanged: .undoEmailChange
            }
        }
    }

    /// The recipient's address.
    public var to: String
    public var template: Template
    /// The language to write it in (a BCP 47 tag, `en` unless the client asked for another).
    public var locale: String
    /// The page that uses the code (it starts with `TETHER_PUBLIC_URL`).
    public var link: String
    /// The code itself, for mails that show it beside the link.
    public var code: String
    public var expiresAt: Date

    public init(to: String, template: Template, locale: String, link: String, code: String, expiresAt: Date) {
        self.to = to
        self.template = template
        self.locale = locale
        self.link = link
        self.code = code
        self.expiresAt = expiresAt
    }
}
