import Foundation
import Synchronization
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherProviders

/// Password reset, email verification and email change, as every surface calls them: codes are
/// issued and used by the account's own commands (events in its stream), mails go to the mail
/// sender, and links start from `TETHER_PUBLIC_URL`.
///
/// A "send me a code" request about an address (a password reset) answers the same whether or not
/// an account uses it, and whether or not its mail could be sent: the limits count the address
/// either way, and a mail that could not be handed over is recorded in the account's history
/// (`EmailCodeDeliveryFailed`) rather than told to a stranger. Requests of a signed-in user about
/// themselves say when their mail could not be sent (503 `mail_unavailable`), as SMS codes do.
public struct EmailFlows: Sendable {
    /// Tasks started by a request that has already been answered.
    final class PendingWork: Sendable {
        private let tasks = Mutex<[UUID: Task<Void, Never>]>([:])

        func add(_ task: Task<Void, Never>) {
            let id = UUID.random()
            tasks.withLock { $0[id] = task }
            Task { [self] in
                await task.value
                _ = tasks.withLock { $0.removeValue(forKey: id) }
            }
        }

        func wait() async {
            while let next = tasks.withLock({ $0.values.first }) {
                await next.value
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    /// How the links of one surface look, so that a mail sends people where its SDK expects.
    public enum LinkStyle: Sendable, Hashable {
        /// `<base>/actions/<page>?code=<code>`.
        case tether
        /// Parse Server's: `<base>/parse/apps/<appId>/request_password_reset?token=…&username=…` and
        /// `…/verify_email?…`; they redirect to the `/actions` pages.
        case parse(appID: String)
        /// The Firebase action handler's query: `<base>/actions/<page>?mode=<mode>&oobCode=<code>&lang=<locale>`.
        case firebase
    }

    /// Who asks, from where, and for which surface.
    public struct Request: Sendable {
        public var context: CommandContext
        public var locale: String
        public var style: LinkStyle
        /// The request's `Host`, the links' base under `tether dev` when `TETHER_PUBLIC_URL` is unset.
        public var host: String?

        public init(context: CommandContext, locale: String? = nil, style: LinkStyle = .tether, host: String? = nil) {
            self.context = context
            self.locale = Self.locale(locale)
            self.style = style
            self.host = host
        }

        /// The first language tag of `text` (an `Accept-Language` value or a client's choice); `en` when none.
        static func locale(_ text: String?) -> String {
            let first = text?.split(separator: ",").first?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces) ?? ""
            let valid = !first.isEmpty && first.count <= 35 && first.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            return valid ? first : "en"
        }
    }

    /// A code handed to an admin instead of mailed (Firebase's `returnOobLink`).
    public struct GeneratedLink: Sendable {
        public var code: String
        public var link: String
        public var email: String
    }

    public let commands: AccountCommands
    var accounts: AccountService { commands.accounts }
    /// Nil: no mail can be sent, and every flow that mails answers 503 `mail_unavailable`.
    let mail: (any MailSender)?
    let publicURL: URL?
    /// `tether dev`: links may start from the request's `Host`, and generated links are kept in the outbox.
    let development: Bool
    let passwordResetLifetime: TimeInterval
    let verificationLifetime: TimeInterval
    let logger: Logger

    /// `tether dev`'s outbox, when the mails go there.
    public var devOutbox: DevMailOutbox? { development ? mail as? DevMailOutbox : nil }

    /// Whether a mail sender is configured (the flows that mail are on).
    public var sendsMail: Bool { mail != nil }

    /// Mails a user or an address may be sent in ``mailWindow``.
    public static let mailsPerAddress = 5
    public static let mailsPerUser = 10
    public static let mailWindow: TimeInterval = 60 * 60

    public init(
        commands: AccountCommands, mail: (any MailSender)?, publicURL: URL?, development: Bool,
        passwordResetLifetime: TimeInterval = UserAccount.defaultPasswordResetCodeLifetime,
        verificationLifetime: TimeInterval = UserAccount.defaultEmailVerificationCodeLifetime, logger: Logger = Logger(sink: .discarding)
    ) {
        self.commands = commands
        self.mail = mail
        self.publicURL = publicURL
        self.development = development
        self.passwordResetLifetime = passwordResetLifetime
        self.verificationLifetime = verificationLifetime
        self.logger = logger
    }

    // MARK: Sending codes

    /// Mails a password reset code to `email`'s account, if there is one: the same answer either way.
    public func requestPasswordReset(email: String, _ request: Request) async throws {
        try await mailCode(.passwordReset, toOwnerOf: email, revealing: false, request)
    }

    /// Mails a code of `purpose` (a reset, or a verification) to the account holding `email`.
    ///
    /// - Parameter revealing: whether the caller may learn about the account (an admin, or Parse's master
    ///   key): then no account is `not_found`, a verified address `email_already_verified`, a failed mail
    ///   `mail_unavailable`. Otherwise every one of those answers like a mail that went.
    public func mailCode(_ purpose: EmailCodePurpose, toOwnerOf email: String, revealing: Bool, _ request: Request) async throws {
        try AccountCommands.validate(email: email)
        let mail = try sender()
        let normalized = ExternalIdentity.normalize(email)
        do {
            _ = try linkRoot(request)
        } catch {
            // A mail that could hold no link gets no code, and takes nothing from the address's allowance; a caller
            // who may not learn about the address is answered like any other.
            guard !revealing else { throw error }
            logger.warn("no code was issued: its mail could hold no link", [("purpose", purpose.rawValue)])
            return
        }
        try await accounts.reserveSend(
            .mail, to: [normalized], userId: nil, perAddress: Self.mailsPerAddress, perUser: Self.mailsPerUser, window: Self.mailWindow,
            now: request.context.now,
            refusal: "Too many mails to this address; wait before asking for another.")
        let code = newCode(purpose, for: nil, lifetime: lifetime(of: purpose), request)
        let owner = try AccountService.resetOwner(of: normalized, seal: try await accounts.database.readModelSeal())
        let send = { [self] () async throws in
            try await issueAndDeliver(code, to: owner, requiring: normalized, mail: mail, request)
        }
        guard revealing else {
            // The answer must not wait for what only a known address costs (the command, the webhook's
            // retries): it goes now, and the code is issued and mailed after it.
            let pending = Task { [logger] in
                do {
                    try await send()
                } catch let error as AccountError where [.notFound, .userDisabled, .invalidRequest, .emailAlreadyVerified].contains(error.reason) {
                    // No account (or none that could use it): nothing is sent.
                } catch let error as SendFailure {
                    logger.warn("a mail with a code could not be sent", [("purpose", purpose.rawValue), ("reason", error.reason)])
                } catch {
                    logger.warn("a code could not be issued", [("purpose", purpose.rawValue), ("error", String(describing: error))])
                }
            }
            inFlight.add(pending)
            return
        }
        do {
            try await send()
        } catch let error as SendFailure {
            throw error.underlying
        }
    }

    /// Codes being issued and mailed after their answer went; ``finishSending()`` waits for them.
    let inFlight = PendingWork()

    /// Waits for the codes whose answer already went to be issued and mailed (a server stopping, a test).
    public func finishSending() async {
        await inFlight.wait()
    }

    /// Mails a code proving the signed-in user's address.
    public func sendVerification(userId: UUID, _ request: Request) async throws {
        let mail = try sender()
        // Counted against the address too (five an hour), as every other mail to it is: an account made with
        // someone else's address must not send that inbox more than its owner's own requests can.
        let account = try await accounts.read(userId)
        try Self.refuseBeforeCounting(.verifyEmail, by: account, to: account.email ?? "", request)
        try await reserveUserSend(userId, request, address: account.email.map(ExternalIdentity.normalize))
        let code = newCode(.verifyEmail, for: userId, lifetime: verificationLifetime, request)
        try await issueAndDeliverReporting(code, to: "\(userId)", mail: mail, request)
    }

    /// Mails the signed-in user's new address a code that moves the account to it (a recent sign-in is
    /// required). Nothing changes until it is used; the new address must be free then as now.
    public func requestEmailChange(userId: UUID, to newEmail: String, authTime: Date, _ request: Request) async throws {
        let newEmail = try AccountCommands.validate(email: newEmail)
        try UserAccount.requireRecentSignIn(authTime: authTime, now: request.context.now)
        let mail = try sender()
        // Before the address is looked up: an anonymous user's change is refused whatever it names, and so is one to
        // the account's own address.
        try Self.refuseBeforeCounting(.changeEmail, by: try await accounts.read(userId), to: newEmail, request)
        // An address another account holds is refused without spending one of that address's mails (a stranger's
        // refused changes would otherwise use up its owner's password resets for the hour), but with one of the
        // caller's: each answer says whether the address has an account, and asking must stay limited.
        let normalized = ExternalIdentity.normalize(newEmail)
        if try await accounts.isEmail(normalized, heldByAnotherThan: userId) {
            try await reserveUserSend(userId, request)
            throw AccountError.emailAlreadyInUse
        }
        try await reserveUserSend(userId, request, address: normalized)
        var code = newCode(.changeEmail, for: userId, lifetime: verificationLifetime, request)
        code.email = newEmail
        try await issueAndDeliverReporting(code, to: "\(userId)", mail: mail, request)
    }

    /// What the command would refuse `account` a code of `purpose` to `email` for (an address verified already, the
    /// account's own address for a change, an anonymous user's change), refused before the send takes a place of the
    /// address's or the user's: a request that mails nothing spends none of their mails. The command decides again
    /// under the user's lock.
    static func refuseBeforeCounting(_ purpose: EmailCodePurpose, by account: UserAccount, to email: String, _ request: Request) throws {
        _ = try account.issueEmailCode(purpose, codeId: UUID(), codeHash: "", email: email, expiresAt: request.context.now)
    }

    /// Issues a code of `purpose` for the user holding `email` and answers its link instead of mailing
    /// it (an admin's `generate_password_reset_link`). `newEmail` is the address of an email change. A
    /// verification link is handed out for an address already verified too, as Firebase does.
    public func generateLink(
        _ purpose: EmailCodePurpose, email: String, newEmail: String? = nil, _ request: Request
    ) async throws -> GeneratedLink {
        let normalized = ExternalIdentity.normalize(email)
        var code = newCode(purpose, for: nil, lifetime: lifetime(of: purpose), request)
        code.email = newEmail
        code.allowsVerifiedAddress = true
        let owner = try AccountService.resetOwner(of: normalized, seal: try await accounts.database.readModelSeal())
        let (issued, bound, account) = try await issue(code, to: owner, requiring: normalized, request)
        let message = try issued.message(to: bound, links: self, request)
        devOutbox?.keep(message, mailed: false)
        return GeneratedLink(code: message.code, link: message.link, email: account.email ?? bound)
    }

    // MARK: Using codes

    /// Sets a new password with a reset code (``UserAccount/resetPassword(with:passwordHash:now:)``):
    /// the password is checked against the policy first, so a weak one spends nothing.
    ///
    /// The password is hashed (scrypt) only for a code its user still holds unused: anyone can make up a code
    /// of the right shape, and each would otherwise cost the server a hash before the command refused it. A
    /// code refused here is refused by the command too, which records the refusal as for any wrong code.
    public func resetPassword(code: String, newPassword: String, context: CommandContext) async throws -> UserAccount {
        let userId = try Self.user(of: code)
        try commands.checkPassword(newPassword, pointer: "/newPassword")
        let codeHash = EmailCodeFormat.hash(code)
        let usable = { (account: UserAccount) in
            account.checkEmailCode(codeHash, for: [.passwordReset], presentedFor: .passwordReset, now: context.now).code != nil
        }
        // The state kept since the code was issued answers at no cost; a code it does not show is looked up.
        var isUsable = accounts.cache.entry(for: userId).map { usable($0.account) } ?? false
        if !isUsable {
            // No such user is a made-up code; a database that fails is the server's fault, not the caller's.
            do { isUsable = usable(try await accounts.read(userId)) } catch let error as AccountError where error.reason == .notFound {}
        }
        let hash = isUsable ? try await commands.hashPassword(newPassword) : nil
        let context = context.asOfNow
        return try await accounts.use(
            codeHash: codeHash, of: userId, for: [.passwordReset], presentedFor: .passwordReset, context: context
        ) { account, found in
            // Usable now and not a moment ago: a code is never issued again, so this does not happen.
            guard let hash else { throw AccountError.invalidCode(AccountError.unknownEmailCodeDetail) }
            return try account.resetPassword(with: found, passwordHash: hash, now: context.now)
        }.account
    }

    /// Uses a verification, email-change or undo code (those of `purposes`); a signed-in `caller` may only
    /// use their own. A changed address mails the old one a notice with a code that undoes the change, when
    /// the old address was verified: one nobody proved may be a mistyped one's holder's, who must get no way
    /// back into the account (nor learn where it went). A change ends every session
    /// (``UserAccount/confirmEmail(with:now:)``).
    public func confirm(
        code: String, purposes: Set<EmailCodePurpose>, caller: UUID? = nil, _ request: Request
    ) async throws -> UserAccount {
        let userId = try Self.user(of: code)
        let undo = newCode(.undoEmailChange, for: userId, lifetime: UserAccount.emailChangeUndoLifetime, request)
        let presentedFor: EmailCodePurpose = purposes.contains(.verifyEmail) ? .verifyEmail
            : purposes.contains(.undoEmailChange) ? .undoEmailChange : .changeEmail
        let noticeHasNoLink = mail != nil && (try? linkRoot(request)) == nil
        let (account, used) = try await accounts.use(
            codeHash: EmailCodeFormat.hash(code), of: userId, for: purposes, presentedFor: presentedFor,
            caller: caller, context: request.context
        ) { account, found in
            var events = try account.confirmEmail(with: found, now: request.context.now)
            if found.purpose == .changeEmail, let old = account.email, account.isEmailVerified {
                // The old address is told, with a way back: an address changes only when that notice can hold its link.
                if noticeHasNoLink { throw Self.noPublicURL }
                events += try account.issueEmailCode(
                    .undoEmailChange, codeId: undo.id, codeHash: undo.secret?.hash ?? "", email: old, expiresAt: undo.expiresAt,
                    restoresVerified: account.isEmailVerified)
            }
            return events
        }
        if used.purpose == .changeEmail, let notice = account.emailCodes[undo.id], let old = notice.email, let mail {
            // The change is done whatever becomes of its notice; a notice that could not go is recorded.
            do {
                try await deliver(undo, to: old, userId: userId, mail: mail, request)
            } catch {
                let reason = (error as? SendFailure)?.reason ?? (error as? any ProblemConvertible)?.problem.code ?? "send_failed"
                logger.warn("an email change notice could not be sent", [("reason", reason)])
            }
        }
        return account
    }

    /// The code's purpose and account, without using it (Firebase's `accounts:resetPassword` with a code only).
    /// A wrong, used or expired code is refused as it would be when used, and recorded likewise.
    public func inspect(code: String, context: CommandContext) async throws -> (account: UserAccount, code: EmailCode) {
        let userId = try Self.user(of: code)
        return try await accounts.use(
            codeHash: EmailCodeFormat.hash(code), of: userId, for: Set(EmailCodePurpose.allCases), presentedFor: .passwordReset,
            context: context) { _, _ in [] }
    }

    // MARK: Mechanics

    /// A code about to be issued, with its secret once it is known (made beforehand for a known user,
    /// or by the command for the user it finds).
    struct PendingCode: Sendable {
        var id: UUID
        var secret: (code: String, hash: String)?
        var purpose: EmailCodePurpose
        /// The address it goes to; nil for the user's current one.
        var email: String?
        var expiresAt: Date
        /// Whether a verification code may go to an address already verified (an admin's link).
        var allowsVerifiedAddress = false

        func issued(requiring address: String? = nil) -> AccountService.NewEmailCode {
            .init(
                id: id, hash: secret?.hash, purpose: purpose, email: email, requiredAddress: address, expiresAt: expiresAt,
                allowsVerifiedAddress: allowsVerifiedAddress)
        }

        func message(to address: String, links: EmailFlows, _ request: Request) throws -> MailMessage {
            let code = secret?.code ?? ""
            return MailMessage(
                to: address, template: .init(for: purpose), locale: request.locale,
                link: try links.link(for: purpose, code: code, username: address, request), code: code, expiresAt: expiresAt)
        }
    }

    /// A mail that could not be handed over, after its failure was recorded.
    struct SendFailure: Error {
        var reason: String
        var underlying: any Error
    }

    /// A code of `purpose` lasting `lifetime`, its secret made now when its user is known.
    private func newCode(_ purpose: EmailCodePurpose, for userId: UUID?, lifetime: TimeInterval, _ request: Request) -> PendingCode {
        let index = 20_000 + (EmailCodePurpose.allCases.firstIndex(of: purpose) ?? 0)
        return PendingCode(
            id: AccountEventCodec.eventID(command: request.context.commandId, index: index), secret: userId.map(EmailCodeFormat.make),
            purpose: purpose, email: nil, expiresAt: request.context.now.addingTimeInterval(lifetime))
    }

    private func lifetime(of purpose: EmailCodePurpose) -> TimeInterval {
        switch purpose {
        case .passwordReset: passwordResetLifetime
        case .verifyEmail, .changeEmail: verificationLifetime
        case .undoEmailChange: UserAccount.emailChangeUndoLifetime
        }
    }

    private func sender() throws -> any MailSender {
        guard let mail else { throw Self.noMailSender }
        return mail
    }

    private func reserveUserSend(_ userId: UUID, _ request: Request, address: String? = nil) async throws {
        try await accounts.reserveSend(
            .mail, to: address.map { [$0] } ?? [], userId: userId, perAddress: Self.mailsPerAddress, perUser: Self.mailsPerUser,
            window: Self.mailWindow, now: request.context.now, refusal: "Too many mails; wait before asking for another.")
    }

    /// Where the links of `request`'s mails start.
    ///
    /// Only `tether dev` takes the request's Host, and only one naming this machine (it listens on loopback): any
    /// other would let a caller aim the links of someone else's mail at their own site, in production or in a
    /// development server that sends real mail (TETHER_MAIL_WEBHOOK_URL).
    func linkRoot(_ request: Request) throws -> String {
        let host = request.host.flatMap { PublicBase.isLoopback($0) ? $0 : nil }
        guard let root = PublicBase.root(publicURL, host: host, allowingHost: development && host != nil) else {
            throw Self.noPublicURL
        }
        return root
    }

    /// Issues `code` to the user `user` names (an SQL uuid expression; their address must be `address`,
    /// when given): answers it with its secret, the address it is bound to, and the user after it.
    ///
    /// A code whose link cannot be made (no public URL, a forged Host under `tether dev`) is not issued:
    /// issuing one withdraws the user's earlier codes of its purpose, which a request that can give no
    /// link must not do.
    private func issue(
        _ code: PendingCode, to user: PostgresQuery, requiring address: String? = nil, _ request: Request
    ) async throws -> (code: PendingCode, address: String, account: UserAccount) {
        _ = try linkRoot(request)
        let (account, bound, made) = try await accounts.issue(code.issued(requiring: address), user: user, context: request.context)
        var issued = code
        if let made { issued.secret = made }
        return (issued, bound, account)
    }

    /// Issues `code` to the user `user` names, then mails it.
    private func issueAndDeliver(
        _ code: PendingCode, to user: PostgresQuery, requiring address: String? = nil, mail: any MailSender, _ request: Request
    ) async throws {
        let (issued, bound, account) = try await issue(code, to: user, requiring: address, request)
        try await deliver(issued, to: bound, userId: account.id, mail: mail, request)
    }

    /// Like ``issueAndDeliver(_:to:requiring:mail:_:)`` for a signed-in user: a mail that could not go is 503 `mail_unavailable`.
    private func issueAndDeliverReporting(_ code: PendingCode, to user: PostgresQuery, mail: any MailSender, _ request: Request) async throws {
        do {
            try await issueAndDeliver(code, to: user, mail: mail, request)
        } catch let error as SendFailure {
            throw error.underlying
        }
    }

    private func deliver(_ code: PendingCode, to address: String, userId: UUID, mail: any MailSender, _ request: Request) async throws {
        let message = try code.message(to: address, links: self, request)
        do {
            try await mail.send(message)
        } catch {
            // The problem code only: an error's text may carry the webhook's URL and whatever secret is in it.
            let reason = (error as? any ProblemConvertible)?.problem.code ?? "send_failed"
            await accounts.recordDeliveryFailure(of: code.id, userId: userId, reason: reason, context: request.context)
            throw SendFailure(reason: reason, underlying: error is any ProblemConvertible ? error : Self.mailUnavailable)
        }
    }

    /// The page a code of `purpose` is used at, in the request's surface's style.
    func link(for purpose: EmailCodePurpose, code: String, username: String, _ request: Request) throws -> String {
        let root = try linkRoot(request)
        let page = switch purpose {
        case .passwordReset: "reset-password"
        case .verifyEmail, .changeEmail: "verify-email"
        case .undoEmailChange: "undo-email-change"
        }
        func query(_ items: [(String, String)]) -> String {
            formEncoded(items.map { ($0.0, $0.1) })
        }
        switch (request.style, purpose) {
        case (.parse(let appID), .passwordReset):
            return "\(root)/parse/apps/\(Self.pathSegment(appID))/request_password_reset?" + query([("token", code), ("username", username)])
        case (.parse(let appID), .verifyEmail):
            return "\(root)/parse/apps/\(Self.pathSegment(appID))/verify_email?" + query([("token", code), ("username", username)])
        case (.firebase, _):
            return "\(root)/actions/\(page)?" + query([("mode", Self.firebaseMode(purpose)), ("oobCode", code), ("lang", request.locale)])
        default:
            return "\(root)/actions/\(page)?" + query([("code", code)])
        }
    }

    /// The Firebase action handler's `mode` of a purpose.
    static func firebaseMode(_ purpose: EmailCodePurpose) -> String {
        switch purpose {
        case .passwordReset: "resetPassword"
        case .verifyEmail: "verifyEmail"
        case .changeEmail: "verifyAndChangeEmail"
        case .undoEmailChange: "recoverEmail"
        }
    }

    private static func pathSegment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? text
    }

    /// The user a code names, or 400 for text that is not a code.
    static func user(of code: String) throws -> UUID {
        guard let userId = EmailCodeFormat.userId(of: code) else { throw EmailCodeFormat.malformed }
        return userId
    }

    /// 503 `mail_unavailable`: the mail could not be sent.
    static var mailUnavailable: Problem {
        WebhookDeliveryError.Channel.mail.unavailable("The mail could not be sent; nothing else changed, so ask again shortly.")
    }

    /// 503 `mail_unavailable` of a server with no mail sender configured.
    static var noMailSender: Problem {
        WebhookDeliveryError.Channel.mail.unavailable(
            "This server sends no mail, so it has no email flows.")
    }

    /// 503 `mail_unavailable` of a server that cannot make links.
    static var noPublicURL: Problem {
        WebhookDeliveryError.Channel.mail.unavailable("This server has no public address to start the links in mails from.")
    }
}
