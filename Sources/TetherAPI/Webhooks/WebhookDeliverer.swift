import Foundation
import Synchronization
import TetherCore
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders

/// Delivers webhook subscriptions, off the command path: a few loops per Tether instance (``Configuration/workers``)
/// each take a lease on one due subscription at a time, read the log after its cursor through the ``EventFeed``,
/// and post each matching public event, signed (``WebhookSignature``), in log order. A subscription is due when
/// the log holds events past its cursor; one loop's turn on it ends after ``Configuration/turn``, so a slow
/// receiver holds up neither the other loops nor, for long, the subscriptions behind it in its own.
///
/// The cursor moves past an event only after a 2xx answer, and only forward, in the same statement that
/// checks the lease is still the loop's (each loop leases under a name of its own): a restart repeats at
/// most the event in flight, and two loops, of one instance or two, never deliver one subscription at once.
/// A failure is retried with exponential backoff and jitter;
/// after ``Configuration/failAfter`` of failures the subscription is marked `failing` and waits for an
/// admin. A 410 answer disables it. Every attempt is recorded in `webhook_deliveries`.
public final class WebhookDeliverer: Sendable {
    public struct Configuration: Sendable {
        /// How often an idle instance looks for due subscriptions.
        public var pollInterval: Duration = .seconds(1)
        /// How long a lease lasts; renewed before every event.
        public var leaseSeconds = 30
        /// Seconds an attempt may take, answer included.
        public var timeout: TimeInterval = 10
        /// The wait after the first failure; it doubles with each further one, up to ``maximumBackoff``.
        public var initialBackoff: TimeInterval = 5
        public var maximumBackoff: TimeInterval = 60 * 60
        /// How long an event may keep failing before the subscription is marked `failing`.
        public var failAfter: TimeInterval = 3 * 24 * 60 * 60
        /// Events read per page.
        public var batch = 50
        /// Loops delivering side by side in each instance: a receiver that answers slowly holds up one.
        public var workers = 4
        /// How long one loop keeps delivering to one subscription before it lets the others due go first.
        public var turn: Duration = .seconds(2)

        public init() {}
    }

    let webhooks: WebhookStore
    let feed: EventFeed
    let configuration: Configuration
    let httpClient: any ProviderHTTPClient
    let logger: Logger
    let deliveries: Counter
    /// Each loop's name in leases: a loop whose lease ran out (a stalled attempt) can no longer move a cursor or
    /// give back a lease another loop of this instance has taken since.
    let owners: [UUID]
    private let loops: [BackgroundLoop]

    public init(
        webhooks: WebhookStore, configuration: Configuration = Configuration(), httpClient: any ProviderHTTPClient = CurlProviderHTTPClient(),
        metrics: MetricsRegistry, logger: Logger
    ) {
        self.webhooks = webhooks
        self.feed = EventFeed(store: webhooks.store, pollInterval: configuration.pollInterval)
        self.configuration = configuration
        self.loops = (0..<max(1, configuration.workers)).map { _ in BackgroundLoop() }
        self.owners = loops.map { _ in UUID.random() }
        self.httpClient = httpClient
        self.logger = logger
        self.deliveries = metrics.counter(
            "tether_webhook_deliveries_total", help: "Webhook delivery attempts, by result: 2xx, 3xx (a redirect, not followed), 4xx, 5xx, 410 or error.",
            labels: ["result"])
    }

    /// Starts the loops (once).
    public func start() {
        for (loop, owner) in zip(loops, owners) {
            loop.start(idle: configuration.pollInterval, logger: logger, name: "webhook delivery loop") { [self] in try await deliverOnce(as: owner) }
        }
    }

    /// Stops the loops after the attempts in flight, and gives this instance's leases back.
    public func stop() async {
        await withTaskGroup(of: Void.self) { group in
            for loop in loops { group.addTask { await loop.stop() } }
        }
        _ = try? await webhooks.database.query("UPDATE webhook_subscriptions SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ANY(\(PostgresArray(owners))::uuid[])")
    }

    /// Takes one due subscription and delivers what it can; answers whether it found one to work on (then
    /// another may be due at once: each moves its own next attempt on, so none is taken twice in a row).
    func deliverOnce(as owner: UUID) async throws -> Bool {
        guard let subscription = try await claim(as: owner) else { return false }
        do {
            try await deliver(subscription, as: owner)
            try await release(subscription.id, owner)
            return true
        } catch {
            // Something failed before any answer (the log could not be read, an event not decoded): the
            // subscription waits like after a failed attempt, so it does not hold the others up.
            if !(error is CancellationError) {
                _ = try? await webhooks.database.query("""
                    UPDATE webhook_subscriptions SET next_attempt_at = now() + make_interval(secs => \(configuration.initialBackoff * 4)),
                        failing_since = coalesce(failing_since, now()), updated_at = now()
                    WHERE id = \(subscription.id) AND lease_owner = \(owner)
                    """)
            }
            try? await release(subscription.id, owner)
            throw error
        }
    }

    /// Delivers the leased `subscription`'s next page of events, in order, until one fails or its turn is over.
    private func deliver(_ subscription: WebhookSubscription, as owner: UUID) async throws {
        guard let types = EventFeed.internalTypes(for: subscription.eventTypes) else {
            // A stored type this build does not know: delivering nothing would skip its events for good.
            try await webhooks.database.query("""
                UPDATE webhook_subscriptions SET status = 'failing', status_reason = \("its event types are not all known to this server"),
                    updated_at = now()
                WHERE id = \(subscription.id) AND lease_owner = \(owner)
                """)
            return
        }
        var attempts = subscription.attempts
        let page = try await feed.page(
            after: subscription.cursor, types: types, userId: nil, limit: configuration.batch, personal: subscription.personal)
        // The turn starts once the page is read, and takes at least one event: a slow read must not end it empty.
        let turnEnds = ContinuousClock.now.advanced(by: configuration.turn)
        for (index, item) in page.items.enumerated() {
            try Task.checkCancellation()
            if index > 0, ContinuousClock.now >= turnEnds {
                // Behind the others already due: their next attempts are older than now.
                try await webhooks.database.query(
                    "UPDATE webhook_subscriptions SET next_attempt_at = now() WHERE id = \(subscription.id) AND lease_owner = \(owner)")
                return
            }
            guard try await renewLease(subscription.id, owner) else { return }
            guard try await deliver(item, of: subscription, as: owner, attempts: &attempts) else { return }
        }
        // Every event of the page went: the cursor moves on past what the page looked at (events no one subscribed to).
        try await webhooks.database.query("""
            UPDATE webhook_subscriptions SET cursor_tx = \(page.next.checkpoint.transactionId)::xid8, cursor_position = \(page.next.checkpoint.position),
                next_attempt_at = now() + make_interval(secs => \(page.items.isEmpty ? Self.seconds(configuration.pollInterval) : 0)), updated_at = now()
            WHERE id = \(subscription.id) AND lease_owner = \(owner) AND lease_until > now()
              AND (cursor_tx, cursor_position) <= (\(page.next.checkpoint.transactionId)::xid8, \(page.next.checkpoint.position))
            """)
    }

    /// Posts one event; answers whether the next may follow (a 2xx).
    private func deliver(
        _ item: EventFeed.Page.Item, of subscription: WebhookSubscription, as owner: UUID, attempts: inout Int
    ) async throws -> Bool {
        guard case .object(let event) = item.json, case .string(let id)? = event["id"], case .string(let type)? = event["type"] else { return true }
        let body = try item.json.jsonBytes()
        let now = Date()
        let started = ContinuousClock.now
        var status: Int?
        var failure: String?
        do {
            let target = try await webhooks.policy.check(subscription.url)
            var headers = WebhookSignature.headers(
                id: id, timestamp: Int(now.timeIntervalSince1970), body: body, secrets: subscription.signingSecrets(at: now))
            headers["Content-Type"] = "application/json"
            headers["User-Agent"] = "Tether-Webhooks/1"
            // Renewed once the target was checked (resolving its name takes time); the answer's body is not read.
            guard try await renewLease(subscription.id, owner) else { return false }
            // To the addresses checked, not to wherever the name points by the time the transfer starts.
            status = try await httpClient.post(
                url: target.url, headers: headers, body: body, timeout: configuration.timeout, maxBytes: 1024 * 1024,
                connectingTo: target.addresses).status
        } catch let refusal as WebhookTargetPolicy.Refusal {
            failure = "target refused: \(refusal.description)"
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // Stopping the server cancels the attempt: that is no failure of the receiver.
            if Task.isCancelled { throw CancellationError() }
            failure = String(describing: error).prefix(300).description
        }
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        let attempt = attempts + 1
        try await webhooks.database.query("""
            INSERT INTO webhook_deliveries (subscription_id, event_id, event_type, event_position, attempt, status, duration_ms, error)
            VALUES (\(subscription.id), \(id), \(type), \(item.checkpoint.position), \(attempt), \(status), \(milliseconds), \(failure))
            """)
        switch status {
        case let code? where (200..<300).contains(code):
            deliveries.increment("2xx")
            try await webhooks.database.query("""
                UPDATE webhook_subscriptions SET cursor_tx = \(item.checkpoint.transactionId)::xid8, cursor_position = \(item.checkpoint.position),
                    attempts = 0, failing_since = NULL, updated_at = now()
                WHERE id = \(subscription.id) AND lease_owner = \(owner) AND lease_until > now()
                  AND (cursor_tx, cursor_position) < (\(item.checkpoint.transactionId)::xid8, \(item.checkpoint.position))
                """)
            attempts = 0
            return true
        case 410?:
            deliveries.increment("410")
            try await webhooks.database.query("""
                UPDATE webhook_subscriptions SET status = 'disabled', status_reason = \("the receiver answered 410 Gone"), updated_at = now()
                WHERE id = \(subscription.id) AND lease_owner = \(owner)
                """)
            return false
        default:
            // A redirect is a failure too (deliveries follow none), counted as what it is, not as the receiver's refusal.
            deliveries.increment(status.map { $0 >= 500 ? "5xx" : $0 >= 400 ? "4xx" : "\($0 / 100)xx" } ?? "error")
            let backoff = min(configuration.maximumBackoff, configuration.initialBackoff * pow(2, Double(min(attempt - 1, 30))))
            let wait = backoff * Double.random(in: 0.8...1.2)
            try await webhooks.database.query("""
                UPDATE webhook_subscriptions SET attempts = \(attempt), failing_since = coalesce(failing_since, now()),
                    next_attempt_at = now() + make_interval(secs => \(wait)), updated_at = now(),
                    status = CASE WHEN coalesce(failing_since, now()) < now() - make_interval(secs => \(configuration.failAfter))
                                  THEN 'failing' ELSE status END,
                    status_reason = CASE WHEN coalesce(failing_since, now()) < now() - make_interval(secs => \(configuration.failAfter))
                                  THEN \("deliveries failed for longer than the retry period; enable it to try again") ELSE status_reason END
                WHERE id = \(subscription.id) AND lease_owner = \(owner)
                """)
            attempts = attempt
            logger.info("a webhook delivery failed", [("subscription", subscription.id.lowercasedText), ("event", id),
                                                       ("status", status.map(String.init) ?? "none"), ("attempt", String(attempt))])
            return false
        }
    }

    /// Leases one active, due subscription that no live lease holds and whose cursor the log has passed: one
    /// that has looked at every event waits for the next without being read again.
    private func claim(as owner: UUID) async throws -> WebhookSubscription? {
        try await webhooks.database.query("""
            UPDATE webhook_subscriptions SET lease_owner = \(owner), lease_until = now() + make_interval(secs => \(configuration.leaseSeconds))
            WHERE id = (SELECT id FROM webhook_subscriptions
                        WHERE status = 'active' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
                          AND (cursor_tx, cursor_position) < (SELECT tx, position FROM events ORDER BY tx DESC, position DESC LIMIT 1)
                        ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING \(unsafeSQL: WebhookStore.columns)
            """).first.map(webhooks.decode)
    }

    /// Extends the loop's lease; false when it has lost it (it expired and another loop took it).
    private func renewLease(_ id: UUID, _ owner: UUID) async throws -> Bool {
        !(try await webhooks.database.query("""
            UPDATE webhook_subscriptions SET lease_until = now() + make_interval(secs => \(configuration.leaseSeconds))
            WHERE id = \(id) AND lease_owner = \(owner) AND status = 'active' RETURNING id
            """)).isEmpty
    }

    private func release(_ id: UUID, _ owner: UUID) async throws {
        try await webhooks.database.query(
            "UPDATE webhook_subscriptions SET lease_owner = NULL, lease_until = NULL WHERE id = \(id) AND lease_owner = \(owner)")
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
