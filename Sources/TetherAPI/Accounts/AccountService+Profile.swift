import Foundation
import TetherCore
import TetherPostgres

/// The admin API's user management (Firebase's `accounts`, `accounts:update`): users made without a
/// sign-in, profiles, developer claims and passwords set by an admin.
extension AccountService {
    /// Makes a user as an admin describes them: one transaction of two round trips. Its email must be free
    /// when the user gets a password or the policy is one account per email; a custom uid must be free.
    public func createUser(_ profile: NewUserProfile, context: CommandContext) async throws -> UserAccount {
        let normalized = profile.email.map(ExternalIdentity.normalize)
        let exclusive = profile.passwordHash != nil || emailPolicy == .oneAccountPerEmail
        return try await retrying { attempt in
            try await database.withTransactionJob { transaction in
                var reads: [PostgresQuery] = ["SELECT now() AS now, pg_current_xact_id() AS tx"]
                // The address's lock before the lookups, as a sign-in and a link take it: a link of one of the
                // identities that commits first is then found (credential_already_in_use), not only its address.
                let locked = exclusive ? normalized : nil
                if let locked { reads.append(Self.lockEmail(locked)) }
                let customOwner = reads.count
                if let uid = profile.customUID {
                    reads.append(try AccountProjection.identityOwner(provider: UserAccount.customProvider, uid: uid, seal: readModels))
                }
                let identities = reads.count
                for identity in profile.identities {
                    reads.append(try AccountProjection.identityOwner(provider: identity.provider, uid: identity.uid, seal: readModels))
                }
                if let locked { reads.append(try Self.userWithEmail(locked, seal: readModels)) }
                let rows = try transaction.begin(reads)
                if profile.customUID != nil, !rows[customOwner].isEmpty { throw AccountError.credentialAlreadyInUse }
                if rows[identities..<(identities + profile.identities.count)].contains(where: { !$0.isEmpty }) {
                    throw AccountError.credentialAlreadyInUse
                }
                if locked != nil, !(rows.last?.isEmpty ?? true) { throw AccountError.emailAlreadyInUse }
                let userId = AccountEventCodec.eventID(command: context.commandId, index: 10_000 + attempt)
                let unknown = Unknown(now: try rows[0][0].decode("now"), transactionId: try rows[0][0].decode("tx"))
                return try commit(try UserAccount.create(id: userId, profile: profile), on: .new(userId, in: unknown), context, in: transaction)
            }
        }
    }

    /// Sets or clears the display name and photo URL, and the email's verification.
    @discardableResult
    public func updateProfile(
        userId: UUID, displayName: String?, photoURL: String?, clearing cleared: Set<String>, emailVerified: Bool?, context: CommandContext
    ) async throws -> UserAccount {
        try await change(userId, context) {
            try $0.updateProfile(displayName: displayName, photoURL: photoURL, clearing: cleared, emailVerified: emailVerified)
        }
    }

    /// An admin sets a user's email: one transaction of two round trips, under the new address's lock; the
    /// address must be free (another account holding it, or signing in with it, is `email_already_in_use`).
    @discardableResult
    public func changeEmail(userId: UUID, to email: String, verified: Bool, context: CommandContext) async throws -> UserAccount {
        try await update(userId: userId, claimingEmail: email, context: context, steps: [{ try $0.changeEmail(to: email, verified: verified) }])
    }

    /// Several decisions about one user made as one command (an admin's Firebase `accounts:update` that
    /// renames, unlinks and disables at once): each step decides on the state the ones before it leave, and
    /// they are all written, in one transaction, or none is.
    ///
    /// With `claimingEmail`, the address's holders are read under its lock in the first round trip, and
    /// another holding it, or signing in with it, is `email_already_in_use`; so is a password identity
    /// that another account already signs in with (the identities' key refuses it at commit).
    @discardableResult
    public func update(userId: UUID, claimingEmail email: String? = nil, context: CommandContext, steps: [FollowUp]) async throws -> UserAccount {
        var reads: [PostgresQuery] = []
        if let email { reads = try Self.emailHolderReads(ExternalIdentity.normalize(email), seal: try await database.readModelSeal()) }
        return try await mappingEmailConstraints {
            try await execute(user: .id(userId), known: { cache.entry(for: userId) }, reads: reads, context) { account, rows in
                if email != nil, try Self.emailHolders(rows).contains(where: { $0 != userId }) { throw AccountError.emailAlreadyInUse }
                return (try account.deciding(steps, at: context.now), ())
            }.account
        }
    }

    /// Replaces the developer claims (a JSON object's text; `{}` clears them).
    @discardableResult
    public func setCustomClaims(userId: UUID, json: String, context: CommandContext) async throws -> UserAccount {
        try await change(userId, context) { try $0.setCustomClaims(json) }
    }

    /// An admin sets a user's password (hashed by the caller); every earlier token stops working.
    @discardableResult
    public func setPassword(userId: UUID, passwordHash: String, context: CommandContext) async throws -> UserAccount {
        try await update(userId: userId, context: context, steps: [{ try $0.setPassword(passwordHash, now: context.now) }])
    }
}
