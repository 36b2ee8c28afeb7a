import Synchronization
import Foundation
import TetherCore
import TetherProviders

/// A sign-in with a provider credential, as every surface hands it to the command layer.
public struct SignInCommand: Sendable {
    /// The credential, decoded from the surface's wire form.
    public var credential: ProviderCredential
    /// The session to open, its secret already made in the surface's own format.
    public var session: NewSession
    /// Who sent it, from where, and its command id.
    public var context: CommandContext

    public init(credential: ProviderCredential, session: NewSession, context: CommandContext) {
        self.credential = credential
        self.session = session
        self.context = context
    }

    /// The normalized email a password sign-in names, for counting failures per account.
    var claimedPasswordEmail: String? {
        guard case .password(let email, _) = credential else { return nil }
        return ExternalIdentity.normalize(email)
    }

    /// `apple`, `facebook`, `google`, `password` or `anonymous`.
    var provider: String { credential.provider.rawValue }
}

/// A new password user, as a surface hands it over.
public struct SignUpCommand: Sendable {
    public var email: String
    public var password: String
    public var displayName: String?
    /// The session to open, its secret made in the surface's own format.
    public var session: NewSession
    public var context: CommandContext

    public init(email: String, password: String, displayName: String?, session: NewSession, context: CommandContext) {
        self.email = email
        self.password = password
        self.displayName = displayName
        self.session = session
        self.context = context
    }
}

/// A provider credential to link to a signed-in user.
public struct LinkCommand: Sendable {
    public var credential: ProviderCredential
    /// The signed-in user the identity is linked to.
    public var userId: UUID
    public var context: CommandContext
    /// When the caller signed in, for a surface whose tokens say so: a password added with a session older
    /// than ``UserAccount/recentSignInWindow`` is refused (`recent_login_required`), as a stolen token
    /// must not add a way in of its holder's choosing (an anonymous user, who cannot sign in again, may).
    public var authTime: Date?
    /// What else the command decides on the user after the link, in the same transaction.
    public var followUp: AccountService.FollowUp?
    /// For a password: its address becomes the user's email, unverified when it is another (Firebase's signUp with
    /// an `idToken`), instead of having to be the user's own (``UserAccount/checkPasswordAddress(_:pointer:)``).
    public var passwordBecomesTheEmail = false

    public init(
        credential: ProviderCredential, userId: UUID, context: CommandContext, authTime: Date? = nil,
        followUp: AccountService.FollowUp? = nil
    ) {
        self.credential = credential
        self.userId = userId
        self.context = context
        self.authTime = authTime
        self.followUp = followUp
    }
}

/// What a sign-in came to.
public enum SignInResult: Sendable {
    /// The session is open; `account` is the user's state after the sign-in.
    case signedIn(account: UserAccount, isNewUser: Bool)
    /// The user has second factors: the sign-in goes on at a challenge, with `pendingCredential`.
    case secondFactorRequired(userId: UUID, pendingCredential: String, factors: [MFAState.Factor])
    /// Another account holds the credential's email and this credential may not take it over: the
    /// person signs in with one of `signInMethods` and links this credential then (SEMANTICS §2).
    /// `/v1` answers 409 `account_exists_with_different_credential`; Firebase answers `needConfirmation`.
    case needsConfirmation(email: String, signInMethods: [String], owner: UUID?)
}

/// The command layer: one entry point per use case, no HTTP in it. Every surface (the `/v1` routes,
/// the seeds, and the compatible surfaces to come) decodes its wire form into a command, calls
/// this, and encodes the result in its own form; the limits, verification, giving a nonce back
/// after a server failure, the second-factor branch and opening the session happen here, once.
public struct AccountCommands: Sendable {
    public let accounts: AccountService
    let identities: (any IdentityVerification)?
    let limits: SignInLimits
    let pendingCredentials: MFAPendingCredentials
    let passwords: PasswordVerifier
    /// How many passwords were hashed (scrypt, the costliest work a request can ask for): `/metrics` shows it.
    let passwordHashes = PasswordHashCount()
    /// The provider-grant check a refresh makes now and then.
    let revalidation: GrantRevalidation?

    public init(
        accounts: AccountService, identities: (any IdentityVerification)?, limits: SignInLimits,
        pendingCredentials: MFAPendingCredentials, passwords: PasswordVerifier, revalidation: GrantRevalidation? = nil
    ) {
        self.revalidation = revalidation
        self.accounts = accounts
        self.identities = identities
        self.limits = limits
        self.pendingCredentials = pendingCredentials
        self.passwords = passwords
    }

    /// Creates a password user and opens their first session.
    ///
    /// Sign-ups are limited per client address before the password is hashed: each hash costs
    /// real work (scrypt), which must not be free to ask for in bulk.
    public func signUp(_ command: SignUpCommand) async throws -> UserAccount {
        let email = try Self.validate(email: command.email)
        try UserAccount.checkProfile(displayName: command.displayName, photoURL: nil)
        try await limits.reserveSignUp(from: command.context.metadata.clientIP)
        let hash = try await hashPassword(command.password)
        return try await accounts.signUp(
            email: email, passwordHash: hash, displayName: command.displayName, session: command.session,
            context: command.context)
    }

    /// Verifies a provider credential and links its identity to the signed-in user; answers the user after it.
    ///
    /// A password credential adds a password to a user who has none (an anonymous user's upgrade, or an
    /// Apple user's second way in): its email must be free, and its password is hashed here. Linking
    /// anything upgrades an anonymous user in place (same id, the `anonymous` identity dropped).
    public func link(_ command: LinkCommand) async throws -> UserAccount {
        switch command.credential {
        case .anonymous:
            throw AccountError.invalidRequest("An anonymous identity is not linked: sign in anonymously to make an anonymous user.")
        case .password(let email, let password):
            let address = Self.passwordAddress(email, becomesTheEmail: command.passwordBecomesTheEmail, pointer: "/credential/email")
            let steps = [address] + (command.followUp.map { [$0] } ?? [])
            let now = command.context.now
            let followUp: AccountService.FollowUp = { state in try state.deciding(steps, at: now) }
            return try await accounts.link(
                [try await passwordLink(
                    email: email, password: password, pointer: "/credential", authTime: command.authTime, context: command.context)],
                to: command.userId, context: command.context, followUp: followUp)
        default:
            // Under the sign-in limits: a throttled address's link is refused before its credential costs a provider call.
            return try await link(
                try await verify(command.credential, context: command.context), to: command.userId, context: command.context,
                followUp: command.followUp)
        }
    }

    /// The step that settles a linked password's address, on the state after the link (``LinkCommand/passwordBecomesTheEmail``);
    /// a refusal points at `pointer`. Every surface's password link takes this step.
    static func passwordAddress(_ email: String, becomesTheEmail: Bool = false, pointer: String? = nil) -> AccountService.FollowUp {
        guard becomesTheEmail else {
            return { state in
                try state.checkPasswordAddress(email, pointer: pointer)
                return []
            }
        }
        return { state in
            if state.email.map(ExternalIdentity.normalize) == ExternalIdentity.normalize(email) { return [] }
            return try state.changeEmail(to: email, verified: false)
        }
    }

    /// The code of an error that refuses the credential itself (counted by the limits); nil for any other.
    static func refusedCredential(_ error: any Error) -> String? {
        if let error = error as? AccountError {
            return error.reason == .invalidCredential || error.reason == .userDisabled ? error.code : nil
        }
        if let error = error as? ProviderError {
            return error.rejection != nil ? error.code : nil
        }
        return nil
    }

    /// The `amr` of a session opened with `provider` (RFC 8176 names a password `pwd`; providers are
    /// named as themselves), for the surfaces making the session.
    public static func authenticationMethods(provider: String) -> [String] {
        [provider == ProviderName.password.rawValue ? "pwd" : provider]
    }

    /// The password's rules live in ``PasswordVerifier``'s policy; this checks the address, found at
    /// `pointer` in the request, and answers it without the white space around it: what is stored and mailed to.
    @discardableResult
    static func validate(email: String, pointer: String = "/email") throws(AccountError) -> String {
        let trimmed = email.trimmingCharacters(in: .whitespaces)
        // One `@`, a local part, and a domain of two or more labels none of which is empty (`x@a@b.com`,
        // `y@.example.com` and `z@example..com` are no addresses: no mail reaches them, and firebase-admin
        // refuses to look them up).
        guard !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }),
              trimmed.count <= 254, let at = trimmed.firstIndex(of: "@"), at != trimmed.startIndex, !trimmed.contains(" ")
        else { throw .invalidRequest("email is not an email address", pointer: pointer) }
        let labels = trimmed[trimmed.index(after: at)...].split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, labels.allSatisfy({ !$0.isEmpty && !$0.contains("@") }) else {
            throw .invalidRequest("email is not an email address", pointer: pointer)
        }
        return trimmed
    }

    /// Signs in (or up) with a provider credential.
    ///
    /// A password attempt takes a place in the limits before its password is checked (a password
    /// can be guessed); a provider token is checked against the client address's recorded failures
    /// inside the sign-in's own transaction. A refused credential is counted and recorded.
    public func signIn(_ command: SignInCommand) async throws -> SignInResult {
        try await signIn(command, verified: nil)
    }

    /// Signs in with a credential the surface had verified first, through ``verify(_:context:)`` (Parse
    /// checks every provider of a request, and who owns them, before it picks the one to sign in with).
    public func signIn(_ command: SignInCommand, verified identity: ExternalIdentity) async throws -> SignInResult {
        try await signIn(command, verified: .some(identity))
    }

    /// Verifies a credential for a sign-in, counting a refused one against the client's limits like
    /// ``signIn(_:)`` does (past them, the answer is 429).
    public func verify(_ credential: ProviderCredential, context: CommandContext) async throws -> ExternalIdentity {
        let attempt = SignInLimits.Attempt(provider: credential.provider.rawValue, email: nil, metadata: context.metadata)
        try await limits.refuseIfRefusedLately(attempt)
        do {
            return try await verify(credential)
        } catch {
            try await countFailure(error, of: attempt, checkedLimits: false)
            throw error
        }
    }

    /// Checks a password without signing in (Parse's `verifyPassword`, an app's check before a sensitive step): under
    /// a password sign-in's limits, keyed by the normalized address as a sign-in's are, a wrong one counted and
    /// recorded as a failed sign-in, and so is what `account` refuses of the verified identity (a disabled user).
    /// Opens no session and changes nothing; answers what `account` found.
    public func verifyPassword(
        email: String, password: String, context: CommandContext, account: (ExternalIdentity) async throws -> UserAccount
    ) async throws -> UserAccount {
        let attempt = SignInLimits.Attempt(
            provider: ProviderName.password.rawValue, email: ExternalIdentity.normalize(email), metadata: context.metadata)
        let reservation = try await limits.reserve(attempt)
        do {
            let found = try await account(try await verify(.password(email: email, password: password)))
            await limits.release(reservation)
            return found
        } catch {
            // Counted before the place goes back, as a sign-in's failure is (its place held meanwhile).
            try? await countFailure(error, of: attempt, checkedLimits: true)
            await limits.release(reservation)
            throw error
        }
    }

    /// Links an identity the surface verified with ``verify(_:context:)`` to the signed-in user; with
    /// `replacing`, another identity of its provider already linked gives way to it in the same command.
    public func link(
        _ identity: ExternalIdentity, replacing: Bool = false, to userId: UUID, context: CommandContext,
        followUp: AccountService.FollowUp? = nil
    ) async throws -> UserAccount {
        try await link([AccountService.Link(identity, replacing: replacing)], to: userId, context: context, followUp: followUp)
    }

    /// A password to link on `email`: the address and the password checked against the policy (a refusal
    /// points at `email` and `password` under `pointer`), the password hashed. With the caller's `authTime`,
    /// the command holds a user who has another way in to a recent sign-in (``UserAccount/checkPasswordAddition(authTime:now:)``).
    ///
    /// The hash takes a place of the client address's sign-ups (``SignInLimits/reserveSignUp(from:)``) first, as a
    /// sign-up's does: a link refused after it (an address another account holds) has cost its work all the same.
    public func passwordLink(
        email: String, password: String, pointer: String = "", authTime: Date? = nil, context: CommandContext
    ) async throws -> AccountService.Link {
        let email = try Self.validate(email: email, pointer: pointer + "/email")
        try checkPassword(password, pointer: pointer + "/password")
        try await limits.reserveSignUp(from: context.metadata.clientIP)
        let identity = ExternalIdentity(
            provider: ProviderName.password.rawValue, uid: ExternalIdentity.normalize(email), email: email, isEmailVerified: false)
        return AccountService.Link(identity, passwordHash: try await hashPassword(password), authTime: authTime)
    }

    /// Links identities the surface verified with ``verify(_:context:)`` (and passwords of
    /// ``passwordLink(email:password:pointer:)``) to the signed-in user in one command, between what it decides
    /// before and after them (``AccountService/link(_:to:context:preceding:followUp:)``).
    public func link(
        _ links: [AccountService.Link], to userId: UUID, context: CommandContext,
        preceding: AccountService.FollowUp? = nil, followUp: AccountService.FollowUp? = nil
    ) async throws -> UserAccount {
        try await releasingOnFailure(links.filter { $0.passwordHash == nil }.map(\.identity)) {
            try await accounts.link(links, to: userId, context: context, preceding: preceding, followUp: followUp)
        }
    }

    /// The stored form of a new password (checked against the policy, then hashed off the cooperative pool).
    public func hashPassword(_ password: String) async throws -> String {
        passwordHashes.count.add(1, ordering: .relaxed)
        return try await BlockingWork.run { [passwords] in try passwords.hash(password) }
    }

    /// An admin sets a user's password: added on the user's email when they have none; every earlier token ends.
    public func setPassword(userId: UUID, password: String, context: CommandContext) async throws -> UserAccount {
        let hash = try await hashPassword(password)
        return try await accounts.setPassword(userId: userId, passwordHash: hash, context: context.asOfNow)
    }

    /// Whether `text` is an email address as sign-ups require it.
    public static func isEmail(_ text: String) -> Bool {
        (try? validate(email: text)) != nil
    }

    /// Checks a new password against the policy without hashing it, so a surface can refuse a request
    /// before any of its commands writes; a refusal points at `pointer`, the member of the request it came in.
    public func checkPassword(_ password: String, pointer: String = "/password") throws(ProviderError) {
        try passwords.policy.validate(password, pointer: pointer)
    }

    private func signIn(_ command: SignInCommand, verified: ExternalIdentity?) async throws -> SignInResult {
        let attempt = SignInLimits.Attempt(
            provider: command.provider, email: command.claimedPasswordEmail, metadata: command.context.metadata)
        if case .anonymous = command.credential {
            // An anonymous sign-in asks for nothing but a new user: those are limited per address like sign-ups.
            try await limits.reserveSignUp(from: command.context.metadata.clientIP)
        }
        guard attempt.email != nil else { return try await signIn(command, attempt, reservation: nil, verified: verified) }
        let reservation = try await limits.reserve(attempt)
        do {
            // A sign-in that commits gives the place back in its own transaction.
            return try await signIn(command, attempt, reservation: reservation, verified: verified)
        } catch {
            await limits.release(reservation)
            throw error
        }
    }

    private func signIn(
        _ command: SignInCommand, _ attempt: SignInLimits.Attempt, reservation: SignInLimits.Reservation?, verified: ExternalIdentity?
    ) async throws -> SignInResult {
        var attempt = attempt
        let identity: ExternalIdentity
        if let verified {
            identity = verified
        } else {
            try await limits.refuseIfRefusedLately(attempt)
            do {
                identity = try await verify(command.credential)
            } catch {
                try await countFailure(error, of: attempt, checkedLimits: reservation != nil)
                throw error
            }
        }
        attempt.verifiedUID = identity.uid
        let outcome: SignInOutcome
        do {
            outcome = try await releasingOnFailure([identity]) {
                try await accounts.signIn(
                    identity, session: command.session, context: command.context, check: limits.check(attempt, releasing: reservation))
            }
        } catch let refusal as SignInLimits.Refusal {
            try await limits.refuse(attempt, refusal)
        } catch let error as AccountError where error.reason == .accountExistsWithDifferentCredential {
            return .needsConfirmation(email: error.email ?? "", signInMethods: error.signInMethods, owner: error.owner)
        } catch {
            try await countFailure(error, of: attempt, checkedLimits: true)
            throw error
        }
        if let challenge = outcome.challenge {
            let credential = try await pendingCredentials.issue(
                userId: outcome.userId, challengeId: challenge.id,
                issuedAt: challenge.expiresAt.addingTimeInterval(-UserAccount.challengeLifetime), expiresAt: challenge.expiresAt)
            return .secondFactorRequired(userId: outcome.userId, pendingCredential: credential, factors: outcome.factors)
        }
        guard let account = outcome.account else { throw AccountError.notFound }
        return .signedIn(account: account, isNewUser: outcome.isNewUser)
    }

    /// Rotates a `/v1` refresh token (``AccountService/refresh(presentedHash:newHash:presentedJKT:kind:context:)``),
    /// then checks the provider grant behind the session when it is due (``GrantRevalidation``): a grant
    /// the provider ended refuses the refresh with `invalid_token`.
    public func refresh(
        presentedHash: String, newHash: String, presentedJKT: String?, context: CommandContext
    ) async throws -> (userId: UUID, sessionId: UUID, amr: [String], authTime: Date, jkt: String?, account: UserAccount) {
        let rotated = try await accounts.refresh(presentedHash: presentedHash, newHash: newHash, presentedJKT: presentedJKT, context: context)
        try await revalidation?.check(rotated.account, session: rotated.sessionId, context: context)
        return rotated
    }

    /// The live session of a secret that does not rotate (``AccountService/liveSession(secretHash:kind:)``), its
    /// provider grant checked when due, like ``refresh(presentedHash:newHash:presentedJKT:context:)``.
    public func liveSession(
        secretHash: String, kind: SessionSecretKind, context: CommandContext
    ) async throws -> (account: UserAccount, session: UserAccount.Session) {
        let live = try await accounts.liveSession(secretHash: secretHash, kind: kind)
        try await revalidation?.check(live.account, session: live.session.id, context: context)
        return live
    }

    /// Deletes the sign-in limits' and the code sends' rows past their windows; answers how many went.
    public func sweepExpiredLimitRows() async throws -> Int {
        try await limits.sweepExpired() + accounts.sweepExpiredSends()
    }

    /// Loads the database's keys the commands hash with (the limits' rows' names), made on first use: the first
    /// commands then pay nothing for them.
    public func loadKeys() async throws {
        try await limits.loadHashKey()
        _ = try await accounts.limitsKey.bytes(on: accounts.database)
    }

    /// Verifies `credential` with the configured identity providers.
    func verify(_ credential: ProviderCredential) async throws -> ExternalIdentity {
        guard let identities else {
            throw ProviderError.unsupportedProvider.with(detail: "No identity provider is configured on this server.")
        }
        return try await identities.verify(credential)
    }

    /// Runs the command `identities` were verified for; when it fails, the tokens' nonces are given back:
    /// nothing was written with them, and the client may well present the same token again. After a failure
    /// of the server (the database going away) it retries; after a refusal it does what the answer says, such
    /// as signing in with the account's own method and then linking this credential, or linking it to another
    /// user. A nonce spent on a command that never happened must not turn that into a replay.
    func releasingOnFailure<T>(_ identities: [ExternalIdentity], _ command: () async throws -> T) async throws -> T {
        do {
            return try await command()
        } catch {
            await release(identities)
            throw error
        }
    }

    /// `identity`, verified earlier and set aside (a Firebase pending token's), with `nonce` spent for it now, so
    /// that a failed command gives it back again; nil when `nonce` is spent already (what it stands for was taken
    /// before). An address refused lately is refused as a verification would refuse it.
    public func respend(_ identity: ExternalIdentity, nonce: UsedNonce, context: CommandContext) async throws -> ExternalIdentity? {
        try await limits.refuseIfRefusedLately(SignInLimits.Attempt(provider: identity.provider, email: nil, metadata: context.metadata))
        guard let identities, try await identities.spend(nonce) else { return nil }
        var identity = identity
        identity.spentNonce = nonce
        return identity
    }

    /// Gives back the nonces of credentials verified for a request that then did nothing with them (a surface
    /// refused it, or another of its credentials, before any command ran): see ``releasingOnFailure(_:_:)``.
    public func release(_ verified: [ExternalIdentity]) async {
        for identity in verified { await identities?.release(identity) }
    }

    /// Counts and records a sign-in refused for its credential ("these credentials do not get you in"),
    /// as opposed to malformed requests, conflicts to resolve, or failures of the server. A provider
    /// attempt's limits are checked first (it reserved nothing): past them, the answer is 429.
    private func countFailure(_ error: any Error, of attempt: SignInLimits.Attempt, checkedLimits: Bool) async throws {
        guard let code = Self.refusedCredential(error) else { return }
        if !checkedLimits { _ = try await limits.reserve(attempt) }
        // A record that cannot be written must not turn the client's 401 into a 500.
        try? await limits.recordFailure(attempt, reason: code)
    }
}

/// A count of the passwords hashed, shared by every copy of ``AccountCommands``.
final class PasswordHashCount: Sendable {
    let count = Atomic<Int>(0)
}
