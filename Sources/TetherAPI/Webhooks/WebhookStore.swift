import Foundation
import TetherCore
import TetherPostgres

/// A webhook subscription as its row holds it (the secrets are read only to sign).
public struct WebhookSubscription: Sendable {
    public enum Status: String, Sendable {
        case active
        /// Turned off by an admin, or by the receiver's 410.
        case disabled
        /// Deliveries failed for longer than the retry period; an admin enables it again.
        case failing
    }

    public var id: UUID
    public var url: String
    public var eventTypes: [String]
    public var personal: Bool
    public var status: Status
    public var statusReason: String?
    public var cursor: EventFeed.Cursor
    public var attempts: Int
    public var failingSince: Date?
    public var nextAttemptAt: Date
    public var createdAt: Date
    var secret: String
    var previousSecret: String?
    var previousSecretUntil: Date?

    /// The secrets that sign now: the current one, and the previous one during a rotation's overlap.
    public func signingSecrets(at now: Date) -> [String] {
        [secret] + (previousSecret.flatMap { secret in previousSecretUntil.map { $0 > now ? secret : nil } ?? nil }.map { [$0] } ?? [])
    }

    /// The subscription as the admin API and `tether webhooks list` show it (never its secrets).
    public var json: JSONValue {
        var body: [String: JSONValue] = [
            "id": .string(id.lowercasedText), "url": .string(url), "events": .array(eventTypes.map(JSONValue.string)),
            "personal": .bool(personal), "status": .string(status.rawValue), "cursor": .string(cursor.description),
            "attempts": .int(attempts), "nextAttemptAt": .string(ISO8601Milliseconds.format(nextAttemptAt)),
            "createdAt": .string(ISO8601Milliseconds.format(createdAt)),
        ]
        body["statusReason"] = statusReason.map(JSONValue.string) ?? .null
        body["failingSince"] = failingSince.map { .string(ISO8601Milliseconds.format($0)) } ?? .null
        body["previousSecretUntil"] = previousSecretUntil.map { .string(ISO8601Milliseconds.format($0)) } ?? .null
        return .object(body)
    }
}

/// One delivery attempt, as recorded.
public struct WebhookDeliveryRecord: Sendable {
    public var eventId: String
    public var eventType: String
    public var attempt: Int
    public var status: Int?
    public var durationMilliseconds: Double
    public var error: String?
    public var attemptedAt: Date

    public var json: JSONValue {
        [
            "eventId": .string(eventId), "eventType": .string(eventType), "attempt": .int(attempt),
            "status": status.map(JSONValue.int) ?? .null, "durationMs": .double(durationMilliseconds),
            "error": error.map(JSONValue.string) ?? .null, "attemptedAt": .string(ISO8601Milliseconds.format(attemptedAt)),
        ]
    }
}

/// The webhook subscriptions and their deliveries (`webhook_subscriptions`, `webhook_deliveries`).
public struct WebhookStore: Sendable {
    /// Where a new subscription starts reading the log.
    public enum Start: Sendable {
        /// After everything already committed.
        case now
        /// From the first event.
        case start
        case cursor(EventFeed.Cursor)

        /// `now`, `start` or a cursor; nil for anything else.
        public init?(parsing text: String) {
            switch text {
            case "now": self = .now
            case "start", "0": self = .start
            default:
                guard let cursor = EventFeed.Cursor(parsing: text) else { return nil }
                self = .cursor(cursor)
            }
        }
    }

    /// A request the store refuses, in words for the admin.
    public struct Refusal: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// The longest target URL a subscription takes.
    public static let maxURLLength = 2048

    /// How long the old secret still signs after a rotation.
    public static let rotationOverlap: TimeInterval = 24 * 60 * 60

    let database: PostgresClient
    let store: PostgresEventStore
    let policy: WebhookTargetPolicy

    public init(database: PostgresClient, policy: WebhookTargetPolicy) {
        self.database = database
        self.store = PostgresEventStore(client: database, upcasters: AccountEventCodec.upcasters)
        self.policy = policy
    }

    /// A new active subscription, and its secret (shown this once).
    public func create(url: String, eventTypes: [String], personal: Bool = true, from start: Start = .now) async throws
        -> (subscription: WebhookSubscription, secret: String)
    {
        guard url.count <= Self.maxURLLength else {
            throw Refusal(description: "the url is longer than \(Self.maxURLLength) characters")
        }
        let checked: URL
        do { checked = try await policy.check(url).url } catch { throw Refusal(description: error.description) }
        // An empty list is no choice (absent, the callers ask for every event): it is refused, not read as all.
        guard !eventTypes.isEmpty else {
            throw Refusal(description: "events names no event type: name some, or * (or leave it out) for all of them.")
        }
        guard EventFeed.internalTypes(for: eventTypes) != nil else {
            throw Refusal(description: "events take a comma list of \(PublicEvent.types.joined(separator: ", ")), or prefixes such as user.*")
        }
        // Each type once, in the order given.
        var seen = Set<String>()
        let eventTypes = eventTypes.filter { seen.insert($0).inserted }
        let cursor: LogCheckpoint = switch start {
        case .now: try await store.followingCheckpoint()
        case .start: .start
        case .cursor(let cursor): try await reached(cursor).checkpoint
        }
        let id = UUID.random()
        let secret = WebhookSignature.newSecret()
        let stored = try database.configuration.masterKeys.wrapText(secret, context: Self.wrappingContext(id))
        try await database.query("""
            INSERT INTO webhook_subscriptions (id, url, event_types, personal, secret, cursor_tx, cursor_position)
            VALUES (\(id), \(checked.absoluteString), \(PostgresArray(eventTypes))::text[], \(personal), \(stored),
                    \(cursor.transactionId)::xid8, \(cursor.position))
            """)
        guard let made = try await subscription(id) else { throw Refusal(description: "the subscription was not stored") }
        return (made, secret)
    }

    public func list() async throws -> [WebhookSubscription] {
        try await database.query("SELECT \(unsafeSQL: Self.columns) FROM webhook_subscriptions ORDER BY created_at, id").map(decode)
    }

    public func subscription(_ id: UUID) async throws -> WebhookSubscription? {
        try await database.query("SELECT \(unsafeSQL: Self.columns) FROM webhook_subscriptions WHERE id = \(id)").first.map(decode)
    }

    /// Turns a subscription on (from where it stopped, its failures forgotten) or off.
    @discardableResult
    public func setEnabled(_ enabled: Bool, _ id: UUID, reason: String? = nil) async throws -> WebhookSubscription? {
        let rows = try await database.query(enabled ? """
            UPDATE webhook_subscriptions SET status = 'active', status_reason = NULL, attempts = 0, failing_since = NULL,
                next_attempt_at = now(), lease_owner = NULL, lease_until = NULL, updated_at = now()
            WHERE id = \(id) RETURNING \(unsafeSQL: Self.columns)
            """ : """
            UPDATE webhook_subscriptions SET status = 'disabled', status_reason = \(reason ?? "disabled by an admin"),
                lease_owner = NULL, lease_until = NULL, updated_at = now()
            WHERE id = \(id) RETURNING \(unsafeSQL: Self.columns)
            """)
        return try rows.first.map(decode)
    }

    public func delete(_ id: UUID) async throws -> Bool {
        !(try await database.query("DELETE FROM webhook_subscriptions WHERE id = \(id) RETURNING id")).isEmpty
    }

    /// A new secret; the old one keeps signing for ``rotationOverlap``. Nil for no such subscription.
    public func rotateSecret(_ id: UUID) async throws -> (secret: String, subscription: WebhookSubscription)? {
        let secret = WebhookSignature.newSecret()
        let stored = try database.configuration.masterKeys.wrapText(secret, context: Self.wrappingContext(id))
        // The subscription as the rotation left it, in the same statement: the secret is shown once, so nothing
        // that could fail may come between its change and its answer.
        let rows = try await database.query("""
            UPDATE webhook_subscriptions SET previous_secret = secret, secret = \(stored),
                previous_secret_until = now() + make_interval(secs => \(Int(Self.rotationOverlap))), updated_at = now()
            WHERE id = \(id) RETURNING \(unsafeSQL: Self.columns)
            """)
        return try rows.first.map { (secret, try decode($0)) }
    }

    /// Delivers again from `cursor` (the events after it), now, whatever failed before: a failing subscription is
    /// active again, and a delivery in flight loses its lease, so it cannot move the cursor back over the replay.
    /// A disabled one (by an admin, or by its receiver's 410) stays disabled, its cursor moved: `enable` starts it.
    @discardableResult
    public func replay(_ id: UUID, from cursor: EventFeed.Cursor) async throws -> WebhookSubscription? {
        // An unknown subscription is nil (404) whatever the cursor.
        guard try await subscription(id) != nil else { return nil }
        _ = try await reached(cursor)
        let rows = try await database.query("""
            UPDATE webhook_subscriptions SET cursor_tx = \(cursor.checkpoint.transactionId)::xid8,
                cursor_position = \(cursor.checkpoint.position), attempts = 0, failing_since = NULL, next_attempt_at = now(),
                status = CASE WHEN status = 'disabled' THEN 'disabled' ELSE 'active' END,
                status_reason = CASE WHEN status = 'disabled' THEN status_reason END,
                lease_owner = NULL, lease_until = NULL, updated_at = now()
            WHERE id = \(id) RETURNING \(unsafeSQL: Self.columns)
            """)
        return try rows.first.map(decode)
    }

    /// `cursor`, once the log is known to reach it; a ``Refusal`` otherwise.
    private func reached(_ cursor: EventFeed.Cursor) async throws -> EventFeed.Cursor {
        guard try await store.reaches(cursor.checkpoint) else { throw Refusal(description: "from \(EventFeed.Cursor.pastTheLog)") }
        return cursor
    }

    /// The latest attempts, newest first.
    public func deliveries(_ id: UUID, limit: Int = 100) async throws -> [WebhookDeliveryRecord] {
        try await database.query("""
            SELECT event_id, event_type, attempt, status, duration_ms, error, attempted_at FROM webhook_deliveries
            WHERE subscription_id = \(id) ORDER BY id DESC LIMIT \(limit)
            """).map { row in
            WebhookDeliveryRecord(
                eventId: try row.decode("event_id"), eventType: try row.decode("event_type"), attempt: try row.decode("attempt"),
                status: try row.decode("status"), durationMilliseconds: try row.decode("duration_ms"), error: try row.decode("error"),
                attemptedAt: try row.decode("attempted_at"))
        }
    }

    static let columns = """
        id, url, to_json(event_types)::text AS event_types, personal, status, status_reason, cursor_tx, cursor_position, attempts, failing_since, next_attempt_at,
        created_at, secret, previous_secret, previous_secret_until
        """

    /// What wrapped secrets of a subscription are bound to: its row.
    static func wrappingContext(_ id: UUID) -> String { "webhook_subscriptions:" + id.lowercasedText }

    func decode(_ row: PostgresRow) throws -> WebhookSubscription {
        let id: UUID = try row.decode("id")
        let ring = database.configuration.masterKeys
        let open = { (stored: String?) throws -> String? in try stored.map { try ring.unwrapText($0, context: Self.wrappingContext(id)) } }
        return WebhookSubscription(
            id: try row.decode("id"), url: try row.decode("url"), eventTypes: try JSONDecoder().decode([String].self, from: Data(try row.decode("event_types", as: String.self).utf8)),
            personal: try row.decode("personal"), status: WebhookSubscription.Status(rawValue: try row.decode("status")) ?? .disabled,
            statusReason: try row.decode("status_reason"),
            cursor: EventFeed.Cursor(LogCheckpoint(transactionId: try row.decode("cursor_tx"), position: try row.decode("cursor_position"))),
            attempts: try row.decode("attempts"), failingSince: try row.decode("failing_since"), nextAttemptAt: try row.decode("next_attempt_at"),
            createdAt: try row.decode("created_at"), secret: try open(try row.decode("secret")) ?? "",
            previousSecret: try open(try row.decode("previous_secret")),
            previousSecretUntil: try row.decode("previous_secret_until"))
    }
}

/// `tether webhooks list`'s table.
public enum WebhookTable {
    public static func render(_ subscriptions: [WebhookSubscription]) -> String {
        guard !subscriptions.isEmpty else { return "no webhook subscriptions\n" }
        return TextTable.render(columns: ["ID", "STATUS", "EVENTS", "CURSOR", "ATTEMPTS", "URL"], rows: subscriptions.map { subscription in
            [subscription.id.lowercasedText, subscription.status.rawValue, subscription.eventTypes.joined(separator: ","),
             subscription.cursor.description, String(subscription.attempts), subscription.url]
        })
    }
}
