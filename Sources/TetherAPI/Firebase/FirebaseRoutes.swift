import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders

/// The Firebase-compatible surface: the Identity Toolkit and Secure Token REST routes in the Auth
/// Emulator's layout (SEMANTICS §2, WIRE-FACTS §1c, §2, §4, §6), so firebase-admin with
/// `FIREBASE_AUTH_EMULATOR_HOST` and the client SDKs' emulator mode work against Tether, which keeps the
/// production rules the emulator skips: IdP tokens and nonces are verified, ID tokens are signed
/// (RS256, `/.well-known/firebase-jwks.json`), and revocation stops refresh tokens.
///
/// Every route decodes the wire form, calls the command layer and encodes the answer; errors are the
/// Identity Toolkit's envelope (``FirebaseError``), never a 5xx for a client's mistake.
public struct FirebaseRoutes: Sendable {
    let projectID: String
    let commands: AccountCommands
    let accounts: AccountService
    let idTokens: FirebaseIDTokens
    let adminKeys: AdminKeyStore
    let serviceAccounts: FirebaseServiceAccounts
    /// Sends the SMS codes of phone factors; nil when none is configured.
    let sms: (any SMSSender)?
    /// Password reset, verification and email change (`accounts:sendOobCode` and the codes' uses).
    let emailFlows: EmailFlows
    /// `tether dev`'s rules: `Authorization: Bearer owner` is an admin and unsigned custom tokens pass, as an
    /// emulator has it; never under `tether serve`.
    let acceptsOwner: Bool
    /// What `accounts:revokeToken` revokes Apple's authorization codes with.
    let appleCodes: AppleCodeRevocation
    /// The `pendingToken`s of `accounts:signInWithIdp`'s refusals.
    let pendingTokens = FirebasePendingTokens()
    static let surface = "firebase"
    static let identityToolkit = "/identitytoolkit.googleapis.com/v1"
    static let relyingParty = "/www.googleapis.com/identitytoolkit/v3/relyingparty"

    public init(
        projectID: String, commands: AccountCommands, adminKeys: AdminKeyStore, idTokens: FirebaseIDTokens, sms: (any SMSSender)?,
        emailFlows: EmailFlows, acceptsOwner: Bool, appleCodes: AppleCodeRevocation = AppleCodeRevocation(grants: nil, clientIDs: [])
    ) {
        self.appleCodes = appleCodes
        self.emailFlows = emailFlows
        self.sms = sms
        self.projectID = projectID
        self.commands = commands
        self.accounts = commands.accounts
        self.idTokens = idTokens
        self.adminKeys = adminKeys
        self.serviceAccounts = FirebaseServiceAccounts(database: commands.accounts.database)
        self.acceptsOwner = acceptsOwner
    }

    /// Writes the HTTP layer's own problems (413, unknown routes) in the Identity Toolkit's form, which a
    /// browser reads only if they too allow its origin.
    public static let problemRenderers = ["/identitytoolkit.googleapis.com", "/securetoken.googleapis.com", "/www.googleapis.com"].map {
        ProblemRenderer(pathPrefix: $0) { crossOrigin.allowing(FirebaseError(converting: $0).response) }
    }

    /// As the Auth Emulator and Google's endpoints answer a web app (the JS SDK from a page): any origin, the
    /// headers a preflight asks for, a preflight answered 204. Every route's credential is a header or a
    /// body (an API key, a token), never a cookie.
    static let crossOrigin = CrossOriginPolicy(
        allowedMethods: "GET,POST,OPTIONS", allowedHeaders: .asRequested, preflightStatus: 204, maxAgeSeconds: 3600)

    public func register(on router: inout Router) {
        var firebase = Router()
        registerRoutes(on: &firebase)
        Self.crossOrigin.register(firebase, on: &router)
        registerEmulatorRoutes(on: &router)
        registerJWKSRoute(on: &router, keys: idTokens.keys, path: "/.well-known/firebase-jwks.json")
    }

    private func registerRoutes(on router: inout Router) {
        let v1 = Self.identityToolkit
        let v3 = Self.relyingParty
        let client: [(String, [String], @Sendable (FirebaseRequest) async throws -> JSONValue)] = [
            ("accounts:signUp", ["signupNewUser"], signUp),
            ("accounts:signInWithPassword", ["verifyPassword"], signInWithPassword),
            ("accounts:signInWithIdp", ["verifyAssertion"], signInWithIdp),
            ("accounts:lookup", ["getAccountInfo"], lookup),
            ("accounts:update", ["setAccountInfo"], update),
            ("accounts:delete", ["deleteAccount"], delete),
            ("accounts:signInWithCustomToken", ["verifyCustomToken"], signInWithCustomToken),
            ("accounts:createAuthUri", ["createAuthUri"], createAuthUri),
            ("accounts:sendOobCode", ["getOobConfirmationCode"], sendOobCode),
            ("accounts:resetPassword", ["resetPassword"], resetPassword),
        ]
        for (method, aliases, handler) in client {
            router.post("\(v1)/\(method)") { request in try await answer(request, admin: false, handler) }
            for alias in aliases {
                router.post("\(v3)/\(alias)") { request in try await answer(request, admin: false, handler) }
            }
        }
        let admin: [(String, String, @Sendable (FirebaseRequest) async throws -> JSONValue)] = [
            ("POST", "accounts", create),
            ("POST", "accounts:lookup", lookup),
            ("POST", "accounts:update", update),
            ("POST", "accounts:delete", delete),
            ("POST", "accounts:batchDelete", batchDelete),
            ("POST", "accounts:batchCreate", batchCreate),
            ("GET", "accounts:batchGet", batchGet),
        ]
        for (method, path, handler) in admin {
            router.add(method, "\(v1)/projects/{projectId}/\(path)") { request in try await answer(request, admin: true, handler) }
        }
        router.post("\(v1)/projects/{projectId}:createSessionCookie") { request in
            try await answer(request, admin: true, createSessionCookie)
        }
        router.post("/securetoken.googleapis.com/v1/token") { request in try await answer(request, admin: false, refresh) }
        router.get("\(v3)/getProjectConfig") { request in
            try await answer(request, admin: false) { _ in
                .object(["projectId": .string(projectID), "authorizedDomains": .array(["localhost", "127.0.0.1"])])
            }
        }
        registerMFA(on: &router)
        registerEmail(on: &router)
    }

    // MARK: The request around every route

    /// Runs `handler` on the decoded request and answers its result, or its error in Firebase's form.
    ///
    /// - Parameter admin: whether the route is an admin form (`projects/{pid}/…`), which needs an admin
    ///   credential; client routes take one too (firebase-admin's calls), which lifts them to the admin form.
    func answer(
        _ request: HTTPRequest, admin requiresAdmin: Bool, _ handler: (FirebaseRequest) async throws -> JSONValue
    ) async throws -> HTTPResponse {
        do {
            if let project = request.pathParameters["projectId"], project != projectID {
                throw FirebaseError("PROJECT_NOT_FOUND", "This server serves the Firebase project \(projectID).", status: 404)
            }
            let admin = try await authorizeAdmin(request)
            if requiresAdmin, admin == nil { throw FirebaseError.unauthenticated }
            let body = try FirebaseBody(request)
            // Tether keeps one pool of users: a request for a tenant's is refused, never answered from the default pool.
            if case .string(let tenant)? = body.members["tenantId"], !tenant.isEmpty {
                throw FirebaseError("TENANT_NOT_FOUND", "This server has no tenants: leave tenantId out.")
            }
            return SurfaceJSON.response(try await handler(FirebaseRequest(http: request, body: body, admin: admin)))
        } catch let error where error is FirebaseError || Problem(converting: error) != nil {
            return FirebaseError(converting: error).response
        }
        // A failure no layer knows goes on to the server, which logs it and answers 500 in this surface's form
        // (``problemRenderers``); firebase-admin retries it.
    }

    /// The admin credential of the request: `Bearer owner` under `tether dev`, or an admin key with role
    /// `admin`; nil when it carries none; 401 for any other `Authorization`.
    private func authorizeAdmin(_ request: HTTPRequest) async throws -> FirebaseAdmin? {
        guard let (scheme, token) = request.authorization else { return nil }
        guard scheme == "bearer", !token.isEmpty else { throw FirebaseError.unauthenticated }
        if token.lowercased() == "owner" {
            // `owner` is the developer's own tooling (firebase-admin, curl), never a page of another site calling
            // the developer's local server across origins: a request a browser marks with a foreign origin is refused.
            guard acceptsOwner, PublicBase.isFromThisMachine(request) else { throw FirebaseError.unauthenticated }
            return .owner
        }
        guard let key = try await adminKeys.authenticate(token) else { throw FirebaseError.unauthenticated }
        guard key.role == .admin else { throw FirebaseError.insufficientPermission }
        return .key(key)
    }

    /// Records an admin key's read before the answer goes, as `/v1/admin` and Parse's master key do, so that a
    /// user's history shows who looked at them. `owner` (`tether dev`) is no key, and records nothing.
    func recordRead(_ records: [AdminEvent], _ request: FirebaseRequest) async throws {
        guard case .key(let key)? = request.admin else { return }
        let metadata = context(request).metadata
        for record in records { try await adminKeys.record(record, keyId: key.id, metadata: metadata) }
    }

    // MARK: Pieces

    /// `accounts:createAuthUri` (the deprecated `fetchSignInMethods`): no methods, whatever the email, as
    /// Firebase answers with email enumeration protection on, so nobody can probe which emails have accounts.
    func createAuthUri(_ request: FirebaseRequest) async throws -> JSONValue {
        guard try request.body.string("identifier") != nil else { throw FirebaseError("MISSING_IDENTIFIER") }
        return .object(["kind": "identitytoolkit#CreateAuthUriResponse", "signinMethods": .array([]), "allProviders": .array([])])
    }

    /// A new command's context; each command a request runs gets its own id.
    func context(_ request: FirebaseRequest, user: UUID? = nil) -> CommandContext {
        let actor: EventActor =
            switch request.admin {
            case .owner?: .operator("firebase-admin (dev owner)")
            case .key(let key)?: .admin(keyId: key.id)
            case nil: user.map(EventActor.user) ?? .anonymous
            }
        return CommandContext(metadata: EventMetadata(
            actor: actor, clientIP: request.http.remoteAddress, userAgent: request.http.headers["user-agent"], surface: Self.surface))
    }

    /// A user's Firebase `localId`: the uid a developer chose for them, or Tether's id.
    static func localId(of account: UserAccount) -> String {
        account.identities[UserAccount.customProvider]?.uid ?? account.id.lowercasedText
    }

    /// The user a `localId` names (a developer's uid, or Tether's id of a user without one); nil for none.
    func user(localId: String) async throws -> UUID? {
        guard !localId.isEmpty, localId.utf8.count <= 128 else { return nil }
        // Tether's ids are written lowercase: another spelling is another (developer's) uid, never this user.
        let uuid = UUID(text: localId).flatMap { $0.lowercasedText == localId ? $0 : nil }
        let sealedUID = try (try await accounts.database.readModelSeal()).seal(localId)
        let rows = try await accounts.database.query("""
            SELECT i.user_id AS id FROM identities i JOIN users u ON u.id = i.user_id
            WHERE i.provider = \(UserAccount.customProvider) AND i.provider_uid = \(sealedUID) AND u.erased_at IS NULL
            UNION ALL
            SELECT u.id FROM users u WHERE u.id = \(uuid) AND u.erased_at IS NULL
              AND NOT EXISTS (SELECT 1 FROM identities c WHERE c.user_id = u.id AND c.provider = \(UserAccount.customProvider))
            LIMIT 1
            """)
        return try rows.first?.decode("id")
    }

    /// The live user of an ID token: its signature, project and expiry, then its session (ended by a
    /// revocation, a sign-out or a disable: `TOKEN_EXPIRED`, or `USER_DISABLED`).
    func authenticate(idToken: String?) async throws -> (account: UserAccount, claims: FirebaseIDTokenClaims) {
        guard let idToken, !idToken.isEmpty else { throw FirebaseError("MISSING_ID_TOKEN") }
        let claims = try await idTokens.verify(idToken)
        let rows = try await accounts.database.query("""
            SELECT s.user_id, u.disabled, u.erased_at IS NOT NULL AS erased,
                   s.ended_at IS NULL AND (u.valid_since IS NULL
                       OR u.valid_since <= \(ISO8601Milliseconds.format(claims.issuedAt.addingTimeInterval(0.999)))::timestamptz) AS live
            FROM sessions s JOIN users u ON u.id = s.user_id
            WHERE s.id = \(claims.sessionId) AND s.secret_kind = \(SessionSecretKind.firebaseTokens.rawValue)
            """)
        guard let row = rows.first else { throw FirebaseError.invalidIDToken }
        if try row.decode("erased", as: Bool.self) { throw FirebaseError.userNotFound }
        if try row.decode("disabled", as: Bool.self) { throw FirebaseError.userDisabled }
        guard try row.decode("live", as: Bool.self) else { throw FirebaseError.tokenExpired }
        let account = try await accounts.read(try row.decode("user_id"))
        guard account.exists, Self.localId(of: account) == claims.localId else { throw FirebaseError.userNotFound }
        return (account, claims)
    }

    /// The answer members of a new session: a fresh ID token beside the session's refresh token. The token
    /// names the session's second factor, when it passed one.
    func tokens(
        _ account: UserAccount, session: NewSession, refreshToken: String, signInProvider: String
    ) async throws -> [String: JSONValue] {
        let idToken = try await idTokens.issue(
            account, localId: Self.localId(of: account), sessionId: session.id, authTime: Self.authTime(of: session, in: account),
            signInProvider: signInProvider, secondFactor: Self.secondFactor(amr: session.amr), secondFactorId: session.secondFactorId,
            developerClaims: session.developerClaims)
        return ["idToken": .string(idToken), "refreshToken": .string(refreshToken), "expiresIn": "3600", "localId": .string(Self.localId(of: account))]
    }

    /// The `auth_time` of a new session's first ID token: the sign-in time the session keeps, which every refresh
    /// repeats, not the later moment the token is made.
    static func authTime(of session: NewSession, in account: UserAccount) -> Date {
        session.authTime ?? account.sessions[session.id]?.authTime ?? Date()
    }

    /// A session to open on this surface, and its refresh token.
    func newSession(provider: String) -> (NewSession, String) {
        FirebaseTokenFormat().newSession(amr: AccountCommands.authenticationMethods(provider: provider), jkt: nil)
    }
}

/// An admin caller of the Firebase surface.
enum FirebaseAdmin: Sendable {
    /// `Bearer owner`, which firebase-admin sends to an emulator: accepted only under `tether dev`.
    case owner
    /// An admin key of role `admin`.
    case key(AdminKey)
}

/// One decoded request of the Firebase surface.
struct FirebaseRequest: Sendable {
    let http: HTTPRequest
    let body: FirebaseBody
    /// The admin caller; nil for a client.
    let admin: FirebaseAdmin?
}

/// A request body of the Identity Toolkit: a JSON object (or a form, for the Secure Token API) whose keys
/// may be camelCase or snake_case; read by camelCase name, refusing members of the wrong type.
struct FirebaseBody: Sendable {
    let members: [String: JSONValue]

    init(_ request: HTTPRequest) throws(FirebaseError) {
        var members: [String: JSONValue] = [:]
        let contentType = request.headers["content-type"]?.lowercased() ?? ""
        if contentType.hasPrefix("application/x-www-form-urlencoded") {
            for (name, value) in HTTPRequest.formFields(String(decoding: request.body, as: UTF8.self)) {
                guard members[name] == nil else { throw FirebaseError("INVALID_ARGUMENT", "The form names \(name) twice.") }
                members[name] = .string(value)
            }
        } else if !request.body.isEmpty {
            let value: JSONValue
            do {
                value = try CompactJSONDecoder(refusesDuplicateNames: true).decode(JSONValue.self, from: request.body)
            } catch let error as DecodingError where Problem.memberGivenTwice(error) != nil {
                throw FirebaseError("INVALID_ARGUMENT", Problem.memberGivenTwice(error)!)
            } catch {
                throw FirebaseError("INVALID_ARGUMENT", "The request body must be a JSON object.")
            }
            guard case .object(let object) = value else { throw FirebaseError("INVALID_ARGUMENT", "The request body must be a JSON object.") }
            members = object
        }
        self.members = try Self.camelCased(members)
    }

    init(members: [String: JSONValue]) {
        self.members = members
    }

    /// `members` under their camelCase names, at every depth. Two names that come to one (`idToken` and
    /// `id_token`) are refused, as a name given twice is: which of them counted would be this reader's choice.
    static func camelCased(_ members: [String: JSONValue]) throws(FirebaseError) -> [String: JSONValue] {
        func convert(_ value: JSONValue) throws(FirebaseError) -> JSONValue {
            switch value {
            case .object(let object): return .object(try camelCased(object))
            case .array(let values):
                var converted: [JSONValue] = []
                for value in values { converted.append(try convert(value)) }
                return .array(converted)
            default: return value
            }
        }
        var camel: [String: JSONValue] = [:]
        for (name, value) in members {
            let key = camelCase(name)
            guard camel[key] == nil else { throw FirebaseError("INVALID_ARGUMENT", "The body names \(key) twice (as \(name) and another spelling).") }
            camel[key] = try convert(value)
        }
        return camel
    }

    static func camelCase(_ name: String) -> String {
        guard name.contains("_") else { return name }
        let parts = name.split(separator: "_", omittingEmptySubsequences: true)
        guard let first = parts.first else { return name }
        return String(first) + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    func string(_ name: String) throws(FirebaseError) -> String? {
        switch members[name] {
        case nil, .null?: return nil
        case .string(let text)?:
            guard text.utf8.count <= 16 * 1024 else { throw FirebaseError("INVALID_ARGUMENT", "\(name) is too long.") }
            guard !text.unicodeScalars.contains(where: { $0 == "\u{0}" }) else { throw FirebaseError("INVALID_ARGUMENT", "\(name) holds a NUL.") }
            return text
        default: throw FirebaseError("INVALID_ARGUMENT", "\(name) must be a string.")
        }
    }

    /// An email address as Firebase keeps it: in lowercase (the emulator's `canonicalizeEmailAddress`), and
    /// without surrounding white space (``ExternalIdentity/normalize(_:)``), so that what is stored, answered
    /// and put in ID tokens is the address firebase-admin looks up.
    func email(_ name: String = "email") throws(FirebaseError) -> String? {
        try string(name).map(ExternalIdentity.normalize)
    }

    func bool(_ name: String) throws(FirebaseError) -> Bool? {
        switch members[name] {
        case nil, .null?: return nil
        case .bool(let value)?: return value
        case .string("true")?: return true
        case .string("false")?: return false
        default: throw FirebaseError("INVALID_ARGUMENT", "\(name) must be a boolean.")
        }
    }

    /// An integer, or a string of one (firebase-admin sends `validSince` as an integer, the emulator's
    /// clients as a string).
    func integer(_ name: String) throws(FirebaseError) -> Int? {
        switch members[name] {
        case nil, .null?: return nil
        case .int(let value)?: return value
        case .string(let text)?:
            guard let value = Int(text) else { throw FirebaseError("INVALID_ARGUMENT", "\(name) must be an integer.") }
            return value
        default: throw FirebaseError("INVALID_ARGUMENT", "\(name) must be an integer.")
        }
    }

    func strings(_ name: String) throws(FirebaseError) -> [String] {
        switch members[name] {
        case nil, .null?: return []
        case .string(let text)?: return [text]
        case .array(let values)?:
            return try values.map { value throws(FirebaseError) in
                guard case .string(let text) = value else { throw FirebaseError("INVALID_ARGUMENT", "\(name) must hold strings.") }
                return text
            }
        default: throw FirebaseError("INVALID_ARGUMENT", "\(name) must be a list of strings.")
        }
    }

    func objects(_ name: String) throws(FirebaseError) -> [[String: JSONValue]] {
        switch members[name] {
        case nil, .null?: return []
        case .array(let values)?:
            return try values.map { value throws(FirebaseError) in
                guard case .object(let object) = value else { throw FirebaseError("INVALID_ARGUMENT", "\(name) must hold objects.") }
                return object
            }
        default: throw FirebaseError("INVALID_ARGUMENT", "\(name) must be a list of objects.")
        }
    }
}
