import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres
import TetherProviders

/// Turns a decoded provider credential into a verified identity.
public protocol IdentityVerification: Sendable {
    /// Verifies `credential`; throws a ``ProviderError`` (or another typed error) when it is refused.
    func verify(_ credential: ProviderCredential) async throws -> ExternalIdentity

    /// Gives back what verifying `identity` spent (its token's nonce) after the command it was for
    /// failed on the server's side, so the client's retry with the same token can succeed.
    func release(_ identity: ExternalIdentity) async

    /// Spends `nonce` again for a credential verified earlier whose nonce was given back (what a Firebase pending
    /// token stands for); false when it is spent already.
    func spend(_ nonce: UsedNonce) async throws -> Bool
}

extension IdentityVerification {
    /// Verifications that spend nothing have nothing to give back.
    public func release(_ identity: ExternalIdentity) async {}

    /// Verifications that keep no nonces take none again: nothing they verified can be presented as verified.
    public func spend(_ nonce: UsedNonce) async throws -> Bool { false }
}

/// The native JSON API under `/v1` (the parts built so far: see README).
public struct V1Routes: Sendable {
    let accounts: AccountService
    let issuer: AccessTokenIssuer
    let verifier: AccessTokenVerifier
    let dpop: DPoPBinding
    let idempotency: IdempotentRequests
    let pendingCredentials: MFAPendingCredentials
    /// The command layer every route calls.
    let commands: AccountCommands
    /// Sends SMS codes of phone factors; nil when none is configured (phone factors are then refused).
    let sms: (any SMSSender)?
    /// Password reset, verification and email change.
    let email: EmailFlows

    public init(
        commands: AccountCommands, issuer: AccessTokenIssuer, verifier: AccessTokenVerifier, dpop: DPoPBinding,
        sms: (any SMSSender)?, email: EmailFlows
    ) {
        self.email = email
        self.commands = commands
        self.accounts = commands.accounts
        self.issuer = issuer
        self.verifier = verifier
        self.dpop = dpop
        self.idempotency = IdempotentRequests(database: commands.accounts.database)
        self.pendingCredentials = commands.pendingCredentials
        self.sms = sms
    }

    /// Adds the routes to `router`.
    public func register(on router: inout Router) {
        router.post("/v1/sign-up") { request in
            try await handingOutSession(request) { try await signUp(request) }
        }
        router.post("/v1/sign-in") { request in
            try await handingOutSession(request) { try await signIn(request) }
        }
        router.get("/v1/users/me") { request in
            let claims = try await authenticate(request)
            return HTTPResponse.json(UserAnswer(user: try await user(claims.userId)))
        }
        router.delete("/v1/users/me") { request in
            try await once(request, endsItsSession: true) { claims in
                let claim = request.headers["idempotency-key"].map { IdempotentRequests.scope(of: request, principal: claims.sessionId, key: $0) }
                try await accounts.eraseByOwner(
                    userId: claims.userId, sessionId: claims.sessionId, authTime: claims.authTime, reason: "deleted by the user (/v1)",
                    claim: claim, context: context(request, claims.userId))
                return .noContent()
            }
        }
        router.post("/v1/users/me/identities") { request in
            try await once(request) { claims in try await link(request, claims) }
        }
        router.delete("/v1/users/me/identities/{provider}") { request in
            try await once(request) { claims in
                // Removing a way in is a change a stolen token must not make.
                try UserAccount.requireRecentSignIn(authTime: claims.authTime, now: Date())
                let account = try await accounts.unlink(
                    provider: request.pathParameters["provider"] ?? "", from: claims.userId, context: context(request, claims.userId))
                return HTTPResponse.json(UserAnswer(user: UserBody(account)))
            }
        }
        router.post("/v1/sessions/refresh") { request in
            try await handingOutSession(request) { try await refresh(request) }
        }
        router.post("/v1/sign-out") { request in
            try await once(request, endsItsSession: true) { claims in
                try await accounts.signOut(userId: claims.userId, sessionId: claims.sessionId, context: context(request, claims.userId))
                return .noContent()
            }
        }
        router.get("/v1/users/me/sessions") { request in
            let claims = try await authenticate(request)
            return try HTTPResponse.json(Self.liveSessions(of: try await accounts.read(claims.userId), current: claims.sessionId, now: Date()))
        }
        router.delete("/v1/users/me/sessions/{id}") { request in
            // Ending the caller's own session ends the session the request came with: its retry gets the first 204.
            try await once(request, endsItsSession: true) { claims in
                guard let id = UUID(text: request.pathParameters["id"] ?? "") else { throw AccountError.sessionNotFound }
                try await accounts.endSession(id, of: claims.userId, by: .session(claims.sessionId), context: context(request, claims.userId))
                return .noContent()
            }
        }
        router.post("/v1/users/me/sessions/revoke") { request in
            try await once(request, endsItsSession: true) { claims in
                try await accounts.revokeAllSessions(userId: claims.userId, context: context(request, claims.userId))
                return .noContent()
            }
        }
        registerMFA(on: &router)
        registerEmail(on: &router)
    }

    // MARK: Handlers

    private struct SignUpBody: Decodable {
        var email: String
        var password: String
        var displayName: String?
    }

    private func signUp(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decodeJSON(SignUpBody.self)
        let (session, refreshToken) = newSession(
            amr: AccountCommands.authenticationMethods(provider: ProviderName.password.rawValue), jkt: try await proofKey(of: request))
        let account = try await commands.signUp(SignUpCommand(
            email: body.email, password: body.password, displayName: body.displayName, session: session, context: context(request, nil)))
        return try await signedIn(account, isNewUser: true, session: session, refreshToken: refreshToken)
    }

    private struct SignInBody: Decodable {
        var provider: String
        /// Absent only for `anonymous`, which takes none; every other provider's decoding names it as missing.
        var credential: JSONValue?
    }

    private func signIn(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decodeJSON(SignInBody.self)
        let credential = try ProviderCredential(provider: body.provider, credential: body.credential ?? .null)
        let (session, refreshToken) = newSession(
            amr: AccountCommands.authenticationMethods(provider: body.provider), jkt: try await proofKey(of: request))
        let command = SignInCommand(credential: credential, session: session, context: context(request, nil))
        switch try await commands.signIn(command) {
        case .signedIn(let account, let isNewUser):
            return try await signedIn(account, isNewUser: isNewUser, session: session, refreshToken: refreshToken)
        case .secondFactorRequired(let userId, let pendingCredential, let factors):
            throw Self.mfaRequired(userId: userId, pendingCredential: pendingCredential, factors: factors)
        case .needsConfirmation(let email, let signInMethods, let owner):
            throw AccountError.accountExistsWithDifferentCredential(email: email, signInMethods: signInMethods, owner: owner)
        }
    }

    private func link(_ request: HTTPRequest, _ claims: AccessTokenClaims) async throws -> HTTPResponse {
        let body = try request.decodeJSON(SignInBody.self)
        let account = try await commands.link(LinkCommand(
            credential: try ProviderCredential(provider: body.provider, credential: body.credential ?? .null), userId: claims.userId,
            context: context(request, claims.userId), authTime: claims.authTime))
        return HTTPResponse.json(UserAnswer(user: UserBody(account)))
    }

    private struct RefreshBody: Decodable {
        var refreshToken: String
    }

    private func refresh(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decodeJSON(RefreshBody.self)
        guard RefreshTokens.isWellFormed(body.refreshToken) else { throw AccountError.invalidToken }
        let presentedJKT = try await proofKey(of: request)
        let next = RefreshTokens.generate()
        let rotated = try await commands.refresh(
            presentedHash: RefreshTokens.hash(body.refreshToken), newHash: RefreshTokens.hash(next), presentedJKT: presentedJKT,
            context: context(request, nil))
        let access = try await issuer.issue(
            userId: rotated.userId, sessionId: rotated.sessionId, authTime: rotated.authTime, amr: rotated.amr, jkt: rotated.jkt)
        let session = SessionBody(
            id: rotated.sessionId, accessToken: access.token, isBound: rotated.jkt != nil, expiresIn: access.expiresIn, refreshToken: next)
        return HTTPResponse.json(RefreshResponse(user: UserBody(rotated.account), session: session))
    }

    /// `{"sessions": […]}`: the user's live sessions, the newest first, on every surface (a Parse token past its
    /// expiry is none), from the user's state. No secret of a session is shown, nor where it was opened from.
    static func liveSessions(of account: UserAccount, current: UUID, now: Date) -> JSONValue {
        let live = account.sessions.values.filter { $0.isActive && $0.expiresAt.map { $0 > now } ?? true }
            .sorted { ($0.startedAt, $0.id.uuidString) > ($1.startedAt, $1.id.uuidString) }
        func time(_ date: Date?) -> JSONValue { date.map { .string(ISO8601Milliseconds.format($0)) } ?? .null }
        return ["sessions": .array(live.map { session in
            [
                "id": .string(session.id.lowercasedText),
                "current": .bool(session.id == current),
                "surface": .string(session.secretKind.surface),
                "startedAt": time(session.startedAt),
                "authTime": time(session.authTime),
                "amr": .array(session.amr.map(JSONValue.string)),
                "dpopBound": .bool(session.jkt != nil),
                "expiresAt": time(session.expiresAt),
            ]
        })]
    }

    // MARK: Pieces

    /// The access token's claims, once its session is known to be live and not revoked.
    ///
    /// A token bound to a key (`cnf.jkt`) must come with the `DPoP` scheme and a proof by
    /// that key over this request and token (RFC 9449 §7); an unbound one with `Bearer`.
    func authenticate(_ request: HTTPRequest) async throws -> AccessTokenClaims {
        try await challengingInItsScheme(request) {
            let claims = try await verifiedToken(request)
            guard try await isLive(claims) else { throw AccountError.invalidToken }
            return claims
        }
    }

    /// A refused token of a request made in the DPoP scheme is challenged in that scheme (RFC 9449 §7.1), not Bearer's.
    /// A request that sent no token, or one in a scheme Tether does not take, is challenged in both schemes without an
    /// error code (RFC 6750 §3.1): it has no session to throw away.
    private func challengingInItsScheme<T>(_ request: HTTPRequest, _ work: () async throws -> T) async throws -> T {
        do {
            return try await work()
        } catch {
            guard var problem = Problem(converting: error), problem.headers["WWW-Authenticate"] == TokenError.tokenChallenge else { throw error }
            switch request.authorization?.scheme {
            case "bearer": throw error
            case "dpop": problem.headers["WWW-Authenticate"] = TokenError.dpopTokenChallenge
            default: problem.headers["WWW-Authenticate"] = TokenError.noTokenChallenge
            }
            throw problem
        }
    }

    /// Whether the session the token names is live and has not been revoked since the token was issued.
    private func isLive(_ claims: AccessTokenClaims) async throws -> Bool {
        try await accounts.isSessionActive(userId: claims.userId, sessionId: claims.sessionId, issuedAt: claims.issuedAt)
    }

    /// Runs a signed-in caller's change once per `Idempotency-Key` (``IdempotentRequests``). With `endsItsSession`
    /// (a sign-out, revoking every session, confirming an email change), a retry whose session has ended since
    /// gets the first request's kept answer rather than 401: its token and proof are checked as ever, and only the
    /// answer that session got on this route with this key and body is given. Every other route refuses an ended
    /// session, kept answers or not: its answers (a TOTP secret, recovery codes) are no longer that caller's.
    func once(
        _ request: HTTPRequest, endsItsSession: Bool = false, _ change: (AccessTokenClaims) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        try await once(request, optional: false, endsItsSession: endsItsSession) { claims in
            guard let claims else { throw AccountError.invalidToken } // not reached: a caller is required
            return try await change(claims)
        }
    }

    /// ``once(_:endsItsSession:_:)``; with `optional`, a request without `Authorization` runs with no caller.
    func once(
        _ request: HTTPRequest, optional: Bool, endsItsSession: Bool, _ change: (AccessTokenClaims?) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        try await challengingInItsScheme(request) { try await onceInScheme(request, optional: optional, endsItsSession: endsItsSession, change) }
    }

    private func onceInScheme(
        _ request: HTTPRequest, optional: Bool, endsItsSession: Bool, _ change: (AccessTokenClaims?) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        var caller: AccessTokenClaims?
        if !optional || request.headers["authorization"] != nil {
            let claims = try await verifiedToken(request)
            guard try await isLive(claims) else {
                if endsItsSession, let key = request.headers["idempotency-key"],
                   let kept = try await idempotency.answerForEndedSession(to: request, key: key, session: claims.sessionId) {
                    return kept
                }
                throw AccountError.invalidToken
            }
            caller = claims
        }
        return try await idempotency.respond(to: request, principal: caller?.sessionId) { try await change(caller) }
    }

    /// The access token's claims, checked (ES256 signature by a key this server published, issuer, `typ`
    /// `at+jwt`, expiry, and a key-bound token's `DPoP` proof; the tokens carry no audience: only this server takes them),
    /// whether or not its session is still live.
    private func verifiedToken(_ request: HTTPRequest) async throws -> AccessTokenClaims {
        guard let (scheme, token) = request.authorization, scheme == "bearer" || scheme == "dpop", !token.isEmpty else {
            throw AccountError.invalidToken
        }
        let claims = try await verifier.verify(token)
        switch (scheme, claims.jkt) {
        case ("bearer", nil):
            break
        case ("dpop", let bound?):
            _ = try await dpop.verifyProof(in: request, accessToken: token, boundThumbprint: bound)
        default:
            throw TokenError.invalidToken.with(
                detail: claims.jkt == nil ? "This token is not bound to a key; send it with the Bearer scheme."
                    : "This token is bound to a key; send it with the DPoP scheme and a DPoP proof.")
        }
        return claims
    }

    /// The thumbprint of the key whose `DPoP` proof the request carries; nil when it carries none.
    ///
    /// A sign-in with a proof binds its session to that key; a refresh with one proves possession.
    func proofKey(of request: HTTPRequest) async throws -> String? {
        guard request.headers["DPoP"] != nil else { return nil }
        return try await dpop.verifyProof(in: request)
    }

    /// Runs a route that hands out a session once per `Idempotency-Key`: a kept answer whose session is bound to a key
    /// is given again only with a fresh proof by that key (``IdempotentRequests/respond(to:principal:subject:proofKey:_:)``).
    func handingOutSession(_ request: HTTPRequest, _ handler: () async throws -> HTTPResponse) async throws -> HTTPResponse {
        try await idempotency.respond(to: request, principal: nil, proofKey: { try await proofKey(of: request) }, handler)
    }

    /// A session to open with `/v1`'s kind of secret (a refresh token), and that token.
    func newSession(amr: [String], jkt: String?) -> (NewSession, String) {
        RefreshTokenFormat().newSession(amr: amr, jkt: jkt)
    }

    /// The answer to a sign-in, showing `account` as the command left it (nothing is read back).
    private func signedIn(_ account: UserAccount, isNewUser: Bool, session: NewSession, refreshToken: String) async throws -> HTTPResponse {
        let access = try await issuer.issue(userId: account.id, sessionId: session.id, authTime: Date(), amr: session.amr, jkt: session.jkt)
        let body = SignInResponse(
            user: UserBody(account), isNewUser: isNewUser,
            session: SessionBody(
                id: session.id, accessToken: access.token, isBound: session.jkt != nil, expiresIn: access.expiresIn,
                refreshToken: refreshToken))
        return HTTPResponse.json(body, status: isNewUser ? 201 : 200)
    }

    func context(_ request: HTTPRequest, _ userId: UUID?) -> CommandContext {
        // Every request is a new command. Retries are recognised by their stored answer
        // (IdempotentRequests), never by an id derived from the client's key: a key that
        // comes back after its answer expired must not name the first request's command
        // (its events, its new user's id) again.
        let commandId = UUID.random()
        return CommandContext(
            commandId: commandId,
            metadata: EventMetadata(
                actor: userId.map(EventActor.user) ?? .anonymous, clientIP: request.remoteAddress,
                userAgent: request.headers["user-agent"], surface: "v1"))
    }

    func user(_ id: UUID) async throws -> UserBody {
        try await UserBody.load(id, from: accounts.database)
    }
}
