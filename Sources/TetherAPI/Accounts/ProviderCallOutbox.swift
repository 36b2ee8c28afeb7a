import Foundation
import Synchronization
import TetherCore
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders

/// The outbox of calls to providers outside a request (`provider_calls`, `025_provider_calls.sql`):
/// the only way Tether calls a provider when no client is waiting.
///
/// A command that ends a grant (an identity unlinked, a user erased) writes one row per stored token in
/// its own transaction (``insertStatements(for:userId:masterKeys:)``), so a call is never lost and never
/// made for a command that rolled back. ``ProviderCallWorker`` works the rows.
enum ProviderCallOutbox {
    /// What a row's wrapped payload holds.
    struct Payload: Codable, Sendable {
        var uid: String
        var grant: ProviderGrant
    }

    /// The action that revokes `provider`'s grants.
    static func action(for provider: String) -> String? {
        switch provider {
        case "apple": "apple.revoke"
        case "facebook": "facebook.revoke_permissions"
        default: nil
        }
    }

    static func wrappingContext(_ id: UUID) -> String { "provider_calls:" + id.lowercasedText }

    /// The rows that revoke `grants` of the user `userId`, for the command's commit.
    static func insertStatements(
        for grants: [(provider: String, uid: String, grant: ProviderGrant)], userId: UUID, masterKeys: MasterKeyRing?
    ) throws -> [PostgresQuery] {
        try grants.compactMap { entry in
            guard let action = action(for: entry.provider) else { return nil }
            let id = UUID.random()
            let payload = String(decoding: try JSONEncoder().encode(Payload(uid: entry.uid, grant: entry.grant)), as: UTF8.self)
            let wrapped = try masterKeys.wrapText(payload, context: wrappingContext(id))
            return """
                INSERT INTO provider_calls (id, user_id, provider, action, payload)
                VALUES (\(id), \(userId), \(entry.provider), \(action), \(wrapped))
                """
        }
    }
}

/// Works the outbox in every `tether serve` and `tether dev` instance: takes due rows under a lease
/// (`FOR UPDATE SKIP LOCKED`, so instances share the work and never make one call at once), makes the
/// call, and records the attempt in the user's history in the transaction that settles the row:
/// `ProviderTokenRevoked`, or `ProviderRevocationFailed` with the next attempt's time (backoff from
/// ``Configuration/initialBackoff`` doubling to ``Configuration/maximumBackoff``, ±20 %), or, after
/// ``Configuration/giveUpAfter``, `ProviderRevocationAbandoned`. A revocation never blocks the command
/// that caused it: the erasure is done before the first attempt.
public final class ProviderCallWorker: Sendable {
    public struct Configuration: Sendable {
        /// How often an idle instance looks for due rows.
        public var pollInterval: Duration = .seconds(1)
        /// How long after ``ProviderCallWorker/start()`` the first look is.
        public var firstLookAfter: Duration = .zero
        /// How long a lease lasts: a call still unsettled then is taken up by another instance.
        public var leaseSeconds = 60
        public var initialBackoff: TimeInterval = 5
        public var maximumBackoff: TimeInterval = 60 * 60
        /// How long a call is retried before it is abandoned.
        public var giveUpAfter: TimeInterval = 3 * 24 * 60 * 60
        /// Rows taken at once.
        public var batch = 10

        public init() {}
    }

    let accounts: AccountService
    let grants: ProviderGrantCalls?
    let configuration: Configuration
    let logger: Logger
    let calls: Counter
    /// This instance's name in leases.
    let instance = UUID.random()
    private let loop = BackgroundLoop()

    public init(
        accounts: AccountService, grants: ProviderGrantCalls?, configuration: Configuration = Configuration(), metrics: MetricsRegistry,
        logger: Logger
    ) {
        self.accounts = accounts
        self.grants = grants
        self.configuration = configuration
        self.logger = logger
        calls = metrics.counter(
            "tether_provider_calls_total", help: "Calls to providers from the outbox, by action and result: done, failed or abandoned.",
            labels: ["action", "result"])
    }

    /// Starts the loop (once).
    public func start() {
        loop.start(idle: configuration.pollInterval, firstAfter: configuration.firstLookAfter, logger: logger, name: "provider call loop") {
            [self] in try await workOnce() > 0
        }
    }

    /// Stops the loop after the calls in flight, and gives this instance's leases back.
    public func stop() async {
        await loop.stop()
        _ = try? await accounts.database.query(
            "UPDATE provider_calls SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = \(instance) AND done_at IS NULL")
    }

    private struct Claimed: Sendable {
        var id: UUID
        var userId: UUID
        var provider: String
        var action: String
        var payload: String?
        var attempt: Int
        var createdAt: Date
    }

    /// Takes the due rows and makes their calls; answers how many it worked.
    @discardableResult
    public func workOnce() async throws -> Int {
        let rows = try await accounts.database.query("""
            UPDATE provider_calls SET lease_owner = \(instance), lease_until = now() + make_interval(secs => \(configuration.leaseSeconds)),
                attempts = attempts + 1
            WHERE id IN (
                SELECT id FROM provider_calls
                WHERE done_at IS NULL AND abandoned_at IS NULL AND due_at <= now() AND (lease_until IS NULL OR lease_until < now())
                ORDER BY due_at LIMIT \(configuration.batch) FOR UPDATE SKIP LOCKED)
            RETURNING id, user_id, provider, action, payload, attempts, created_at
            """)
        let claimed = try rows.map { row in
            Claimed(
                id: try row.decode("id"), userId: try row.decode("user_id"), provider: try row.decode("provider"),
                action: try row.decode("action"), payload: try row.decode("payload"), attempt: try row.decode("attempts"),
                createdAt: try row.decode("created_at"))
        }
        for call in claimed {
            try await work(call)
        }
        return claimed.count
    }

    private func work(_ call: Claimed) async throws {
        var failure: String?
        do {
            guard let grants else { throw ProviderError.providerUnavailable.with(detail: "no identity providers are configured") }
            guard let stored = call.payload else { throw ProviderError.providerUnavailable.with(detail: "the call's payload is gone") }
            let text = try accounts.database.configuration.masterKeys.unwrapText(stored, context: ProviderCallOutbox.wrappingContext(call.id))
            let payload = try JSONDecoder().decode(ProviderCallOutbox.Payload.self, from: Data(text.utf8))
            try await grants.revoke(call.provider, grant: payload.grant, uid: payload.uid)
        } catch let error as ProviderError {
            failure = error.detail.isEmpty ? error.code : error.detail
        } catch {
            failure = String(describing: error)
        }
        let record = AccountEvent.ProviderCall(provider: call.provider, action: call.action, callId: call.id, attempt: call.attempt)
        let settle: PostgresQuery
        let event: AccountEvent
        let result: String
        if let error = failure {
            if Date().timeIntervalSince(call.createdAt) >= configuration.giveUpAfter {
                settle = """
                    UPDATE provider_calls SET abandoned_at = now(), payload = NULL, last_error = \(error), lease_owner = NULL, lease_until = NULL
                    WHERE id = \(call.id) AND lease_owner = \(instance) AND done_at IS NULL RETURNING id
                    """
                event = .providerRevocationAbandoned(with(record) { $0.error = error })
                result = "abandoned"
            } else {
                let retryAt = Date().addingTimeInterval(backoff(after: call.attempt))
                settle = """
                    UPDATE provider_calls SET due_at = \(retryAt), last_error = \(error), lease_owner = NULL, lease_until = NULL
                    WHERE id = \(call.id) AND lease_owner = \(instance) AND done_at IS NULL RETURNING id
                    """
                event = .providerRevocationFailed(with(record) {
                    $0.error = error
                    $0.retryAt = ISO8601Milliseconds.format(retryAt)
                })
                result = "failed"
            }
            logger.warn("provider call failed", [("action", call.action), ("attempt", String(call.attempt)), ("error", error)])
        } else {
            settle = """
                UPDATE provider_calls SET done_at = now(), payload = NULL, last_error = NULL, lease_owner = NULL, lease_until = NULL
                WHERE id = \(call.id) AND lease_owner = \(instance) AND done_at IS NULL RETURNING id
                """
            event = .providerTokenRevoked(record)
            result = "done"
        }
        // The row is settled and the attempt recorded in one transaction, only while the lease is still ours.
        let context = CommandContext(
            commandId: AccountEventCodec.eventID(command: call.id, index: 1000 + call.attempt),
            metadata: EventMetadata(actor: .system("provider outbox"), surface: "provider"))
        _ = try await accounts.execute(
            user: .id(call.userId), reads: [settle], allowingErased: true, context
        ) { _, rows in (rows[0].isEmpty ? [] : [event], ()) }
        calls.increment(call.action, result)
    }

    /// The wait before attempt `attempt + 1`.
    func backoff(after attempt: Int) -> TimeInterval {
        let base = min(configuration.maximumBackoff, configuration.initialBackoff * pow(2, Double(max(0, attempt - 1))))
        return base * Double.random(in: 0.8...1.2)
    }
}

private func with<T>(_ value: T, _ change: (inout T) -> Void) -> T {
    var copy = value
    change(&copy)
    return copy
}
