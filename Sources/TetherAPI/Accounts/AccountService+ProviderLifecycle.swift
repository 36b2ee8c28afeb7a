import Foundation
import TetherCore
import TetherPostgres

/// The commands behind providers' callbacks: a grant that ended, an account the provider deleted, the
/// status of a relay address.
extension AccountService {
    /// What became of the user a provider named.
    public enum ProviderOutcome: String, Sendable {
        /// Nobody is linked to that provider identity.
        case noUser = "no_user"
        /// The identity was unlinked and the sessions it started ended.
        case unlinked
        /// The provider was the user's only way in: the user was erased.
        case erased
        /// The provider's news is recorded on the user.
        case recorded
        /// Nothing had changed.
        case unchanged
    }

    /// The user signed in with `provider` as `uid`, if any.
    public func user(provider: String, uid: String) async throws -> UUID? {
        try await database.query(
            try AccountProjection.identityOwner(provider: provider, uid: uid, seal: try await database.readModelSeal())
        ).first?.decode("user_id")
    }

    /// The provider ended the person's grant: their identity goes and its sessions end; with
    /// `erasingIfOnly`, a user who had no other way in is erased instead. `recording` commits with
    /// whichever was written; nothing is written for `.noUser`, nor for `.unchanged` when the
    /// identity was gone by the time the command ran.
    public func endedByProvider(
        _ provider: String, uid: String, reason: String, erasingIfOnly: Bool, recording: [PostgresQuery] = [], context: CommandContext
    ) async throws -> ProviderOutcome {
        guard let userId = try await user(provider: provider, uid: uid) else { return .noUser }
        if erasingIfOnly {
            do {
                _ = try await erase(userId: userId, reason: reason, recording: recording, context: context) { $0.signsInOnly(with: provider, uid: uid) }
                return .erased
            } catch is ConditionNoLongerHolds {
                // Another way in exists: only the provider's identity goes.
            } catch let error as AccountError where error == .notFound {
                return .noUser // erased since it was looked up (the same request, sent twice at once)
            }
        }
        do {
            let unlinked = try await execute(user: .id(userId), known: { cache.entry(for: userId) }, writingAfter: recording, context) { account, _ in
                let events = account.endedByProvider(provider, uid: uid, reason: reason)
                return (events, !events.isEmpty)
            }.result
            return unlinked ? .unlinked : .unchanged
        } catch let error as AccountError where error == .notFound {
            return .noUser // erased since it was looked up
        }
    }

    /// The provider says whether mail to the address it gave reaches the person.
    public func providerEmailStatus(_ provider: String, uid: String, forwarding: Bool, context: CommandContext) async throws -> ProviderOutcome {
        guard let userId = try await user(provider: provider, uid: uid) else { return .noUser }
        let events = try await execute(userId, context) { account in
            let events = account.providerEmailStatus(provider, uid: uid, forwarding: forwarding)
            return (events, events.count)
        }.result
        return events == 0 ? .unchanged : .recorded
    }
}
