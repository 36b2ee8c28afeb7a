import Foundation
import TetherCore
import TetherCrypto
import TetherPostgres
import TetherProviders

/// Limits on codes sent by SMS and by mail, counted in the short-lived `code_sends` rows.
extension AccountService {
    /// Takes a place for one send of `channel` to each of `addresses` (numbers, email addresses, kept as
    /// keyed hashes: ``SignInLimits/digest(_:key:)``) and for `userId`, or throws 429 `rate_limited` when an address had `perAddress` sends in
    /// `window`, or the user `perUser`.
    ///
    /// One transaction in one round trip: under a lock per address and per user, expired places go,
    /// the places are taken only while every window has room, and otherwise the wait until the fullest
    /// one frees a place is answered. A send takes its place before it is attempted: parallel requests
    /// cannot all pass, and a failing webhook cannot be hammered either.
    func reserveSend(
        _ channel: WebhookDeliveryError.Channel, to addresses: [String], userId: UUID?, perAddress: Int, perUser: Int,
        window: TimeInterval, now: Date, refusal: String
    ) async throws {
        let key = addresses.isEmpty ? [] : try await limitsKey.bytes(on: database)
        let hashes = addresses.map { SignInLimits.digest("tether \(channel.rawValue) address:\($0)", key: key) }
        let keys = hashes.map { "\(channel.rawValue)-address:" + $0 } + (userId.map { ["\(channel.rawValue)-user:" + $0.lowercasedText] } ?? [])
        let kind = channel.rawValue
        // Each window's count, limit and oldest place: one row per address, and one for the user.
        let windows: PostgresQuery = """
            SELECT count(*) AS n, \(perAddress)::int AS cap, min(sent_at) AS oldest FROM code_sends
            WHERE channel = \(kind) AND address_hash = ANY(\(PostgresArray(hashes))::text[]) GROUP BY address_hash
            UNION ALL SELECT count(*), \(perUser)::int, min(sent_at) FROM code_sends WHERE channel = \(kind) AND user_id = \(userId)
            """
        // One row per address, the user named on the first only, so that a send counts once for them.
        let places: PostgresQuery = hashes.isEmpty
            ? "SELECT NULL::text AS address_hash, \(userId)::uuid AS user_id"
            : """
              SELECT h, CASE WHEN ord = 1 THEN \(userId)::uuid END FROM unnest(\(PostgresArray(hashes))::text[]) WITH ORDINALITY AS r (h, ord)
              """
        var statements: [PostgresQuery] = keys.sorted().map { "SELECT pg_advisory_xact_lock(hashtextextended(\($0), 0))" }
        statements.append("DELETE FROM code_sends WHERE channel = \(kind) AND sent_at < now() - make_interval(secs => \(Int(window)))")
        statements.append("""
            INSERT INTO code_sends (channel, address_hash, user_id)
            SELECT \(kind), places.* FROM (\(places)) AS places
            WHERE NOT EXISTS (SELECT 1 FROM (\(windows)) AS w WHERE w.n >= w.cap)
            RETURNING 1
            """)
        statements.append("SELECT max(oldest) AS oldest FROM (\(windows)) AS w WHERE w.n >= w.cap")
        let oldest: Date? = try await database.withTransactionJob { [statements] transaction in
            let rows = try transaction.runAlone(statements)
            guard rows[rows.count - 2].isEmpty else { return nil }
            return try rows[rows.count - 1].first?.decode("oldest", as: Date?.self) ?? now
        }
        guard let oldest else { return }
        let wait = oldest.addingTimeInterval(window).timeIntervalSince(now)
        throw AccountError.rateLimited(retryAfterSeconds: Int(wait.rounded(.up)), refusal)
    }

    /// Deletes the places of sends that have left their channel's window; answers how many went (the server's
    /// housekeeping calls it every minute: a place about no user, a password reset's, goes on time too).
    @discardableResult
    public func sweepExpiredSends() async throws -> Int {
        try await database.query("""
            DELETE FROM code_sends WHERE channel = 'sms' AND sent_at < now() - make_interval(secs => \(Int(UserAccount.smsWindow)))
                OR channel = 'mail' AND sent_at < now() - make_interval(secs => \(Int(EmailFlows.mailWindow)))
            """).affectedRows
    }
}
