import Foundation
import TetherCore
import TetherCrypto
import TetherPostgres

/// Users' states as of a version of their stream (`account_snapshots`), sealed with their data key.
///
/// A command on a user whose state the server does not keep (after a restart, or past the cache's
/// budget) read and decoded their whole stream: 22–33 ms of CPU for a user of 2,000 events and 100
/// sessions, which a restarted server paid for each user's first command (25–37 sign-ins a second in
/// its first 10 s on the replay database, against about 1,100 warm). With a snapshot it decodes the
/// snapshot and the events after it: about 1–2 ms, and 480–814 sign-ins a second in those 10 s. A
/// command that decoded ``AccountService/snapshotInterval`` events or more to fold its user's state from
/// the log writes that state as their new snapshot, in its own commit.
///
/// A snapshot is trusted as a kept state is: only while the log's event at its version is the one its
/// transaction wrote (a log put back and written again since does not match), and only by a build of the
/// same ``format``. The row is deleted by the user's erasure, whose key it is sealed with.
enum AccountSnapshot {
    /// The layout of the sealed state and the rules that folded it. A change to ``UserAccount``'s stored
    /// properties or to how an event folds into it takes a new number: snapshots of another are passed over
    /// and written again. (A new optional property would otherwise read as nil from an older snapshot;
    /// `AccountSnapshotTests` lists the properties of this format and fails when they change.)
    static let format = 6

    /// The statements of the extra round trip a user's load takes when its first read did not reach a
    /// state it can start from: their snapshot, and their stream's events before `version` from the later
    /// of the snapshot's version and `keptVersion` (the state the cache keeps of them), those included.
    static func readStatements(_ userId: UUID, before version: Int, keptVersion: Int?) -> [PostgresQuery] {
        // The snapshot a build of this format can use; its version is NULL when there is none.
        let usable: PostgresQuery = "FROM account_snapshots WHERE user_id = \(userId) AND format = \(literal: format)"
        let snapshotVersion: PostgresQuery = "(SELECT version \(usable))"
        let start = keptVersion.map { "greatest(\($0), \(snapshotVersion))" } ?? snapshotVersion
        return ["SELECT version, tx, state \(usable)", PostgresEventStore.userStreamStatement(userId, before: version, from: start)]
    }

    /// The state the snapshot in `rows` holds, when there is one this build can open with `key`.
    /// Nil when it cannot (a key changed since, a damaged row): the load then goes on without it.
    static func opened(from rows: PostgresRows, of userId: UUID, key: [UInt8]) -> AccountStateCache.Entry? {
        guard let row = rows.first,
              let version: Int = try? row.decode("version"), let transaction: UInt64 = try? row.decode("tx"),
              let stored: [UInt8] = try? row.decode("state"),
              let account = opened(stored, of: userId, version: version, key: key)
        else { return nil }
        return AccountStateCache.Entry(account: account, lastTransaction: transaction)
    }

    /// Writes `account` as its user's snapshot, the event at its version written by `lastTransaction`, in place
    /// of any before. It is folded from the log under the user's lock, so a snapshot of a later version can
    /// only be one the log does not go on from (a log put back).
    static func writeStatement(_ account: UserAccount, lastTransaction: UInt64, key: [UInt8]) throws -> PostgresQuery {
        """
            INSERT INTO account_snapshots (user_id, version, tx, format, state)
            VALUES (\(account.id), \(account.version), \(String(lastTransaction))::xid8, \(literal: format), \(try sealed(account, key: key)))
            ON CONFLICT (user_id) DO UPDATE SET version = excluded.version, tx = excluded.tx, format = excluded.format,
                state = excluded.state, taken_at = now()
            """
    }

    /// `account` as stored: its JSON (dates as seconds since 2001, exactly), sealed with `key` and bound to
    /// the user, the version and the format.
    static func sealed(_ account: UserAccount, key: [UInt8]) throws -> [UInt8] {
        let text = try CompactJSONEncoder(dates: .secondsSinceReferenceDate).encode(account)
        return try AESGCM.seal(text, key: key, authenticating: aad(account.id, version: account.version)).combined
    }

    /// The state `stored` holds, when it is `userId`'s at `version`, sealed with `key` in this format.
    static func opened(_ stored: [UInt8], of userId: UUID, version: Int, key: [UInt8]) -> UserAccount? {
        guard let box = try? AESGCM.SealedBox(combined: stored),
              let text = try? AESGCM.open(box, key: key, authenticating: aad(userId, version: version)),
              let account = try? CompactJSONDecoder().decode(UserAccount.self, from: text),
              account.id == userId, account.version == version
        else { return nil }
        return account
    }

    /// Deletes the user's snapshot (their erasure).
    static func deleteStatement(of userId: UUID) -> PostgresQuery {
        "DELETE FROM account_snapshots WHERE user_id = \(userId)"
    }

    private static func aad(_ userId: UUID, version: Int) -> [UInt8] {
        Array("tether account snapshot \(format) \(userId.lowercasedText) \(version)".utf8)
    }
}
