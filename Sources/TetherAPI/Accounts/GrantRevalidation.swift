import Foundation
import TetherCore
import TetherProviders

/// Checks, on a refresh, that the provider grant a session came from still stands: at most once per
/// ``interval`` per session (`TETHER_PROVIDER_REVALIDATE_INTERVAL`, 24 h by default; Apple asks for no
/// more than once a day, which holds whatever the interval). Facebook sessions are checked with `debug_token` on the stored access token,
/// Apple sessions by validating the stored refresh token.
///
/// A grant the provider says is gone ends the session (`provider_revoked`): the refresh is refused and
/// the client signs in again. A provider out of reach changes nothing but the record: the session goes
/// on and is checked on a later refresh (a network blip never signs anyone out).
public struct GrantRevalidation: Sendable {
    let accounts: AccountService
    let grants: ProviderGrantCalls?
    public let interval: TimeInterval
    /// The least time between two checks of one provider's grant: Apple's refresh tokens are validated at
    /// most once a day (``appleMinimum``), whatever the interval.
    public let minimums: [String: TimeInterval]

    /// Apple's rule: at most one validation of a refresh token a day.
    public static let appleMinimum: TimeInterval = 24 * 60 * 60

    public init(
        accounts: AccountService, grants: ProviderGrantCalls?, interval: TimeInterval,
        minimums: [String: TimeInterval] = ["apple": GrantRevalidation.appleMinimum]
    ) {
        self.accounts = accounts
        self.grants = grants
        self.interval = interval
        self.minimums = minimums
    }

    /// Checks session `sessionId` of `account` (its state after the refresh) when it is due; throws
    /// `invalid_token` when the provider ended the grant (the session is ended first).
    public func check(_ account: UserAccount, session sessionId: UUID, context: CommandContext) async throws {
        guard let grants, let due = account.grantToCheck(session: sessionId, now: context.now, interval: interval, minimums: minimums),
              grants.handles(due.provider) else { return }
        let status = await grants.check(due.provider, grant: due.grant)
        // A command of its own, with an id derived from the refresh's, so a retried refresh records it once.
        let recorded = CommandContext(
            commandId: AccountEventCodec.eventID(command: context.commandId, index: 30_000), metadata: context.metadata, now: context.now)
        do {
            _ = try await accounts.execute(account.id, recorded) { current in
                (current.grantChecked(session: sessionId, provider: due.provider, result: status.rawValue), ())
            }
        } catch where status != .revoked {
            // A refresh has rotated its token before this check: the new one must reach the client, whose
            // retry with the old one would end the session as a reuse. Unrecorded, the check is due again
            // on the next refresh. A revoked grant is different: it refuses the refresh however it ends.
            return
        }
        if status == .revoked { throw AccountError.invalidToken }
    }
}
