import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres
import TetherProviders

/// The Parse-compatible surface under `/parse`: what the Parse SDKs (Parse-Swift above all) send for
/// users, log-in, linking and sessions, answered as Parse Server answers it (SEMANTICS §1, WIRE-FACTS §5).
///
/// Every route decodes the wire form, calls the command layer and encodes the result; errors are
/// Parse's `{"code","error"}` (``ParseError``), never a 5xx for a client's mistake. A retried
/// `X-Parse-Request-Id` gets the first answer back and writes nothing.
public struct ParseRoutes: Sendable {
    let appID: String
    let clientKey: String?
    let publicURL: URL?
    let commands: AccountCommands
    let accounts: AccountService
    let sessions: ParseSessions
    let idempotency: IdempotentRequests
    let adminKeys: AdminKeyStore
    let sms: (any SMSSender)?
    /// Apple's issuer as configured (`TETHER_APPLE_ISSUER`), for the wording of Apple's refusals.
    let appleIssuer: String
    /// Password reset and email verification; nil leaves them unconfigured (Parse's code 1).
    let emailFlows: EmailFlows?
    static let surface = "parse"

    public init(
        appID: String, clientKey: String?, publicURL: URL?, commands: AccountCommands, adminKeys: AdminKeyStore, sms: (any SMSSender)?,
        appleIssuer: String = ProvidersConfiguration.TokenIssuer.apple.issuer, email: EmailFlows? = nil
    ) {
        self.emailFlows = email
        self.appleIssuer = appleIssuer
        self.appID = appID
        self.clientKey = clientKey
        self.publicURL = publicURL
        self.commands = commands
        self.accounts = commands.accounts
        self.sessions = ParseSessions(database: commands.accounts.database)
        self.idempotency = IdempotentRequests(database: commands.accounts.database)
        self.adminKeys = adminKeys
        self.sms = sms
    }

    /// Writes the HTTP layer's own problems (413, unknown routes) under `/parse` as Parse errors.
    public static let problemRenderer = ProblemRenderer(pathPrefix: "/parse") { problem in
        // A browser reads an error (an unknown route, a body too large) only if it too allows its origin.
        crossOrigin.allowing(ParseError(converting: problem).response)
    }

    public func register(on router: inout Router) {
        var parse = Router()
        registerRoutes(on: &parse)
        Self.registerForBrowsers(parse, on: &router)
    }

    private func registerRoutes(on router: inout Router) {
        router.post("/parse/users") { request in
            try await answer(request, writes: true) { caller in try await signUpOrLogIn(request, caller) }
        }
        router.put("/parse/users/{id}") { request in
            try await answer(request, writes: true) { caller in try await update(request, caller) }
        }
        router.delete("/parse/users/{id}") { request in
            try await answer(request, writes: true, endsItsSession: true) { caller in try await delete(request, caller) }
        }
        router.get("/parse/users/me") { request in
            try await answer(request) { caller in try await me(caller) }
        }
        // Parse Server has no `me` of its own for a delete: `me` is an objectId like any (no user has it).
        router.delete("/parse/users/me") { request in
            try await answer(request, writes: true, endsItsSession: true) { caller in try await delete(request, caller) }
        }
        router.get("/parse/users/{id}") { request in
            try await answer(request) { caller in try await fetch(request, caller) }
        }
        router.post("/parse/login") { request in
            try await answer(request, writes: true) { caller in try await logIn(request, caller) }
        }
        router.get("/parse/login") { request in
            try await answer(request) { caller in try await logIn(request, caller) }
        }
        // Parse-Swift's `User.verifyPassword` sends a GET with the password in the query, or (`usingPost`) a POST.
        router.get("/parse/verifyPassword") { request in try await answer(request) { caller in try await verifyPassword(request, caller) } }
        router.post("/parse/verifyPassword") { request in try await answer(request) { caller in try await verifyPassword(request, caller) } }
        router.post("/parse/logout") { request in
            try await answer(request, writes: true, invalidSession: nil) { caller in try await logOut(request, caller) }
        }
        router.get("/parse/sessions/me") { request in
            try await answer(request, invalidSession: ParseError(ParseError.invalidSessionToken, "Session token not found.")) { caller in
                try await sessionMe(caller)
            }
        }
        registerEmail(on: &router)
    }

    // MARK: The request around every route

    /// Who a request comes from: the user of its session token, or an admin key as the master key.
    ///
    /// The master key outranks a session token sent beside it, as in Parse Server (whose SDKs send the current
    /// user's token on every request, the master key's too): the request is the master's, and ``session`` is nil.
    /// Only the routes about the token itself (`users/me`, `sessions/me`, log-out) read it then, as ``tokenSession``.
    struct Caller: Sendable {
        /// The live session the token names, whoever else the request comes from.
        var tokenSession: ParseSession?
        var master: AdminKey?
        /// A session token that names no live session.
        var unknownToken: String?

        /// The session the request acts as: none under the master key.
        var session: ParseSession? { master == nil ? tokenSession : nil }
    }

    /// Checks the application id and keys, finds the caller, runs `body` once per `X-Parse-Request-Id`
    /// (for writes) and answers whatever it throws as a Parse error.
    ///
    /// - Parameters:
    ///   - invalidSession: the error for a session token that names no live session; nil lets the route run
    ///     without a caller (log-out answers `{}` whatever the token).
    ///   - endsItsSession: the route ends the session it came with (a user's deletion): a retry gets its first
    ///     answer, whatever that answer holds.
    func answer(
        _ request: HTTPRequest, writes: Bool = false, invalidSession: ParseError? = .invalidSession, endsItsSession: Bool = false,
        _ body: @escaping (Caller) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        do {
            let caller = try await authorize(request)
            let key = writes ? request.headers["x-parse-request-id"] : nil
            if caller.master == nil, let token = caller.unknownToken {
                // A retry of the request that ended this session (a password change, a deletion) gets that request's
                // answer, within the window (159 after it, as any retry): one that hands out a session while that
                // session is live, and a deletion's. Any other answer of an ended session (recovery codes) is no
                // longer its caller's: 209.
                if let key, let ended = try await sessions.anySessionId(token) {
                    switch try await idempotency.storedAnswer(to: request, key: key, principal: ended, stillHolds: {
                        if endsItsSession { return true }
                        return IdempotentRequests.handsOutSession($0) ? try await liveSessionOrNone($0) : false
                    }) {
                    case .answer(let stored)?: return stored
                    case .pastWindow?: return ParseError.duplicate.response
                    case nil: break
                    }
                }
                if let invalidSession { throw invalidSession }
            }
            let run: () async throws -> HTTPResponse = {
                do {
                    return try await body(caller)
                } catch let error where !Self.isUnexpected(error) {
                    return ParseError(converting: error).response
                }
            }
            guard let key else { return try await run() }
            guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw ParseError(ParseError.otherCause, "X-Parse-Request-Id must be 1 to 255 visible ASCII characters.")
            }
            return try await idempotency.respondOnce(
                to: request, key: key, principal: caller.session?.id ?? caller.master?.id,
                conflict: { ParseError.duplicate.response },
                stillHolds: liveSessionOrNone, run)
        } catch is Unauthorized {
            return ParseError.unauthorized
        } catch let error where !Self.isUnexpected(error) {
            return ParseError(converting: error).response
        }
    }

    /// Whether a kept answer may be replayed for what it hands out: a session token only while that session is live.
    private func liveSessionOrNone(_ kept: HTTPResponse) async throws -> Bool {
        guard (200..<300).contains(kept.status),
              case .object(let members)? = try? CompactJSONDecoder().decode(JSONValue.self, from: kept.body),
              case .string(let token)? = members["sessionToken"]
        else { return true }
        return try await sessions.session(token) != nil
    }

    /// An error no layer knows (a bug, a driver failure): it goes on to the HTTP server, which logs it
    /// and answers 500, written as Parse's `{"code":1,…}` by ``problemRenderer``.
    private static func isUnexpected(_ error: any Error) -> Bool {
        !(error is ParseError) && Problem(converting: error) == nil
    }

    /// A wrong application id, client key or master key: Parse's 403, which has no `code`.
    private struct Unauthorized: Error {}

    /// The caller, once the application id (and client key, when one is set) match.
    private func authorize(_ request: HTTPRequest) async throws -> Caller {
        guard Self.matches(request.headers["x-parse-application-id"], appID) else { throw Unauthorized() }
        var caller = Caller()
        if let masterKey = request.headers["x-parse-master-key"] {
            guard let key = try await adminKeys.authenticate(masterKey), key.role == .admin else { throw Unauthorized() }
            caller.master = key
        } else if let clientKey {
            let presented = request.headers["x-parse-client-key"] ?? request.headers["x-parse-rest-api-key"]
                ?? request.headers["x-parse-javascript-key"]
            guard Self.matches(presented, clientKey) else { throw Unauthorized() }
        }
        if let token = request.headers["x-parse-session-token"], !token.isEmpty {
            caller.tokenSession = try await sessions.session(token)
            if caller.tokenSession == nil { caller.unknownToken = token }
        }
        return caller
    }

    /// Compares a presented key with the configured one in constant time.
    private static func matches(_ presented: String?, _ expected: String) -> Bool {
        guard let presented else { return false }
        let given = DigestAlgorithm.sha256.hash(Array(presented.utf8))
        let wanted = DigestAlgorithm.sha256.hash(Array(expected.utf8))
        return ConstantTime.isEqual(given, wanted)
    }

    // MARK: Pieces

    /// A new command's context: each command a request runs gets its own id (its events' ids derive from it).
    func context(_ request: HTTPRequest, _ caller: Caller) -> CommandContext {
        let actor: EventActor =
            if let master = caller.master { .admin(keyId: master.id) }
            else if let session = caller.session { .user(session.userId) }
            else { .anonymous }
        return CommandContext(metadata: EventMetadata(
            actor: actor, clientIP: request.remoteAddress, userAgent: request.headers["user-agent"], surface: Self.surface))
    }

    /// The request body as a JSON object (an empty body reads as `{}`).
    static func object(_ request: HTTPRequest) throws(ParseError) -> [String: JSONValue] {
        guard !request.body.isEmpty else { return [:] }
        guard let value = try? CompactJSONDecoder(refusesDuplicateNames: true).decode(JSONValue.self, from: request.body) else {
            throw ParseError(ParseError.invalidJSON, "Invalid JSON")
        }
        guard case .object(let members) = value else { throw ParseError(ParseError.invalidJSON, "The body must be a JSON object.") }
        return members
    }

    /// A string member of `body` (or of the query, for log-in by query), refusing other types.
    static func string(_ name: String, in body: [String: JSONValue], query: [String: String] = [:]) throws(ParseError) -> String? {
        switch body[name] {
        case .string(let text)?: return text.isEmpty ? nil : text
        case nil, .null?: return query[name].flatMap { $0.isEmpty ? nil : $0 }
        default: throw ParseError(ParseError.invalidJSON, "\(name) must be a string.")
        }
    }

    /// `Location` of a user: `TETHER_PUBLIC_URL` and `/parse/users/<objectId>`. Without it, the request's `Host`
    /// only when it names this machine (`tether dev`); any other `Host` is the client's to send, so the path stands
    /// alone (a relative reference, as RFC 9110 allows), never a link to wherever a client said.
    func location(of userId: UUID, for request: HTTPRequest) -> String {
        let host = request.headers["host"]
        let base = PublicBase.root(publicURL, host: host, allowingHost: host.map(PublicBase.isLoopback) ?? false) ?? ""
        return "\(base)/parse/users/\(ParseUser.objectId(of: userId))"
    }

    /// The SQL of a user's objectId, exactly as the unique index `users_parse_object_id` is built on it
    /// (schema/015), so the lookup is an index scan.
    static let objectIdExpression = "substr(translate(encode(sha256(uuid_send(id)), 'base64'), '+/=', ''), 1, 10)"

    /// The user a Parse `objectId` names, if they exist and were not erased.
    func user(objectId: String) async throws -> UUID? {
        guard objectId.count == 10, objectId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else { return nil }
        let rows = try await accounts.database.query(
            "SELECT id FROM users WHERE \(unsafeSQL: Self.objectIdExpression) = \(objectId) AND erased_at IS NULL")
        return try rows.first?.decode("id")
    }

    /// Who owns each of `identities` (provider, uid → user), in one statement.
    func owners(of identities: [ExternalIdentity]) async throws -> [String: UUID] {
        guard !identities.isEmpty else { return [:] }
        let seal = try await accounts.database.readModelSeal()
        let rows = try await accounts.database.query("""
            SELECT i.provider, i.provider_uid, i.user_id FROM identities i
            JOIN unnest(\(PostgresArray(identities.map(\.provider)))::text[], \(PostgresArray(try identities.map { try seal.seal($0.uid) }))::text[])
                AS wanted (provider, uid) ON i.provider = wanted.provider AND i.provider_uid = wanted.uid
            """)
        var owners: [String: UUID] = [:]
        for row in rows {
            owners[try row.decode("provider", as: String.self) + ":" + (try row.decode("provider_uid", openedWith: seal) ?? "")] =
                try row.decode("user_id")
        }
        return owners
    }

    /// A new Parse session for `provider`, from the request's installation.
    func newSession(_ provider: String, _ request: HTTPRequest, now: Date) -> (session: NewSession, token: String) {
        let installation = request.headers["x-parse-installation-id"].flatMap { $0.isEmpty || $0.utf8.count > 255 ? nil : $0 }
        return ParseSessions.format.newSession(provider: provider, installationId: installation, now: now)
    }
}
