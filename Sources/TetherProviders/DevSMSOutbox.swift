import Foundation
import TetherCore
import TetherJOSE

/// The SMS sender of `tether dev` and the tests: it keeps messages instead of sending them.
///
/// `GET /dev-idp/sms` lists them, so a developer or a test can read the
/// one-time code a phone MFA challenge sent. Only the most recent
/// ``capacity`` messages are kept.
public final class DevSMSOutbox: SMSSender {
    /// A message as the outbox keeps it.
    public struct Entry: Sendable, Hashable, Codable {
        /// The recipient.
        public var phoneNumber: String
        /// The text.
        public var body: String
        /// The one-time code, when the sender named it.
        public var code: String?
        /// When it was "sent".
        public var sentAt: Date
    }

    /// How many messages are kept; older ones are dropped.
    public var capacity: Int { entries.capacity }
    private let clock: any WallClock
    private let entries: RecentEntries<Entry>

    /// An empty outbox stamping messages with `clock`'s time.
    public init(capacity: Int = 1000, clock: any WallClock = SystemWallClock()) {
        self.entries = RecentEntries(capacity: capacity)
        self.clock = clock
    }

    /// Keeps `message`.
    public func send(_ message: SMSMessage) async throws {
        entries.append(Entry(phoneNumber: message.phoneNumber, body: message.body, code: message.code, sentAt: clock.now()))
    }

    /// The kept messages, oldest first; only those to `phoneNumber` when given.
    public func messages(to phoneNumber: String? = nil) -> [Entry] {
        entries.all { phoneNumber == nil || $0.phoneNumber == phoneNumber }
    }

    /// Forgets every message.
    public func removeAll() {
        entries.removeAll()
    }
}
