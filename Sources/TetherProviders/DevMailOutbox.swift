import Foundation
import TetherCore
import TetherJOSE

/// The mail sender of `tether dev` and the tests: it keeps mails instead of sending them.
///
/// `GET /dev-idp/mail` lists them, so a developer or a test can follow a
/// reset or verification link; the Firebase surface lists their codes at
/// `GET /emulator/v1/projects/{project}/oobCodes`, as the Auth Emulator does.
/// Links an admin generated without a mail (Firebase's `returnOobLink`) are
/// kept too, marked `mailed: false`. Only the most recent ``capacity`` are kept.
public final class DevMailOutbox: MailSender {
    /// A mail as the outbox keeps it.
    public struct Entry: Sendable, Hashable, Codable {
        public var to: String
        public var template: MailMessage.Template
        public var locale: String
        public var link: String
        public var code: String
        public var expiresAt: Date
        /// False for a link handed to an admin instead of mailed.
        public var mailed: Bool
        /// When it was "sent".
        public var sentAt: Date
    }

    public var capacity: Int { entries.capacity }
    private let clock: any WallClock
    private let entries: RecentEntries<Entry>

    /// An empty outbox stamping mails with `clock`'s time.
    public init(capacity: Int = 1000, clock: any WallClock = SystemWallClock()) {
        self.entries = RecentEntries(capacity: capacity)
        self.clock = clock
    }

    /// Keeps `mail`.
    public func send(_ mail: MailMessage) async throws {
        keep(mail, mailed: true)
    }

    /// Keeps a link an admin was given instead of a mail.
    public func keep(_ mail: MailMessage, mailed: Bool) {
        entries.append(Entry(
            to: mail.to, template: mail.template, locale: mail.locale, link: mail.link, code: mail.code, expiresAt: mail.expiresAt,
            mailed: mailed, sentAt: clock.now()))
    }

    /// The kept mails and links, oldest first; only those to `address` when given (compared without case).
    public func mails(to address: String? = nil) -> [Entry] {
        entries.all { address == nil || $0.to.lowercased() == address?.lowercased() }
    }

    /// Forgets every mail.
    public func removeAll() {
        entries.removeAll()
    }
}
