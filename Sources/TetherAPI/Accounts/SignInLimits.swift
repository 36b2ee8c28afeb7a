import Foundation
import Synchronization
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres

/// Limits failed sign-ins per client address and per password account, and records them.
///
/// A failed sign-in of a known account is a `SignInFailed` event in that account's history, so
/// support staff see why the user could not get in (the account's limit bounds how many).
/// A failure that concerns no known account (a forged or garbled token, a guess at an email
/// nobody holds) and every throttled attempt is only counted, per minute, provider and reason
/// (`026_sign_in_failure_tallies.sql`); each closed minute becomes one `SignInFailuresCounted`
/// event, so no volume of forged sign-ins grows the log by more than an event a minute.
/// The limits count the short-lived operational table `sign_in_attempts`
/// (`011_sign_in_attempts.sql`), not the log. A refused attempt is 429 `rate_limited` with
/// `Retry-After`.
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
    /// Turns closed minutes of the tallies into events while the server runs.
    private let tallies = BackgroundLoop()
    /// The stream of ``flushTallies()``'s events.
    static let talliesStream = StreamName("sign-in-failures-counted")
    /// The keys this instance refused lately, and until when (``refuseIfRefusedLately(_:)``).
    private let refusedKeys = RefusedKeys()
    /// What keys the hashes that name a password account's rows (``digest(_:key:)``).
    static let hashKeyName = "limits"
    private let hashKey = LoadedHashKey(hashKeyName)

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

        /// The limits' key of the attempt's client address, if it has one (all a provider attempt has).
        var addressKeys: [(key: String, scope: String)] {
            // An IPv6 client counts as its /64: one subscriber holds the whole of it.
            metadata.clientIP.map { [("ip:" + IPAddressRange.limitKey(for: $0), "client address")] } ?? []
        }

        /// The limits' keys of the attempt: its password account (the email hashed under `hashKey`, the database's
        /// `limits` key), then its client address.
        func keys(hashKey: [UInt8]) -> [(key: String, scope: String)] {
            let account = email.map { [("account:" + SignInLimits.digest("password:" + $0, key: hashKey), "account")] } ?? []
            return account + addressKeys
        }
    }

    /// The name `text` (an email, an address) has in the limits' rows: HMAC-SHA256 under the database's `limits` key
    /// (`hash_keys`), 16 bytes in hex. A dump of the rows cannot be searched offline for whose they were, as an
    /// unkeyed hash of an email can.
    static func digest(_ text: String, key: [UInt8]) -> String {
        Array(HMAC.authenticationCode(for: Array(text.utf8), key: key, digest: .sha256).prefix(16)).hexString
    }

    /// Loads the database's `limits` key (made on first use), so that no attempt waits for it.
    func loadHashKey() async throws {
        _ = try await hashKey.bytes(on: database)
    }

    /// The keys of `attempt`: with its password account's, keyed with the database's `limits` key.
    private func keys(of attempt: Attempt) async throws -> [(key: String, scope: String)] {
        attempt.email == nil ? attempt.addressKeys : attempt.keys(hashKey: try await hashKey.bytes(on: database))
    }

    /// Deletes the rows of every key that have left the window; answers how many went (the server's housekeeping
    /// calls it every minute, so no row outlives its window by more than that, whoever it was about).
    @discardableResult
    public func sweepExpired() async throws -> Int {
        try await database.query(expiredRows).affectedRows
    }

    /// Deletes the rows of every key that have left the window.
    private var expiredRows: PostgresQuery {
        "DELETE FROM sign_in_attempts WHERE started_at < now() - make_interval(secs => \(literal: configuration.windowSeconds))"
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
        let keys = try await keys(of: attempt)
        let reservation = Reservation(id: UUID.random())
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
                SELECT \(UUID.random()), \(key), 'sign_up' WHERE (SELECT count(*) FROM sign_in_attempts WHERE scope_key = \(key)) < \(literal: limit)
                RETURNING id
                """,
                """
                SELECT ceil(extract(epoch FROM min(started_at) + make_interval(secs => \(literal: window)) - now()))::int AS retry_after
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
    /// by its id and sealed with its key like everything else about it. A failure against an
    /// unknown account keeps neither the typed email, the address nor any link to a person: it is
    /// one more in its minute's tally. What the limits need stays in `sign_in_attempts`, whose
    /// rows are deleted once they leave the window.
    public func recordFailure(_ attempt: Attempt, reason: String) async throws {
        var userId: UUID?
        if let uid = attempt.verifiedUID ?? attempt.email {
            userId = try await database.query(
                try AccountProjection.identityOwner(provider: attempt.provider, uid: uid, seal: try await database.readModelSeal())
            ).first?.decode("user_id")
        }
        var writes: [PostgresQuery] = try await keys(of: attempt).map {
            "INSERT INTO sign_in_attempts (id, scope_key, kind) VALUES (\(UUID.random()), \($0.key), 'failure')"
        }
        if userId == nil { writes.append(Self.tally("failed", provider: attempt.provider, detail: reason)) }
        if sweep.isDue(at: Date(), interval: TimeInterval(configuration.windowSeconds)) { writes.append(expiredRows) }
        if let userId {
            // The limits' rows go in the transaction of the account's record.
            let payload = Failure(provider: attempt.provider, reason: reason, personal: PersonalData(email: attempt.email))
            try await record(type: "SignInFailed", payload, of: attempt, about: userId, writing: writes)
        } else if !writes.isEmpty {
            _ = try await database.withTransactionJob { [writes] in try $0.runAlone(writes) }
        }
    }

    /// Adds one to the current minute's tally of `kind` (`failed` or `throttled`), `provider` and `detail`.
    private static func tally(_ kind: String, provider: String, detail: String) -> PostgresQuery {
        """
        INSERT INTO sign_in_failure_tallies (minute, kind, provider, detail, count)
        VALUES (date_trunc('minute', now()), \(kind), \(provider), \(detail), 1)
        ON CONFLICT (minute, kind, provider, detail) DO UPDATE SET count = sign_in_failure_tallies.count + 1
        """
    }

    /// Appends one `SignInFailuresCounted` event for each minute of the tallies that has closed (five
    /// seconds ago, so a transaction that began in it has ended) and deletes its rows, in one
    /// transaction: of instances flushing at once, each row goes to exactly one event. Answers how
    /// many events it appended.
    @discardableResult
    public func flushTallies() async throws -> Int {
        try await database.withTransaction { connection in
            let rows = try await connection.query("""
                DELETE FROM sign_in_failure_tallies WHERE minute < date_trunc('minute', now() - interval '5 seconds')
                RETURNING to_char(minute AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS minute, kind, provider, detail, count
                """)
            let counts = try rows.map { row in
                (minute: try row.decode("minute", as: String.self), count: Counted.Count(
                    kind: try row.decode("kind"), provider: try row.decode("provider"), detail: try row.decode("detail"),
                    count: try row.decode("count")))
            }
            let events = try Dictionary(grouping: counts, by: \.minute).sorted { $0.key < $1.key }.map { minute, rows in
                let counts = rows.map(\.count).sorted { ($0.kind, $0.provider, $0.detail) < ($1.kind, $1.provider, $1.detail) }
                let counted = Counted(minute: minute, seconds: 60, total: counts.reduce(0) { $0 + $1.count }, counts: counts)
                return NewEvent(type: "SignInFailuresCounted", data: try PostgresJSON(encoding: counted).data, userId: nil)
            }
            guard !events.isEmpty else { return 0 }
            for lock in PostgresEventStore.lockStatements(for: Self.talliesStream, events: events) {
                try await connection.query(lock)
            }
            try await PostgresEventStore(client: database).append(
                events, to: Self.talliesStream, expected: .any,
                metadata: EventMetadata(actor: .system("sign-in limits"), surface: "system"), on: connection)
            return events.count
        }
    }

    /// Flushes the tallies every `interval` while the server runs (every instance: ``flushTallies()`` is safe to race).
    func startFlushingTallies(every interval: Duration = .seconds(30), logger: Logger) {
        tallies.start(idle: interval, logger: logger, name: "sign-in failure tallies") { [self] in
            try await flushTallies()
            return false
        }
    }

    /// Stops the flushing loop, then flushes the minutes that have closed.
    func stopFlushingTallies() async {
        await tallies.stop()
        _ = try? await flushTallies()
    }

    /// A minute's tally, as its event records it.
    private struct Counted: Encodable {
        struct Count: Encodable {
            var kind: String
            var provider: String
            var detail: String
            var count: Int
        }

        /// The minute's start (UTC).
        var minute: String
        var seconds: Int
        var total: Int
        var counts: [Count]
    }

    private struct Failure: Encodable {
        var provider: String
        var reason: String
        var personal: PersonalData
    }

    /// Deletes the rows of `key` that have left the window (short-lived operational records, not the log).
    private func expire(key: String) -> PostgresQuery {
        "DELETE FROM sign_in_attempts WHERE scope_key = \(key) AND started_at < now() - make_interval(secs => \(literal: configuration.windowSeconds))"
    }

    /// Counts what fills the window of `key`: failures and password attempts in flight, each only within the window.
    private func count(key: String) -> PostgresQuery {
        // The configuration's numbers are literals, the key the only parameter: the statement is planned once
        // per connection, not at every sign-in (see `PostgresQuery`'s `literal:`).
        let window = configuration.windowSeconds
        // The failures that keep the count at the limit: once the oldest of them leaves the window, one more try is allowed.
        return """
            SELECT count(*) FILTER (WHERE kind = 'failure')::int AS failures,
                   count(*) FILTER (WHERE kind = 'attempt' AND started_at > now() - interval '30 seconds')::int AS in_flight,
                   ceil(extract(epoch FROM
                       (SELECT started_at FROM sign_in_attempts
                        WHERE scope_key = \(key) AND kind = 'failure' AND started_at >= now() - make_interval(secs => \(literal: window))
                        ORDER BY started_at DESC OFFSET \(literal: configuration.failures - 1) LIMIT 1)
                       + make_interval(secs => \(literal: window)) - now()))::int AS retry_after
            FROM sign_in_attempts WHERE scope_key = \(key) AND started_at >= now() - make_interval(secs => \(literal: window))
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

    /// Answers 429 at once for a provider attempt from a key this instance refused less than its `Retry-After`
    /// ago, before the credential is verified: a throttled client then spends none of the provider's quota (a
    /// Facebook access token costs two Graph API calls to verify) and no verification. Nothing is read: the
    /// database's count decides every other attempt, and this one too once the time is past.
    func refuseIfRefusedLately(_ attempt: Attempt) async throws {
        guard attempt.email == nil, let (scope, retryAfter) = refusedKeys.refusal(for: attempt.addressKeys) else { return }
        // Not noted again: the time left rounds up, and each refusal would push the end on by a fraction of a second.
        try await refuse(attempt, scope: scope, retryAfter: retryAfter, noting: false)
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
        let keys = attempt.addressKeys
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

    /// Answers 429, counting the refusal in its minute's tally; `noting` the key as refused for `retryAfter` seconds.
    private func refuse(_ attempt: Attempt, scope: String, retryAfter: Int, noting: Bool = true) async throws -> Never {
        // Only an address is looked up before verification (``refuseIfRefusedLately(_:)``): an account's key is not kept.
        if noting, let key = attempt.addressKeys.first(where: { $0.scope == scope })?.key {
            refusedKeys.note(key, for: retryAfter)
        }
        _ = try? await database.query(Self.tally("throttled", provider: attempt.provider, detail: scope))
        throw AccountError.rateLimited(
            retryAfterSeconds: retryAfter, "Too many failed sign-ins from this \(scope); retry in \(retryAfter) s.")
    }

    /// Appends a record of `attempt` to the failures stream of the user `userId` names (sealed with their
    /// key), with `writes` in the same transaction.
    private func record(
        type: String, _ payload: some Encodable, of attempt: Attempt, about userId: UUID, writing writes: [PostgresQuery]
    ) async throws {
        let event = NewEvent(type: type, data: try PostgresJSON(encoding: payload).data, userId: userId)
        let stream = StreamName("sign-in-failures-user-" + userId.lowercasedText)
        try await database.withTransaction { [database] connection in
            // One stream's records are appended in turn, so parallel failures never race for a version;
            // a record about a user also waits for that user's lock (PostgresEventStore.lockStatements).
            for statement in PostgresEventStore.lockStatements(for: stream, events: [event]) + writes {
                try await connection.query(statement)
            }
            try await PostgresEventStore(client: database).append([event], to: stream, expected: .any, metadata: attempt.metadata, on: connection)
        }
    }
}

/// The limits' keys an instance refused lately, each until its `Retry-After` is over; at most ``capacity`` of them
/// (past that, the expired go, and if none has, everything: a key forgotten is only checked in the database again).
final class RefusedKeys: Sendable {
    static let capacity = 10_000
    private let until = Mutex<[String: ContinuousClock.Instant]>([:])

    func note(_ key: String, for seconds: Int) {
        let now = ContinuousClock.now
        until.withLock { until in
            if until.count >= Self.capacity {
                until = until.filter { $0.value > now }
                if until.count >= Self.capacity { until.removeAll() }
            }
            until[key] = now.advanced(by: .seconds(seconds))
        }
    }

    /// The scope and the whole seconds left of the first of `keys` refused until later than now.
    func refusal(for keys: [(key: String, scope: String)]) -> (scope: String, retryAfter: Int)? {
        let now = ContinuousClock.now
        return until.withLock { until in
            for (key, scope) in keys {
                guard let end = until[key] else { continue }
                guard end > now else { until[key] = nil; continue }
                let left = now.duration(to: end).components
                return (scope, max(1, Int(left.seconds) + (left.attoseconds > 0 ? 1 : 0)))
            }
            return nil
        }
    }
}
