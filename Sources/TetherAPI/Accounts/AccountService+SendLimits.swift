import Foundation
import TetherCore
import TetherCrypto
import TetherPostgres
import TetherProviders

/// Limits on codes sent by SMS and by mail, counted in the short-lived `code_sends` rows.
extension AccountService {
    /// Takes a place for one send of `channel` to each of `addresses` (numbers, email addresses, kept as
    /// hashes) and for `userId`, or throws 429 `rate_limited` when one of them had `limit` sends in `window`.
    ///
    /// A send takes its place before it is attempted, in one transaction under a lock per address and
    /// per user: parallel requests cannot all pass, and a failing webhook cannot be hammered either.
    func reserveSend(
        _ channel: WebhookDeliveryError.Channel, to addresses: [String], userId: UUID?, limit: Int, window: TimeInterval, now: Date,
        refusal: String
    ) async throws {
        let hashes = addresses.map { DigestAlgorithm.sha256.hash(Array("tether \(channel.rawValue) address:\($0)".utf8)).hexString }
        let oldest: Date? = try await database.withTransaction { connection in
            let keys = hashes.map { "\(channel.rawValue)-address:" + $0 } + (userId.map { ["\(channel.rawValue)-user:" + $0.lowercasedText] } ?? [])
            for key in keys.sorted() {
                try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(key), 0))")
            }
            try await connection.query("DELETE FROM code_sends WHERE sent_at < now() - make_interval(secs => \(Int(window)))")
            let filters: [PostgresQuery] = hashes.map { "address_hash = \($0)" } + (userId.map { ["user_id = \($0)"] } ?? [])
            for filter in filters {
                let rows = try await connection.query("""
                    SELECT count(*)::int AS sent, min(sent_at) AS oldest FROM code_sends WHERE channel = \(channel.rawValue) AND \(filter)
                    """)
                if try rows[0].decode("sent", as: Int.self) >= limit {
                    return try rows[0].decode("oldest", as: Date?.self) ?? now
                }
            }
            // One row per address; the user is named on the first only, so that a send counts once for them.
            for (index, hash) in (hashes.isEmpty ? [nil] : hashes.map(Optional.some)).enumerated() {
                try await connection.query("""
                    INSERT INTO code_sends (channel, address_hash, user_id) VALUES (\(channel.rawValue), \(hash), \(index == 0 ? userId : nil))
                    """)
            }
            return nil
        }
        guard let oldest else { return }
        let wait = oldest.addingTimeInterval(window).timeIntervalSince(now)
        throw AccountError.rateLimited(retryAfterSeconds: Int(wait.rounded(.up)), refusal)
    }
}
