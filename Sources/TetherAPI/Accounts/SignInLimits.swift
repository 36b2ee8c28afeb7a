import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres

/// Limits failed sign-ins per client address and per password account, and records them as events.
///
/// Every failed sign-in is a `SignInFailed` event, so support staff see why a
/// user could not get in; the limits count the short-lived operational table
/// `sign_in_attempts` (`011_sign_in_attempts.sql`), not the log, so the record of
/// a known account's failure can be sealed like the rest of its data. A refused
/// attempt is 429 `rate_limited` with `Retry-After`, recorded once per window as
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
    /// When rows of every key that left the window were last deleted (each check deletes its own keys' rows).
    private let sweep = PurgeSchedule()

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

        /// The limits' keys of the attempt: its password account (a hash of the email), and its client address.
        var keys: [(key: String, scope: String)] {
            var keys: [(key: String, scope: String)] = []
            if let email { keys.append(("account:" + Self.digest("password:" + email), "account")) }
            // An IPv6 client counts as its /64: one subscriber holds the whole of it.
            if let ip = metadata.clientIP { keys.append(("ip:" + IPAddressRange.limitKey(for: ip), "client address")) }
            return keys
        }

        /// The stream a failure of an unknown account goes to: named by a hash under today's key of
        /// failed sign-ins (never by the email or address itself), which links the day's records of one
        /// account or address only while the key lives (``ExpiringKeys``).
        func anonymousStream(keyedWith key: ExpiringKeys.Key?) -> StreamName {
            guard let key else { return StreamName("sign-in-failures-unlinked") }
            return StreamName("sign-in-failures-" + ExpiringKeys.digest(email.map { "password:" + $0 } ?? "ip:" + (metadata.clientIP ?? "unknown"), key: key))
        }

        static func digest(_ text: String) -> String {
            Array(DigestAlgorithm.sha256.hash(Array(text.utf8)).prefix(16)).hexString
        }
    }

    /// A place an attempt holds in the limits while it is checked: it counts like a failure until released.
    public struct Reservation: Sendable {
        let id: UUID
    }

    /// Takes a place for the attempt, or throws 429 when its address or account has used up the window.
    ///
    /// Counting and reserving happen in one transaction under a lock per key, so of many
    /// parallel guesses only as many as the limit allows get to be checked at all. Only
    /// password attempts take places (a password can be guessed; a signed token cannot):
    /// provider sign-ins are checked against recorded failures alone, so many people behind
    /// one address signing in at once are not refused for being in flight together.
    public func reserve(_ attempt: Attempt) async throws -> Reservation {
        let keys = attempt.keys
        let reservation = Reservation(id: UUID())
        // One transaction of two round trips: under the keys' locks, expired places go and the window is
        // counted; then the places are taken (or not) and it commits.
        let refusal: (scope: String, retryAfter: Int)? = try await database.withTransactionJob { [self] transaction in
            var reads: [PostgresQuery] = keys.map(\.key).sorted().map { "SELECT pg_advisory_xact_lock(hashtextextended(\("sign-in:" + $0), 0))" }
            reads += keys.map { expire(key: $0.key) }
            reads += keys.map { count(key: $0.key) }
            let counted = try transaction.begin(reads).suffix(keys.count)
            for (key, rows) in zip(keys, counted) {
                if let retryAfter = try retryAfter(from: rows) {
                    return (key.scope, retryAfter)
                }
            }
            try transaction.commit(attempt.email == nil ? [] : keys.map {
                "INSERT INTO sign_in_attempts (id, scope_key, kind) VALUES (\(reservation.id), \($0.key), 'attempt')"
            })
            return nil
        }
        if let refusal {
            try await refuse(attempt, scope: refusal.scope, retryAfter: refusal.retryAfter)
        }
        return reservation
    }

    /// Counts a password sign-up from `clientIP`, or throws 429 when the address has made the limit's
    /// number of them in the window: each one costs a password hash (scrypt), which must not be free
    /// to ask for in bulk. The places are kept for the window, not given back.
    public func reserveSignUp(from clientIP: String?) async throws {
        guard let clientIP else { return }
        let key = "sign-up:" + IPAddressRange.limitKey(for: clientIP)
        let window = configuration.windowSeconds
        let limit = configuration.failures
        // One transaction in one round trip: under the address's lock, expired places go, and a new one is
        // taken only while the window has room; otherwise the wait until its oldest place expires is answered.
        let retryAfter: Int? = try await database.withTransactionJob { transaction in
            let rows = try transaction.runAlone([
                "SELECT pg_advisory_xact_lock(hashtextextended(\(key), 0))",
                expire(key: key),
                """
                INSERT INTO sign_in_attempts (id, scope_key, kind)
                SELECT \(UUID()), \(key), 'sign_up' WHERE (SELECT count(*) FROM sign_in_attempts WHERE scope_key = \(key)) < \(limit)
                RETURNING id
                """,
                """
                SELECT ceil(extract(epoch FROM min(started_at) + make_interval(secs => \(window)) - now()))::int AS retry_after
                FROM sign_in_attempts WHERE scope_key = \(key)
                """,
            ])
            guard rows[2].isEmpty else { return nil }
            return max(1, try rows[3][0].decode("retry_after", as: Int?.self) ?? window)
        }
        guard let retryAfter else { return }
        throw AccountError.rateLimited(
            retryAfterSeconds: retryAfter, "Too many sign-ups from this client address; retry in \(retryAfter) s.")
    }

    /// Gives the place back (after the attempt succeeded, or after its failure was counted).
    public func release(_ reservation: Reservation) async {
        _ = try? await database.query(Self.releaseStatement(reservation))
    }

    /// The statement that gives `reservation`'s place back, for a sign-in to commit with its own writes.
    static func releaseStatement(_ reservation: Reservation) -> PostgresQuery {
        "DELETE FROM sign_in_attempts WHERE id = \(reservation.id) AND kind = 'attempt'"
    }

    /// Counts a failed sign-in against its keys and records it (`reason` is the problem code it was answered with).
    ///
    /// The record goes to the account's history when the account is known, in a stream named
    /// by its id and sealed with its key like everything else about it; a failure against an
    /// unknown account keeps neither the typed email nor any link to a person.
    /// A failure against an unknown account is sealed with today's key of failed sign-ins, and reads as
    /// erased once that key is gone (30 days): what the limits need stays in `sign_in_attempts`, whose
    /// rows are deleted once they leave the window.
    public func recordFailure(_ attempt: Attempt, reason: String) async throws {
        for key in attempt.keys {
            try await database.query("INSERT INTO sign_in_attempts (id, scope_key, kind) VALUES (\(UUID()), \(key.key), 'failure')")
        }
        if sweep.isDue(at: Date(), interval: TimeInterval(configuration.windowSeconds)) {
            try await database.query("""
                DELETE FROM sign_in_attempts WHERE started_at < now() - make_interval(secs => \(configuration.windowSeconds))
                """)
        }
        var userId: UUID?
        if let uid = attempt.verifiedUID ?? attempt.email {
            userId = try await database.query("""
                SELECT user_id FROM identities WHERE provider = \(attempt.provider) AND provider_uid = \(uid)
                """).first?.decode("user_id")
        }
        let payload = Failure(
            provider: attempt.provider, reason: reason, personal: PersonalData(email: userId == nil ? nil : attempt.email))
        try await record(type: "SignInFailed", payload, of: attempt, about: userId)
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

    /// Deletes the rows of `key` that have left the window (short-lived operational records, not the log).
    private func expire(key: String) -> PostgresQuery {
        "DELETE FROM sign_in_attempts WHERE scope_key = \(key) AND started_at < now() - make_interval(secs => \(configuration.windowSeconds))"
    }

    /// Counts what fills the window of `key`: failures and password attempts in flight, each only within the window.
    private func count(key: String) -> PostgresQuery {
        let window = configuration.windowSeconds
        // The failures that keep the count at the limit: once the oldest of them leaves the window, one more try is allowed.
        return """
            SELECT count(*) FILTER (WHERE kind = 'failure')::int AS failures,
                   count(*) FILTER (WHERE kind = 'attempt' AND started_at > now() - interval '30 seconds')::int AS in_flight,
                   ceil(extract(epoch FROM
                       (SELECT started_at FROM sign_in_attempts
                        WHERE scope_key = \(key) AND kind = 'failure' AND started_at >= now() - make_interval(secs => \(window))
                        ORDER BY started_at DESC OFFSET \(configuration.failures - 1) LIMIT 1)
                       + make_interval(secs => \(window)) - now()))::int AS retry_after
            FROM sign_in_attempts WHERE scope_key = \(key) AND started_at >= now() - make_interval(secs => \(window))
            """
    }

    /// Seconds to wait, from the rows of ``count(key:)``; nil when the window has room.
    private func retryAfter(from rows: PostgresRows) throws -> Int? {
        let failed: Int = try rows[0].decode("failures")
        let inFlight: Int = try rows[0].decode("in_flight")
        guard failed + inFlight >= configuration.failures else { return nil }
        // Only attempts still in flight fill it: they end within a request's time.
        guard failed >= configuration.failures else { return 1 }
        return max(1, (try rows[0].decode("retry_after", as: Int?.self)) ?? configuration.windowSeconds)
    }

    /// A sign-in refused by ``check(_:)``: hand it to ``refuse(_:)`` once its transaction has ended.
    struct Refusal: Error {
        var scope: String
        var retryAfter: Int
    }

    /// The limits' part of a sign-in's transaction. A provider sign-in's limits are checked in its
    /// first round trip (it reserves nothing: see ``reserve(_:)``), and the verdict throws ``Refusal``.
    /// A password sign-in reserved its place before its password was checked: the sign-in's commit
    /// gives it back.
    func check(_ attempt: Attempt, releasing reservation: Reservation? = nil) -> SignInCheck? {
        if let reservation { return SignInCheck(writes: [Self.releaseStatement(reservation)]) }
        guard attempt.email == nil else { return nil }
        let keys = attempt.keys
        guard !keys.isEmpty else { return nil }
        return SignInCheck(statements: keys.map { count(key: $0.key) }) { rows in
            for (key, counted) in zip(keys, rows) {
                if let retryAfter = try retryAfter(from: counted) { throw Refusal(scope: key.scope, retryAfter: retryAfter) }
            }
        }
    }

    /// Answers 429 for a refusal of ``check(_:)``, recording it like any other.
    func refuse(_ attempt: Attempt, _ refusal: Refusal) async throws -> Never {
        try await refuse(attempt, scope: refusal.scope, retryAfter: refusal.retryAfter)
    }

    /// Answers 429, recording the throttled window once as `SignInThrottled`.
    private func refuse(_ attempt: Attempt, scope: String, retryAfter: Int) async throws -> Never {
        try await record(
            type: "SignInThrottled", Throttled(provider: attempt.provider, scope: scope, retryAfterSeconds: retryAfter),
            of: attempt, about: nil, unlessRecordedWithin: configuration.windowSeconds)
        throw AccountError.rateLimited(
            retryAfterSeconds: retryAfter, "Too many failed sign-ins from this \(scope); retry in \(retryAfter) s.")
    }

    /// Appends a record of `attempt`, in one transaction: to the failures stream of the user `userId`
    /// names (sealed with their key), or else to the stream of ``Attempt/anonymousStream(keyedWith:)``,
    /// sealed with today's key of failed sign-ins. With `window`, not when a record of `type` is in
    /// that stream from the last `window` seconds.
    private func record(
        type: String, _ payload: some Encodable, of attempt: Attempt, about userId: UUID?, unlessRecordedWithin window: Int? = nil
    ) async throws {
        let event = NewEvent(type: type, data: try PostgresJSON(encoding: payload).data, userId: userId)
        let store = PostgresEventStore(client: database)
        try await database.withTransaction { [database] connection in
            var expiring: [ExpiringKeys.Purpose: ExpiringKeys.Key] = [:]
            let stream: StreamName
            if let userId {
                stream = StreamName("sign-in-failures-user-" + userId.lowercasedText)
            } else {
                let key = try await ExpiringKeys.key(.signInFailures, on: connection, masterKeys: database.configuration.masterKeys)
                expiring[.signInFailures] = key
                stream = attempt.anonymousStream(keyedWith: key)
            }
            // One stream's records are appended in turn, so parallel failures never race for a version;
            // a record about a user also waits for that user's lock (PostgresEventStore.lockStatements).
            for lock in PostgresEventStore.lockStatements(for: stream, events: [event]) {
                try await connection.query(lock)
            }
            if let window, !(try await connection.query("""
                SELECT 1 FROM events WHERE stream = \(stream.rawValue) AND type = \(type)
                  AND occurred_at > now() - make_interval(secs => \(window)) LIMIT 1
                """)).isEmpty {
                return
            }
            try await store.append([event], to: stream, expected: .any, metadata: attempt.metadata, expiringKeys: expiring, on: connection)
        }
    }
}
