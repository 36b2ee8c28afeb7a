import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres

/// Limits failed sign-ins per client address and per password account, and records them as events.
///
/// Every failed sign-in is a `SignInFailed` event, so support staff see why a
/// user could not get in, and the limits are counted from the log itself
/// (indexes in `005_idempotency_and_sign_in_limits.sql`). A refused attempt is
/// 429 `rate_limited` with `Retry-After`, recorded once per window as
/// `SignInThrottled`.
///
/// Per identity, only password sign-ins count: a password can be guessed, a
/// signed provider token cannot, and counting by the unverified subject of a
/// token would let anyone lock a stranger out by sending forged tokens.
public struct SignInLimits: Sendable {
    /// How many failures a window allows.
    public struct Configuration: Sendable {
        /// Failures per window and key before sign-ins are refused.
        public var failures: Int
        /// The window, in whole seconds.
        public var windowSeconds: Int

        public init(failures: Int = 10, windowSeconds: Int = 60) {
            self.failures = failures
            self.windowSeconds = windowSeconds
        }
    }

    let database: PostgresClient
    let configuration: Configuration

    public init(database: PostgresClient, configuration: Configuration = Configuration()) {
        self.database = database
        self.configuration = configuration
    }

    /// An attempt to sign in: who claims to sign in, from where.
    public struct Attempt: Sendable {
        public var provider: String
        /// The normalized email of a password sign-in; nil for provider tokens.
        public var email: String?
        public var metadata: EventMetadata
        /// The provider's uid once the credential was verified (a refusal after verification, such as a disabled user).
        public var verifiedUID: String?

        public init(provider: String, email: String?, metadata: EventMetadata) {
            self.provider = provider
            self.email = email
            self.metadata = metadata
        }

        /// The stream an attempt's failures go to: its account when it names one, otherwise its client address.
        var stream: StreamName {
            let key = email.map { "password:" + $0 } ?? "ip:" + (metadata.clientIP ?? "unknown")
            let digest = DigestAlgorithm.sha256.hash(Array(key.utf8)).prefix(16)
            return StreamName("sign-in-failures-" + digest.map { String(format: "%02x", $0) }.joined())
        }
    }

    /// Throws 429 when the attempt's address or account has failed too often in the window.
    public func check(_ attempt: Attempt) async throws {
        if let ip = attempt.metadata.clientIP {
            try await refuseIfExceeded(attempt, scope: "client address", filter: "metadata ->> 'clientIP' = \(ip)")
        }
        if attempt.email != nil {
            try await refuseIfExceeded(attempt, scope: "account", filter: "stream = \(attempt.stream.rawValue)")
        }
    }

    /// Records a failed sign-in (`reason` is the problem code it was answered with).
    public func recordFailure(_ attempt: Attempt, reason: String) async throws {
        // The account the attempt was about, when one is known, so the failure shows in its history.
        var userId: UUID?
        if let uid = attempt.verifiedUID ?? attempt.email {
            userId = try await database.query("""
                SELECT user_id FROM identities WHERE provider = \(attempt.provider) AND provider_uid = \(uid)
                """).first?.decode("user_id")
        }
        let payload = Failure(provider: attempt.provider, reason: reason, personal: PersonalData(email: attempt.email))
        try await append(type: "SignInFailed", payload, attempt: attempt, userId: userId)
    }

    private struct Failure: Encodable {
        var provider: String
        var reason: String
        var personal: PersonalData
    }

    private struct Throttled: Encodable {
        var provider: String
        /// `client address` or `account`.
        var scope: String
        var retryAfterSeconds: Int
    }

    private func refuseIfExceeded(_ attempt: Attempt, scope: String, filter: PostgresQuery) async throws {
        let window = configuration.windowSeconds
        // The failures that keep the count at the limit: once the oldest of them leaves the window, one more try is allowed.
        let rows = try await database.query("""
            SELECT count(*)::int AS failures,
                   ceil(extract(epoch FROM min(occurred_at) + make_interval(secs => \(window)) - now()))::int AS retry_after
            FROM (SELECT occurred_at FROM events
                  WHERE type = 'SignInFailed' AND \(filter) AND occurred_at > now() - make_interval(secs => \(window))
                  ORDER BY occurred_at DESC LIMIT \(configuration.failures)) recent
            """)
        let failures: Int = try rows[0].decode("failures")
        guard failures >= configuration.failures else { return }
        let retryAfter = max(1, (try rows[0].decode("retry_after", as: Int?.self)) ?? window)
        let alreadyRecorded = try await database.query("""
            SELECT 1 FROM events WHERE stream = \(attempt.stream.rawValue) AND type = 'SignInThrottled'
              AND occurred_at > now() - make_interval(secs => \(window)) LIMIT 1
            """)
        if alreadyRecorded.isEmpty {
            try await append(type: "SignInThrottled",
                             Throttled(provider: attempt.provider, scope: scope, retryAfterSeconds: retryAfter),
                             attempt: attempt, userId: nil)
        }
        var problem = Problem(
            status: 429, code: "rate_limited", title: "Too many failed sign-ins",
            detail: "Too many failed sign-ins from this \(scope); retry in \(retryAfter) s.")
        problem.headers["Retry-After"] = String(retryAfter)
        throw problem
    }

    private func append(type: String, _ payload: some Encodable, attempt: Attempt, userId: UUID?) async throws {
        let event = NewEvent(type: type, data: try PostgresJSON(encoding: payload).data, userId: userId)
        let store = PostgresEventStore(client: database)
        // Failures of one key may arrive at once; each is appended at the end of the stream.
        for attemptNumber in 1...5 {
            do {
                try await store.append([event], to: attempt.stream, expected: .any, metadata: attempt.metadata)
                return
            } catch is WrongExpectedVersion where attemptNumber < 5 {
                continue
            } catch let error as PostgresError where error.isUniqueViolation && attemptNumber < 5 {
                continue
            }
        }
    }
}
