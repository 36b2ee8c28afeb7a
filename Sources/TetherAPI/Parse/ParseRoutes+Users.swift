import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders

/// The handlers of `/parse/users`, `/parse/login`, `/parse/logout` and `/parse/sessions/me`.
extension ParseRoutes {
    // MARK: POST /parse/users

    /// Sign-up or log-in with `authData`, or a username/password sign-up.
    func signUpOrLogIn(_ request: HTTPRequest, _ caller: Caller) async throws -> HTTPResponse {
        let body = try Self.object(request)
        // Refused, not dropped (Parse Server's checkRestrictedFields); the master key sets it with a PUT.
        if body["emailVerified"] != nil { throw Self.emailVerifiedIsNotTheClients }
        let credentials = try Credentials(body)
        if let value = body["authData"] {
            let authData = try ParseAuthData(value)
            return try await releasingUnused { verified in try await logIn(with: authData, credentials: credentials, request, caller, verified) }
        }
        guard let username = credentials.username else {
            throw ParseError(ParseError.usernameMissing, "bad or missing username")
        }
        guard let password = credentials.password else {
            throw ParseError(ParseError.passwordMissing, "password is required.")
        }
        let email = try Self.loginEmail(username: username, email: credentials.email)
        let context = context(request, caller)
        let (session, token) = newSession(ProviderName.password.rawValue, request, now: context.now)
        let account: UserAccount
        do {
            account = try await commands.signUp(SignUpCommand(email: email, password: password, displayName: nil, session: session, context: context))
        } catch let error as AccountError where error.reason == .emailAlreadyInUse {
            throw try await passwordEmailConflict(email, owner: nil) ?? ParseError.emailInUse
        }
        return created(account, token: token, request)
    }

    /// Whether an address is proved is for the mail Tether sends, or the master key's `PUT`, to say.
    static let emailVerifiedIsNotTheClients = ParseError(
        ParseError.operationForbidden, "Clients aren't allowed to manually update email verification.")

    /// Tether's password accounts are keyed by email address; a Parse username that is not one cannot log in.
    static let usernameIsNotAnEmail = ParseError(
        ParseError.invalidEmailAddress, "Tether's password accounts are keyed by email: the username must be the email address.")

    static func isEmail(_ text: String) -> Bool { AccountCommands.isEmail(text) }

    /// The email a password user logs in with: the username, which must be an email address, and the
    /// same as `email` when both are sent (a username that is not the email could never log in).
    static func loginEmail(username: String?, email: String?) throws(ParseError) -> String {
        guard let identifier = username ?? email, isEmail(identifier) else { throw usernameIsNotAnEmail }
        if let email, ExternalIdentity.normalize(email) != ExternalIdentity.normalize(identifier) { throw usernameIsNotAnEmail }
        return identifier
    }

    /// `username`, `password` and `email` of a sign-up or a `PUT`.
    struct Credentials: Sendable {
        var username: String?
        var password: String?
        var email: String?

        init(_ body: [String: JSONValue]) throws(ParseError) {
            username = try ParseRoutes.string("username", in: body)
            password = try ParseRoutes.string("password", in: body)
            email = try ParseRoutes.string("email", in: body)
        }

        var isEmpty: Bool { username == nil && password == nil && email == nil }
    }

    /// Checks what `credentials` ask of `account` (nil: the user the request is about to make), before
    /// anything is written, and answers the email of a password to add, if they add one.
    ///
    /// A password on a user without one is added, keyed by the username, which must be an email address
    /// (as for a password sign-up); on a user with one it is a change, left to the caller. Otherwise the
    /// username and email may only repeat the user's own (`email`: the user's email, or the one a new user
    /// will have): Tether's usernames are the password's email, and emails are not changed here.
    func passwordToAdd(_ credentials: Credentials, to account: UserAccount?, email: String?) throws(ParseError) -> String? {
        if let password = credentials.password {
            do { try commands.checkPassword(password) } catch { throw ParseError(converting: error) }
            if account?.identities[ProviderName.password.rawValue] == nil {
                return try Self.loginEmail(username: credentials.username, email: credentials.email)
            }
        }
        if let username = credentials.username, username != account.map(ParseUser.username) {
            throw ParseError(ParseError.operationForbidden, "Tether does not change usernames: a username is the email of a password, sent with it.")
        }
        if let given = credentials.email, ExternalIdentity.normalize(given) != email.map(ExternalIdentity.normalize) {
            throw ParseError(ParseError.operationForbidden, "Tether's Parse surface does not change email addresses yet.")
        }
        return nil
    }

    /// Why `email` cannot key a new password for `owner` (nil for a user still to be made), if it cannot: 202
    /// when another account's username is that email (its password), 203 when another account holds the email
    /// otherwise (any holder, whatever the policy: a password account owns its email).
    func passwordEmailConflict(_ email: String, owner: UUID?) async throws -> ParseError? {
        let normalized = ExternalIdentity.normalize(email)
        let password = ExternalIdentity(provider: ProviderName.password.rawValue, uid: normalized)
        if try await owners(of: [password]).values.contains(where: { $0 != owner }) {
            return ParseError.usernameInUse
        }
        return try await emailHolders([normalized]).contains(where: { $0 != owner }) ? ParseError.emailInUse : nil
    }

    /// 201 with `Location` and `{objectId, createdAt, username, sessionToken}`: a new user.
    /// The error of a link refused because an address is taken since it was looked up: the new password's
    /// (202 or 203, as ``passwordEmailConflict(_:owner:)`` tells), or another identity's (203).
    private func emailTaken(_ passwordEmail: String?, owner: UUID) async throws -> ParseError {
        guard let passwordEmail else { return .emailInUse }
        return try await passwordEmailConflict(passwordEmail, owner: owner) ?? .emailInUse
    }

    private func created(_ account: UserAccount, token: String, _ request: HTTPRequest) -> HTTPResponse {
        var body = ParseUser.fields(account)
        body["updatedAt"] = nil
        body["sessionToken"] = .string(token)
        return SurfaceJSON.response(.object(body), status: 201, headers: ["Location": location(of: account.id, for: request)], subject: account.id)
    }

    /// Log-in (or sign-up) with the identities of `authData`.
    ///
    /// Every identity named is verified first, always, and must be the token's subject; only then is it
    /// looked up, so a request learns nothing about identities it cannot prove. Two owners, or an owner
    /// other than the signed-in caller, is 208. The identity of the owner (or, for a new user, the first
    /// that is not anonymous) signs in; the request's other identities are linked to the user after.
    ///
    /// `username` and `password` beside `authData` add a password to the user (Parse saves them on a new
    /// user); they are checked, and their email looked up, before the sign-in too. A user who has a
    /// password already changes it with a `PUT`, not with a log-in.
    private func logIn(
        with authData: ParseAuthData, credentials: Credentials, _ request: HTTPRequest, _ caller: Caller, _ held: VerifiedCredentials
    ) async throws -> HTTPResponse {
        let claims = try authData.identities
        guard !claims.isEmpty else { throw ParseError.unsupported }
        // A log-in completes a second factor with `mfa.token`; an enrolment (a secret, a number) is the signed-in
        // user's own PUT, and was dropped here with a 201 that enrolled nothing.
        if let mfa = authData.mfa, mfa["secret"] != nil || mfa["mobile"] != nil {
            throw ParseError(ParseError.validationError, "Enrol a second factor with PUT /parse/users/:id once signed in.")
        }
        var verified: [(claim: ClaimedIdentity, identity: ExternalIdentity)] = []
        for claim in claims {
            verified.append((claim, try await verify(claim, request, caller, held)))
        }
        // One identity and no caller: the sign-in itself finds its owner, with no statement more.
        let owners = verified.count == 1 && caller.session == nil && credentials.isEmpty ? [:] : try await owners(of: verified.map(\.identity))
        func owner(_ identity: ExternalIdentity) -> UUID? { owners[identity.provider + ":" + identity.uid] }
        let users = Set(owners.values)
        guard users.count <= 1 else { throw ParseError.authAlreadyUsed }
        if let session = caller.session, let user = users.first, user != session.userId { throw ParseError.authAlreadyUsed }
        let anonymous = ExternalIdentity.anonymousProvider
        let primary = verified.first { owner($0.identity) != nil }
            ?? verified.first { $0.claim.provider != anonymous } ?? verified[0]
        // The other identities are linked after the sign-in: what could refuse them is checked before it, so a
        // refused request leaves no new user or session behind.
        let extras = verified.filter { other in
            other.claim.provider != primary.claim.provider && owner(other.identity) == nil && other.claim.provider != anonymous
        }
        try await checkEmailsAreFree(of: extras.map(\.identity), besides: primary.identity, owner: owner(primary.identity))
        var passwordEmail: String?
        if !credentials.isEmpty {
            var holder: UserAccount?
            if let userId = owner(primary.identity) { holder = try await accounts.read(userId) }
            if credentials.password != nil, holder?.identities[ProviderName.password.rawValue] != nil {
                throw ParseError(ParseError.operationForbidden, "This user has a password: log in, then change it with PUT /parse/users/:id.")
            }
            passwordEmail = try passwordToAdd(credentials, to: holder, email: holder?.email ?? primary.identity.email)
            if let passwordEmail, let conflict = try await passwordEmailConflict(passwordEmail, owner: holder?.id) { throw conflict }
            if let passwordEmail {
                // On the address the user will show (theirs, or the first identity's that has one), as a PUT's is.
                let shown = holder?.email ?? primary.identity.email ?? extras.lazy.compactMap(\.identity.email).first
                do { try UserAccount.checkPasswordAddress(passwordEmail, accountEmail: shown) } catch { throw ParseError(converting: error) }
            }
        }
        // A returning user's first address comes with the first of these links that has one: on an account with second
        // factors it must be proved (the link's own rule), checked here so that a refused log-in opens no session.
        if let userId = owner(primary.identity),
           let (email, verified) = extras.map(\.identity).first(where: { $0.email != nil }).map({ ($0.email, $0.isEmailVerified) })
               ?? passwordEmail.map({ ($0, false) }) {
            let holder = try await accounts.read(userId)
            if holder.email == nil { try holder.checkAddress(email, verified: verified) }
        }
        let context = context(request, caller)
        // The password is checked against the address's sign-up places and hashed before anything is written: a
        // refusal then leaves no new user or session behind.
        var passwordToLink: AccountService.Link?
        if let passwordEmail, let password = credentials.password {
            passwordToLink = try await commands.passwordLink(email: passwordEmail, password: password, context: context)
        }
        var (session, token) = newSession(primary.claim.provider, request, now: context.now)
        let result: SignInResult
        held.handOver([primary.identity])
        do {
            result = try await commands.signIn(
                SignInCommand(credential: primary.claim.credential, session: session, context: context), verified: primary.identity)
        } catch {
            throw ParseError(converting: error, provider: primary.claim.provider)
        }
        var account: UserAccount
        var isNewUser = false
        switch result {
        case .signedIn(let signedIn, let isNew):
            (account, isNewUser) = (signedIn, isNew)
        case .secondFactorRequired(let userId, let pendingCredential, _):
            do {
                account = try await completeSecondFactor(
                    userId: userId, pendingCredential: pendingCredential, mfa: authData.mfa, session: session, request, caller)
            } catch {
                // Parse's clients finish the log-in by sending the same authData again with `mfa.token`: the token's
                // nonce goes back for that request while no session is opened, and is spent by the one that opens it.
                await commands.release([primary.identity])
                throw error
            }
        case .needsConfirmation:
            throw ParseError.emailInUse
        }
        // Implicit linking: the request's other identities that nobody holds yet join the user, with the
        // password, in one command; one of a provider the user has under another id replaces it, as Parse
        // Server saves a log-in's changed authData. An anonymous one does not (a real identity replaces it).
        let others = extras.filter { account.identities[$0.claim.provider]?.uid != $0.identity.uid }
        var links = others.map { AccountService.Link($0.identity, replacing: account.identities[$0.claim.provider] != nil) }
        if let passwordToLink { links.append(passwordToLink) }
        if !links.isEmpty {
            held.handOver(others.map(\.identity))
            do {
                // The address rule again, under the user's lock: the user's email may have come meanwhile.
                var steps = passwordEmail.map { [AccountCommands.passwordAddress($0)] } ?? []
                // A first password added to a returning user signs every other session out, as a PUT's does, so the
                // owner notices; the log-in's own session goes on as a new one, whose token is the answer's.
                let now = context.now
                if passwordToLink != nil, !isNewUser {
                    let loggedIn = session.id
                    (session, token) = newSession(ProviderName.password.rawValue, request, now: now)
                    let restarted = session
                    steps.append { state in try state.restartingSessions(with: restarted, continuing: loggedIn, now: now) }
                }
                let decided = steps
                var followUp: AccountService.FollowUp?
                if !decided.isEmpty {
                    followUp = { state in try state.deciding(decided, at: now) }
                }
                account = try await commands.link(links, to: account.id, context: self.context(request, caller), followUp: followUp)
            } catch let error as AccountError where error.reason == .emailAlreadyInUse {
                throw try await emailTaken(passwordEmail, owner: account.id)
            } catch {
                throw ParseError(converting: error, provider: others.count == 1 ? others[0].claim.provider : nil)
            }
        }
        if isNewUser { return created(account, token: token, request) }
        return SurfaceJSON.response(
            .object(ParseUser.full(account, sessionToken: token)), headers: ["Location": location(of: account.id, for: request)], subject: account.id)
    }

    /// Under one account per email, 203 when an account other than `owner` holds the email of one of
    /// `identities`. A new user's sign-in with `primary` takes that identity's email along (the sign-in
    /// itself refuses it when another holds it); a returning user's does not, so it is checked too.
    private func checkEmailsAreFree(of identities: [ExternalIdentity], besides primary: ExternalIdentity, owner: UUID?) async throws {
        let emails = identities.compactMap { accounts.emailPolicy.exclusiveEmail(of: $0) }.filter { owner != nil || $0 != primary.normalizedEmail }
        if try await emailHolders(emails).contains(where: { $0 != owner }) { throw ParseError.emailInUse }
    }

    /// The users who hold any of `emails` (normalized), in one statement.
    private func emailHolders(_ emails: [String]) async throws -> [UUID] {
        guard !emails.isEmpty else { return [] }
        let seal = try await accounts.database.readModelSeal()
        return try await accounts.database.query(
            "SELECT id FROM users WHERE email_normalized = ANY(\(PostgresArray(try emails.map(seal.seal)))::text[])"
        ).map { try $0.decode("id", as: UUID.self) }
    }

    /// The credentials a request verified, whose nonces go back when it is refused before a command takes them
    /// (``releasingUnused(_:)``): the client may present the same tokens again, fixed (one of them was bad) or
    /// alone. A command gives them back itself when it fails.
    final class VerifiedCredentials {
        /// Verified and not handed to a command yet.
        private(set) var identities: [ExternalIdentity] = []

        func append(_ identity: ExternalIdentity) { identities.append(identity) }

        /// `taken` go to a command, which gives their nonces back itself if it fails (and must not have them given
        /// back once it committed).
        func handOver(_ taken: [ExternalIdentity]) {
            identities.removeAll { identity in taken.contains { $0.provider == identity.provider && $0.uid == identity.uid } }
        }
    }

    /// Runs `body`, giving back the nonces of the credentials it verified and no command took when it fails.
    private func releasingUnused<T>(_ body: (VerifiedCredentials) async throws -> T) async throws -> T {
        let held = VerifiedCredentials()
        do {
            return try await body(held)
        } catch {
            await commands.release(held.identities)
            throw error
        }
    }

    /// Verifies one claimed identity (held in `held`); its `id` must be the subject the provider vouches for.
    private func verify(
        _ claim: ClaimedIdentity, _ request: HTTPRequest, _ caller: Caller, _ held: VerifiedCredentials
    ) async throws -> ExternalIdentity {
        let identity: ExternalIdentity
        do {
            identity = try await commands.verify(claim.credential, context: context(request, caller))
        } catch let error as ProviderError where claim.provider == ProviderName.apple.rawValue && error.rejection != nil {
            guard case .apple(let token, _, _, _) = claim.credential, let rejection = error.rejection else { throw ParseError(converting: error) }
            throw ParseError.appleRefusal(rejection, token: token, expectedIssuer: appleIssuer)
        } catch {
            throw ParseError(converting: error, provider: claim.provider)
        }
        held.append(identity)
        guard identity.uid == claim.id else { throw ParseError.subjectMismatch(provider: claim.provider) }
        return identity
    }

    // MARK: Second factors

    /// Finishes a log-in whose user has second factors, with `authData.mfa.token`: a TOTP code, a
    /// recovery code, the SMS code of an earlier `"request"`, or `"request"` itself (which texts a code
    /// and answers 141 "Please enter the token").
    func completeSecondFactor(
        userId: UUID, pendingCredential: String, mfa: [String: String]?, session: NewSession, _ request: HTTPRequest, _ caller: Caller
    ) async throws -> UserAccount {
        guard let token = mfa?["token"], !token.isEmpty else { throw ParseError.missingMFA }
        let pending = try await commands.pendingCredentials.read(pendingCredential)
        let account = try await accounts.read(userId)
        let now = Date()
        if token == "request" {
            guard let phone = account.mfa.confirmedFactors.first(where: { $0.type == .phone }) else {
                throw ParseError(ParseError.scriptFailed, "This user has no phone to text a token to.")
            }
            _ = try await accounts.sendChallengeCode(
                userId: userId, challengeId: pending.challengeId, factorId: phone.id, presentedJKT: nil, sms: sms,
                context: context(request, caller))
            throw ParseError.enterMFAToken
        }
        // A code texted by an earlier "request" completes that earlier log-in's challenge, still open. Not one bound
        // to a device key (a /v1 sign-in's with DPoP): only that key finishes it, and a Parse log-in has none.
        let texted = account.mfa.challenges.values
            .filter { !$0.isEnded && $0.jkt == nil && $0.codeHash != nil && ($0.codeExpiresAt ?? .distantPast) > now && $0.expiresAt > now }
            .max { $0.expiresAt < $1.expiresAt }
        let isCode = token.count == 6 && token.allSatisfy(\.isASCII) && token.allSatisfy(\.isNumber)
        // A code a TOTP factor accepts goes to that factor (a user may hold several, from /v1 or from new
        // secrets), even while a texted code is outstanding; a code none accepts counts against the first.
        let totps = account.mfa.confirmedFactors.filter { $0.type == .totp }
        let accepting = isCode ? totps.first { Self.totpAccepts(token, $0, now: now) } : nil
        let matchesTOTP = accepting != nil
        let totp = accepting ?? totps.first
        let context = context(request, caller)
        let (challengeId, factorId, code, recoveryCode): (UUID, UUID?, String?, String?) =
            if isCode, !matchesTOTP, let texted, let factorId = texted.codeFactorId { (texted.id, factorId, token, nil) }
            else if isCode, let totp { (pending.challengeId, totp.id, token, nil) }
            else { (pending.challengeId, nil, nil, token) }
        return try await accounts.verifyChallenge(
            userId: userId, challengeId: challengeId, factorId: factorId, code: code, recoveryCode: recoveryCode, session: session,
            context: context).account
    }

    /// Whether `factor` (TOTP) accepts `code` now, without recording anything.
    private static func totpAccepts(_ code: String, _ factor: MFAState.Factor, now: Date) -> Bool {
        guard let secret = factor.totpSecret, let bytes = try? Base32.decode(secret), let totp = try? TOTP(secret: bytes) else { return false }
        return totp.matchingStep(for: code, at: now, after: factor.lastUsedStep.map { UInt64($0) }) != nil
    }

    /// What `authData.mfa` of a `PUT` asks for, checked before anything is written.
    enum Enrolment: Sendable {
        /// TOTP with the client's secret and its first code: enrolled and confirmed in one command.
        case totp(secret: String, code: String)
        /// SMS: text a code to the number.
        case sendCode(phoneNumber: String)
        /// SMS: the texted code confirms the pending factor of the number.
        case confirmPhone(phoneNumber: String, code: String)

        init(_ mfa: [String: String]) throws(ParseError) {
            if let secret = mfa["secret"] {
                guard let code = mfa["token"], !code.isEmpty else { throw ParseError.enterMFAToken }
                do { try AccountService.checkClientSecret(secret) } catch { throw ParseError(converting: error) }
                self = .totp(secret: secret, code: code)
            } else if let mobile = mfa["mobile"] {
                guard PhoneNumber.isE164(mobile) else {
                    throw ParseError(ParseError.validationError, "authData.mfa.mobile must be in E.164 form, like +15555550100.")
                }
                if let code = mfa["token"], !code.isEmpty { self = .confirmPhone(phoneNumber: mobile, code: code) }
                else { self = .sendCode(phoneNumber: mobile) }
            } else {
                throw ParseError(ParseError.validationError, "authData.mfa takes secret and token (TOTP), or mobile and then token (SMS).")
            }
        }
    }

    /// Runs an enrolment: TOTP answers the recovery codes once (with the first factor), as Parse's mfa
    /// adapter does, in `authDataResponse.mfa.recovery`.
    private func enrol(_ enrolment: Enrolment, userId: UUID, session: ParseSession, _ request: HTTPRequest, _ caller: Caller) async throws -> JSONValue? {
        let codes: [String]?
        switch enrolment {
        case .totp(let secret, let code):
            codes = try await accounts.enrolConfirmedTOTP(
                userId: userId, authTime: session.authTime, secret: secret, code: code, context: context(request, caller)).recoveryCodes
        case .confirmPhone(let mobile, let code):
            let account = try await accounts.read(userId)
            // After a resend (a second PUT of the number), the enrolment whose code went last: the newest SMS.
            guard let factor = account.mfa.factors.values.filter({ $0.type == .phone && !$0.isConfirmed && $0.phoneNumber == mobile })
                .max(by: { ($0.codeExpiresAt ?? .distantPast, $0.enrolledAt) < ($1.codeExpiresAt ?? .distantPast, $1.enrolledAt) })
            else { throw ParseError.invalidMFAToken }
            codes = try await accounts.confirmFactor(
                userId: userId, factorId: factor.id, type: .phone, code: code, context: context(request, caller)).recoveryCodes
        case .sendCode(let mobile):
            guard let sms else { throw ParseError(ParseError.scriptFailed, "This server sends no SMS: enrol a TOTP factor instead.") }
            _ = try await accounts.enrolPhone(
                userId: userId, authTime: session.authTime, phoneNumber: mobile, displayName: nil, sms: sms, context: context(request, caller))
            return nil
        }
        guard let codes else { return nil }
        return .object(["mfa": .object(["recovery": .string(codes.joined(separator: ", "))])])
    }

    // MARK: PUT /parse/users/:id

    /// Links, unlinks, upgrades an anonymous user, changes the password or enrols a second factor.
    ///
    /// The full merged authData arrives (the SDKs echo every linked provider): an entry whose id is the
    /// one linked is left alone; new and changed ones are verified, then linked (a changed one replaces
    /// the old identity, and any link drops an `anonymous` one: the upgrade); `null` unlinks. Every
    /// field is checked, every new identity verified and its owner looked up before the first write;
    /// then links go before unlinks, so `"anonymous": null` beside a new provider, as Parse-Swift sends
    /// it, upgrades rather than failing on the last method.
    func update(_ request: HTTPRequest, _ caller: Caller) async throws -> HTTPResponse {
        try await releasingUnused { held in try await update(request, caller, held) }
    }

    private func update(_ request: HTTPRequest, _ caller: Caller, _ held: VerifiedCredentials) async throws -> HTTPResponse {
        let objectId = request.pathParameters["id"] ?? ""
        let isMaster = caller.master != nil
        let userId: UUID
        if let session = caller.session {
            guard ParseUser.objectId(of: session.userId) == objectId else { throw ParseError.objectMissing }
            userId = session.userId
        } else if caller.master != nil {
            guard let found = try await user(objectId: objectId) else { throw ParseError.objectMissing }
            userId = found
        } else {
            throw ParseError(ParseError.sessionMissing, "Cannot modify user \(objectId).")
        }
        let body = try Self.object(request)
        let authData = try body["authData"].map { value throws(ParseError) in try ParseAuthData(value) }
        let credentials = try Credentials(body)
        var account = try await accounts.read(userId)
        guard account.exists else { throw ParseError.objectMissing }
        let forbidden = { (what: String) in ParseError(ParseError.operationForbidden, what) }
        if body["emailVerified"] != nil, !isMaster { throw Self.emailVerifiedIsNotTheClients }
        var emailVerified: Bool?
        switch body["emailVerified"] {
        case nil: break
        case .bool(let value)?: emailVerified = value
        default: throw ParseError(ParseError.invalidJSON, "emailVerified must be true or false.")
        }

        // 1. Check everything.
        if credentials.password != nil, isMaster { throw forbidden("A password is set with the user's own session.") }
        let newPasswordEmail = try passwordToAdd(credentials, to: account, email: account.email)
        let enrolment = try authData?.mfa.map { fields throws(ParseError) in try Enrolment(fields) }
        if enrolment != nil, isMaster { throw forbidden("Second factors are enrolled with the user's own session.") }
        // `"mfa": null` removes every factor: the user's own, with a recent log-in (the domain's rule); the master key's, as an admin.
        let factorsToRemove = authData?.removesMFA == true ? account.mfa.factorIds : []
        var withoutFactors = account
        if !factorsToRemove.isEmpty {
            let now = context(request, caller).now
            do {
                let removal = try account.removeFactors(factorsToRemove, authTime: caller.session?.authTime, byAdmin: isMaster, now: now)
                withoutFactors = account.appending(removal.map { ($0, now) }, version: account.version)
            } catch { throw ParseError(converting: error) }
        }
        // On the state the factors' removal leaves, as the command applies them: an address marked unproved beside
        // `"mfa": null` guards no factor any more.
        if let emailVerified {
            do { _ = try withoutFactors.updateProfile(displayName: nil, photoURL: nil, clearing: [], emailVerified: emailVerified) }
            catch { throw ParseError(converting: error) }
        }
        var claims: [ClaimedIdentity] = []
        for entry in authData?.entries ?? [] {
            guard let fields = entry.fields else { continue }
            guard let id = fields["id"], !id.isEmpty else { throw ParseError.refusedCredential(provider: entry.provider) }
            // Unchanged; for the master key also as it reads it (an anonymous id's fingerprint), so a fetched
            // user saved back changes nothing.
            if let linked = account.identities[entry.provider],
               linked.uid == id || isMaster && SecretUID.shown(provider: linked.provider, uid: linked.uid) == id { continue }
            guard !isMaster else { throw forbidden("The master key unlinks identities; linking needs the user's own session.") }
            guard entry.provider != ExternalIdentity.anonymousProvider else { throw forbidden("An anonymous identity cannot be linked to a user.") }
            claims.append(ClaimedIdentity(provider: entry.provider, id: id, credential: try ParseAuthData.credential(entry.provider, fields)))
        }
        // A password is no entry of Parse's authData (reads never show one): `"password": null` names nothing to
        // remove, as a null for any provider the user does not hold, and changes nothing.
        let unlinks = (authData?.entries ?? []).filter { $0.fields == nil && $0.provider != ProviderName.password.rawValue }.map(\.provider)
        // An enrolment is a command of its own (a wrong code records its attempt and nothing else), so it is
        // sent alone: beside a link, an unlink, a password or a factor's removal, one would be written and the
        // other refused.
        if enrolment != nil, !claims.isEmpty || credentials.password != nil || !factorsToRemove.isEmpty
            || unlinks.contains(where: { account.identities[$0] != nil }) {
            throw ParseError(ParseError.validationError, "authData.mfa enrols a second factor in a PUT of its own, without other changes.")
        }
        // What the user could still sign in with afterwards: a user may not remove their last way in (an admin may).
        var remaining = Set(account.identities.keys).union(claims.map(\.provider))
        if newPasswordEmail != nil { remaining.insert(ProviderName.password.rawValue) }
        if !claims.isEmpty || newPasswordEmail != nil { remaining.remove(ExternalIdentity.anonymousProvider) }
        remaining.subtract(unlinks)
        if remaining.isEmpty, !isMaster, !unlinks.isEmpty { throw ParseError(converting: AccountError.lastSignInMethod) }
        var toLink: [(claim: ClaimedIdentity, identity: ExternalIdentity)] = []
        for claim in claims {
            toLink.append((claim, try await verify(claim, request, caller, held)))
        }
        let owners = try await owners(of: toLink.map(\.identity))
        guard owners.values.allSatisfy({ $0 == userId }) else { throw ParseError.authAlreadyUsed }
        if let newPasswordEmail, let conflict = try await passwordEmailConflict(newPasswordEmail, owner: userId) { throw conflict }

        // 2. Apply, as one command: the factors' removal, the links (a new password's included), a changed
        // password, the unlinks and the verification mark are all written, or none of them.
        let requested = context(request, caller)
        let authTime = caller.session?.authTime
        let callerSession = caller.session?.id
        // A password is hashed (hundreds of milliseconds) before the command is dated, so the sessions it ends are
        // ended after every token they were given meanwhile (``CommandContext/asOfNow``).
        var passwordLink: AccountService.Link?, passwordHash: String?
        if let password = credentials.password {
            if let newPasswordEmail {
                // A first password needs a recent log-in of a user who has another way in, as on /v1.
                passwordLink = try await commands.passwordLink(email: newPasswordEmail, password: password, authTime: authTime, context: requested)
            } else {
                passwordHash = try await commands.hashPassword(password)
            }
        }
        let context = credentials.password == nil ? requested : requested.asOfNow
        let preceding: AccountService.FollowUp = { state in
            // The session the request came with must still be live here, under the user's lock: a revocation or a
            // log-out that ended it while the request was checked (a password hashed) leaves it nothing to change.
            if let callerSession, state.sessions[callerSession]?.isActive != true { throw AccountError.invalidToken }
            return factorsToRemove.isEmpty ? [] : try state.removeFactors(factorsToRemove, authTime: authTime, byAdmin: isMaster, now: context.now)
        }
        var links = toLink.map { AccountService.Link($0.identity, replacing: true) }
        var after: [AccountService.FollowUp] = []
        var newToken: String?
        // A password, new or changed, ends every session and answers a new token (Parse's
        // revokeSessionOnPasswordReset and generateNewSession, for any password a user's PUT sets).
        if credentials.password != nil {
            let (session, token) = newSession(ProviderName.password.rawValue, request, now: context.now)
            newToken = token
            if let passwordLink {
                links.append(passwordLink)
                // On the user's own address (which it becomes for a user with none): checked after the link's recency.
                after.append(AccountCommands.passwordAddress(passwordLink.identity.uid))
                after.append { try $0.restartingSessions(with: session, continuing: callerSession, now: context.now) }
            } else if let passwordHash {
                after.append { try $0.changePassword(passwordHash: passwordHash, session: session, continuing: callerSession, now: context.now) }
            }
        }
        for provider in unlinks {
            after.append { $0.identities[provider] == nil ? [] : try $0.unlink(provider: provider, byAdmin: isMaster) }
        }
        if let emailVerified {
            after.append { try $0.updateProfile(displayName: nil, photoURL: nil, clearing: [], emailVerified: emailVerified) }
        }
        let unlinked = unlinks.filter { account.identities[$0] != nil }
        if !factorsToRemove.isEmpty || !links.isEmpty || !after.isEmpty {
            do {
                let steps = after, now = context.now
                let followUp: AccountService.FollowUp = { state in try state.deciding(steps, at: now) }
                held.handOver(toLink.map(\.identity))
                account = try await commands.link(links, to: userId, context: context, preceding: preceding, followUp: followUp)
            } catch let error as AccountError where error.reason == .emailAlreadyInUse {
                throw try await emailTaken(newPasswordEmail, owner: userId)
            } catch {
                throw ParseError(converting: error, provider: toLink.count == 1 ? toLink[0].claim.provider : nil)
            }
        }
        // What the master key changed is recorded in its admin key's stream. The change is done (its events name
        // the key), so a record that fails does not turn its answer into an error, as for the admin API's actions.
        if isMaster, let master = caller.master {
            let actions = (factorsToRemove.isEmpty ? [] : ["remove-mfa"]) + unlinked.map { "unlink-\($0)" }
                + (emailVerified.map { ["email-verified-\($0)"] } ?? [])
            for action in actions {
                await adminKeys.recordCommitted(
                    .actionRequested(.init(userId: userId, action: action, reason: "parse master key", status: 200)),
                    keyId: master.id, metadata: context.metadata)
            }
        }
        var answer: [String: JSONValue] = [:]
        if let enrolment, let session = caller.session {
            if let response = try await enrol(enrolment, userId: userId, session: session, request, caller) {
                answer["authDataResponse"] = response
            }
            account = try await accounts.read(userId)
        }
        answer["updatedAt"] = .string(ParseUser.date(account.updatedAt ?? account.createdAt ?? Date()))
        if let newToken { answer["sessionToken"] = .string(newToken) }
        return SurfaceJSON.response(.object(answer), subject: userId)
    }

    // MARK: DELETE /parse/users/:id

    /// Parse-Swift's `user.delete()`: the user erases themselves with their session token (any live one, as
    /// Parse Server asks no recent log-in), or the master key erases anyone, as an admin action of its key.
    /// Erasure ends every session, revokes stored provider grants and makes the user's personal data unreadable.
    /// Parse Server's answers: no session 206 `Insufficient auth to delete user`, another user's 206
    /// `Insufficient auth.`, the master key's unknown user 101.
    func delete(_ request: HTTPRequest, _ caller: Caller) async throws -> HTTPResponse {
        let objectId = request.pathParameters["id"] ?? "me"
        let context = context(request, caller)
        if let master = caller.master {
            guard let userId = try await user(objectId: objectId) else { throw ParseError.objectMissing }
            // One erased meanwhile is `notFound`: 101, as an unknown one.
            try await accounts.erase(userId: userId, reason: "parse master key", context: context)
            await adminKeys.recordCommitted(
                .actionRequested(.init(userId: userId, action: "erase", reason: "parse master key", status: 200)),
                keyId: master.id, metadata: context.metadata)
            return SurfaceJSON.response(.object([:]))
        }
        guard let session = caller.session else { throw ParseError(ParseError.sessionMissing, "Insufficient auth to delete user") }
        guard ParseUser.objectId(of: session.userId) == objectId else { throw ParseError(ParseError.sessionMissing, "Insufficient auth.") }
        // The erasure drops the answers kept for the user's retries, but for this request's own: its retry gets `{}`.
        let claim = request.headers["x-parse-request-id"].map { IdempotentRequests.scope(of: request, principal: session.id, key: $0) }
        try await accounts.eraseByOwner(
            userId: session.userId, sessionId: session.id, authTime: nil, reason: "deleted by the user (Parse)", claim: claim, context: context)
        return SurfaceJSON.response(.object([:]))
    }

    // MARK: Reads

    /// `GET /parse/users/me`: the caller with their `sessionToken`.
    func me(_ caller: Caller) async throws -> HTTPResponse {
        guard let session = caller.tokenSession else { throw ParseError.invalidSession }
        let account = try await accounts.read(session.userId)
        guard account.exists else { throw ParseError.invalidSession }
        return SurfaceJSON.response(.object(ParseUser.full(account, sessionToken: session.token)))
    }

    /// `GET /parse/users/:id`: the caller themself (or anyone, to the master key) in full; others' public fields only.
    func fetch(_ request: HTTPRequest, _ caller: Caller) async throws -> HTTPResponse {
        let objectId = request.pathParameters["id"] ?? ""
        guard let userId = try await user(objectId: objectId) else { throw ParseError.objectMissing }
        let account = try await accounts.read(userId)
        guard account.exists else { throw ParseError.objectMissing }
        if let master = caller.master {
            try await adminKeys.record(.userViewed(.init(userId: userId, status: 200)), keyId: master.id, metadata: context(request, caller).metadata)
            return SurfaceJSON.response(.object(ParseUser.full(account, shownToAdmins: true)))
        }
        if caller.session?.userId == userId {
            return SurfaceJSON.response(.object(ParseUser.full(account)))
        }
        return SurfaceJSON.response(.object(ParseUser.publicFields(account)))
    }

    /// `GET /parse/sessions/me`: the caller's `_Session`.
    func sessionMe(_ caller: Caller) async throws -> HTTPResponse {
        guard let session = caller.tokenSession else { throw ParseError(ParseError.invalidSessionToken, "Session token required.") }
        let account = try await accounts.read(session.userId)
        let provider = session.amr.first.map { $0 == "pwd" ? ProviderName.password.rawValue : $0 } ?? ProviderName.password.rawValue
        // A password sign-up's session starts in the transaction that made the user, at the same instant.
        let action = provider == ProviderName.password.rawValue && account.createdAt == session.startedAt ? "signup" : "login"
        var body: [String: JSONValue] = [
            "objectId": .string(ParseUser.sessionObjectId(of: session.id)),
            "sessionToken": .string(session.token),
            "user": .object(["__type": "Pointer", "className": "_User", "objectId": .string(ParseUser.objectId(of: session.userId))]),
            "createdWith": .object(["action": .string(action), "authProvider": .string(provider)]),
            "restricted": .bool(false),
            "createdAt": .string(ParseUser.date(session.startedAt)),
            "updatedAt": .string(ParseUser.date(session.startedAt)),
        ]
        if let expiresAt = session.expiresAt { body["expiresAt"] = ParseUser.typedDate(expiresAt) }
        // Sealed with the user's key in the session's event: the user's state holds it opened.
        if let installationId = account.sessions[session.id]?.installationId { body["installationId"] = .string(installationId) }
        return SurfaceJSON.response(.object(body))
    }

    // MARK: Log-in and log-out

    /// `POST /parse/login` (or `GET` with the query): username (or email) and password, and
    /// `authData.mfa.token` for a user with second factors.
    func logIn(_ request: HTTPRequest, _ caller: Caller) async throws -> HTTPResponse {
        let body = try Self.object(request)
        let (identifier, password) = try Self.passwordCredentials(body, request)
        let mfa = try body["authData"].map { value throws(ParseError) in try ParseAuthData(value) }?.mfa
        let context = context(request, caller)
        let (session, token) = newSession(ProviderName.password.rawValue, request, now: context.now)
        let result: SignInResult
        do {
            result = try await commands.signIn(SignInCommand(
                credential: .password(email: identifier, password: password), session: session, context: context))
        } catch {
            throw ParseError(converting: error, provider: ProviderName.password.rawValue)
        }
        let account: UserAccount
        switch result {
        case .signedIn(let signedIn, _):
            account = signedIn
        case .secondFactorRequired(let userId, let pendingCredential, _):
            account = try await completeSecondFactor(
                userId: userId, pendingCredential: pendingCredential, mfa: mfa, session: session, request, caller)
        case .needsConfirmation:
            throw ParseError.invalidLogin
        }
        return SurfaceJSON.response(.object(ParseUser.full(account, sessionToken: token)), subject: account.id)
    }

    /// The `username` (or `email`) and `password` of a log-in or a password check, from the body or the query, with
    /// Parse Server's answers when one is missing (200, 201); a username that is no email signs in to nothing (101).
    private static func passwordCredentials(_ body: [String: JSONValue], _ request: HTTPRequest) throws -> (email: String, password: String) {
        let query = request.query
        guard let identifier = try Self.string("username", in: body, query: query) ?? Self.string("email", in: body, query: query) else {
            throw ParseError(ParseError.usernameMissing, "username/email is required.")
        }
        guard let password = try Self.string("password", in: body, query: query) else {
            throw ParseError(ParseError.passwordMissing, "password is required.")
        }
        guard Self.isEmail(identifier) else { throw ParseError.invalidLogin }
        return (identifier, password)
    }

    /// `GET|POST /parse/verifyPassword` (Parse-Swift's `User.verifyPassword`, the JavaScript SDK's
    /// `Parse.User.verifyPassword`): checks the password as a log-in does, under the same limits (a wrong one is a
    /// failed sign-in: 101 `Invalid username/password.`), and answers the user without a session token. No
    /// session opens and nothing changes; a second factor is not asked, since nothing is signed in to.
    func verifyPassword(_ request: HTTPRequest, _ caller: Caller) async throws -> HTTPResponse {
        let (email, password) = try Self.passwordCredentials(try Self.object(request), request)
        let account: UserAccount
        do {
            account = try await commands.verifyPassword(email: email, password: password, context: context(request, caller)) { identity in
                // Its account gone meanwhile signs in to nothing; a disabled one is refused as its log-in is (119).
                guard let userId = try await owners(of: [identity]).values.first else { throw AccountError.invalidCredential }
                let account = try await accounts.read(userId)
                guard account.exists else { throw AccountError.invalidCredential }
                if account.isDisabled { throw AccountError.userDisabled }
                return account
            }
        } catch {
            throw ParseError(converting: error, provider: ProviderName.password.rawValue)
        }
        return SurfaceJSON.response(.object(ParseUser.full(account)), subject: account.id)
    }

    /// `POST /parse/logout`: ends the session of the token, and answers `{}` whatever the token.
    func logOut(_ request: HTTPRequest, _ caller: Caller) async throws -> HTTPResponse {
        if let session = caller.tokenSession {
            do {
                try await accounts.signOut(userId: session.userId, sessionId: session.id, context: context(request, caller))
            } catch let error as AccountError where error.reason == .invalidToken {
                // Ended meanwhile: the answer is the same.
            }
        }
        return SurfaceJSON.response(.object([:]))
    }
}
