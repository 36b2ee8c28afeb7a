import Foundation
import TetherCore
import TetherPostgres

/// The transactions of the email flows: issuing a mailed code, and using one.
extension AccountService {
    /// A code to issue: its id, purpose, address and expiry, and its hash when it was made before the
    /// transaction (for a user known beforehand).
    struct NewEmailCode: Sendable {
        var id: UUID
        /// Nil: the code is made in the command, for the user it finds.
        var hash: String?
        var purpose: EmailCodePurpose
        /// Nil: the user's current address (known only once their stream is read).
        var email: String?
        /// The normalized address the user must still have (the one a reset was asked for).
        var requiredAddress: String?
        var expiresAt: Date
        /// Whether a verification code may go to an address already verified (an admin's link).
        var allowsVerifiedAddress = false
    }

    /// Issues `code` to the user `user` names (an SQL uuid expression): one transaction of two round trips.
    /// An email change's new address must be free, checked under its lock. Answers the user after it, the
    /// address the code is bound to, and the code when the command made it.
    func issue(_ code: NewEmailCode, user: PostgresQuery, context: CommandContext)
        async throws -> (account: UserAccount, email: String, made: (code: String, hash: String)?)
    {
        let seal = try await database.readModelSeal()
        let reads = code.purpose == .changeEmail
            ? try code.email.map { try Self.emailHolderReads(ExternalIdentity.normalize($0), seal: seal) } ?? [] : []
        let result = try await execute(user: .named(user), reads: reads, context) { account, rows in
            if code.purpose == .changeEmail, try Self.emailHolders(rows).contains(where: { $0 != account.id }) {
                throw AccountError.emailAlreadyInUse
            }
            guard let email = code.email ?? account.email,
                  code.requiredAddress.map({ $0 == account.email.map(ExternalIdentity.normalize) }) ?? true else {
                throw AccountError.invalidRequest("The account has no email address to send a code to.")
            }
            let made = code.hash == nil ? EmailCodeFormat.make(for: account.id) : nil
            let events = try account.issueEmailCode(
                code.purpose, codeId: code.id, codeHash: code.hash ?? made?.hash ?? "", email: email, expiresAt: code.expiresAt,
                allowingVerifiedAddress: code.allowsVerifiedAddress)
            return (events, (email, made))
        }
        return (result.account, result.result.0, result.result.1)
    }

    /// Records that the mail of a code could not be handed over (its own small command).
    func recordDeliveryFailure(of codeId: UUID, userId: UUID, reason: String, context: CommandContext) async {
        var failed = context
        failed.commandId = AccountEventCodec.eventID(command: context.commandId, index: 40_000)
        _ = try? await change(userId, failed) { _ in [.emailCodeDeliveryFailed(.init(codeId: codeId, reason: reason))] }
    }

    /// Uses the code hashing to `codeHash` of user `userId` for one of `purposes`: `act` decides what it
    /// does on the user's state. A refused code is recorded (`EmailCodeRefused`, or `EmailCodeExpired`),
    /// then answered with its error; so is a signed-in `caller` presenting someone else's code.
    ///
    /// One transaction of two round trips; an email change or its undo first reads the user's state
    /// once more, to lock and check the address the code moves the account to.
    func use(
        codeHash: String, of userId: UUID, for purposes: Set<EmailCodePurpose>, presentedFor: EmailCodePurpose, caller: UUID? = nil,
        context: CommandContext, act: @escaping @Sendable (UserAccount, EmailCode) throws -> [AccountEvent]
    ) async throws -> (account: UserAccount, code: EmailCode) {
        var reads: [PostgresQuery] = []
        if !purposes.isDisjoint(with: [.changeEmail, .undoEmailChange]) {
            let peeked: EmailCode?
            do {
                peeked = try await read(userId).emailCodes.values.first(where: { $0.codeHash == codeHash })
            } catch let error as AccountError where error.reason == .notFound {
                peeked = nil
            }
            if let peeked, [.changeEmail, .undoEmailChange].contains(peeked.purpose), let email = peeked.email {
                reads = try Self.emailHolderReads(ExternalIdentity.normalize(email), seal: try await database.readModelSeal())
            }
        }
        let result = try await namingNoOne { try await mappingEmailConstraints { try await execute(user: .id(userId), known: { cache.entry(for: userId) }, reads: reads, context) {
            account, rows -> (events: [AccountEvent], result: Result<EmailCode, AccountError>) in
            if let caller, caller != account.id {
                // Someone else's real code in a signed-in caller's hands is worth recording; a made-up one is not.
                let stolen = account.emailCodes.values.first { $0.codeHash == codeHash }
                return (stolen.map { $0.refusal("other_user", presentedFor: presentedFor, by: caller) } ?? [],
                        .failure(.invalidCode(AccountError.unknownEmailCodeDetail)))
            }
            let (code, refusal) = account.checkEmailCode(codeHash, for: purposes, presentedFor: presentedFor, now: context.now)
            if let refusal { return (refusal.events, .failure(refusal.error)) }
            guard let code else { return ([], .failure(.invalidCode(AccountError.unknownEmailCodeDetail))) }
            if [.changeEmail, .undoEmailChange].contains(code.purpose) {
                // Fail closed: the address is checked under its lock, or the command does not move the account.
                guard rows.count >= 3 else { throw AccountError.invalidCode(AccountError.unknownEmailCodeDetail) }
                if try Self.emailHolders(rows).contains(where: { $0 != account.id }) { throw AccountError.emailAlreadyInUse }
            }
            return (try act(account, code), .success(code))
        } } }
        return (result.account, try result.result.get())
    }

    /// A password identity moved to an address another account signs in with: the address is taken.
    func mappingEmailConstraints<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresError where error.isUniqueViolation && error.constraint == "identities_provider_uid_key" {
            throw AccountError.emailAlreadyInUse
        }
    }

    /// A code naming a user who does not exist is a code that matches nothing, like any other wrong code.
    private func namingNoOne<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as AccountError where error.reason == .notFound {
            throw AccountError.invalidCode(AccountError.unknownEmailCodeDetail)
        }
    }

    /// The reads that lock `normalized` and find who holds it (``emailHolders(_:)``).
    static func emailHolderReads(_ normalized: String, seal: ReadModelSeal) throws -> [PostgresQuery] {
        [
            lockEmail(normalized), try userWithEmail(normalized, seal: seal),
            try AccountProjection.identityOwner(provider: "password", uid: normalized, seal: seal),
        ]
    }

    /// Whether another user than `userId` holds `normalized` now: a look before an email change takes a mail of the
    /// address's allowance, so that a refused change spends none (the change's own transaction checks again, under
    /// the address's lock).
    func isEmail(_ normalized: String, heldByAnotherThan userId: UUID) async throws -> Bool {
        let seal = try await database.readModelSeal()
        let rows = try await database.withTransactionJob { [reads = try Self.emailHolderReads(normalized, seal: seal)] in try $0.runAlone(reads) }
        return try Self.emailHolders(rows).contains { $0 != userId }
    }

    /// The users holding an address, from the rows of ``emailHolderReads(_:)``.
    static func emailHolders(_ rows: [PostgresRows]) throws -> [UUID] {
        guard rows.count >= 3 else { return [] }
        return try rows[1].map { try $0.decode("id", as: UUID.self) } + rows[2].map { try $0.decode("user_id", as: UUID.self) }
    }

    /// The user who gets a password reset for `normalized`: the one signing in with it and a password,
    /// else the oldest holding it (an SQL uuid expression, for ``issue(_:user:known:context:)``).
    static func resetOwner(of normalized: String, seal: ReadModelSeal) throws -> PostgresQuery {
        """
        SELECT coalesce((\(try AccountProjection.identityOwner(provider: "password", uid: normalized, seal: seal))),
                        (\(try userWithEmail(normalized, seal: seal))))
        """
    }
}
