import Foundation
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherProviders

/// Sign-up, sign-in and token refresh of the Firebase surface (`accounts:signUp`, `:signInWithPassword`,
/// `:signInWithIdp`, and the Secure Token API), with the v3 names of the iOS SDK beside them.
extension FirebaseRoutes {
    /// `accounts:signUp`: anonymous with neither email nor password; email and password; or, with an
    /// `idToken`, email and password added to that (anonymous) user, which keeps its `localId` and takes the
    /// request's `displayName` when it has one (a link without one keeps the user's name). The answer
    /// carries the user's `displayName`, as Firebase's does.
    func signUp(_ request: FirebaseRequest) async throws -> JSONValue {
        let body = request.body
        let email = try body.email()
        let password = try body.string("password")
        var answer: [String: JSONValue] = ["kind": "identitytoolkit#SignupNewUserResponse"]
        if email == nil, password == nil, body.members["idToken"] == nil {
            let (session, refreshToken) = newSession(provider: ExternalIdentity.anonymousProvider)
            let result = try await commands.signIn(SignInCommand(credential: .anonymous(id: nil), session: session, context: context(request)))
            guard case .signedIn(let account, _) = result else { throw FirebaseError("INTERNAL_ERROR", status: 500) }
            return .object(answer.merging(try await tokens(account, session: session, refreshToken: refreshToken, signInProvider: "anonymous")) { $1 })
        }
        guard let email, !email.isEmpty else { throw FirebaseError(email == nil ? "MISSING_EMAIL" : "INVALID_EMAIL") }
        guard AccountCommands.isEmail(email) else { throw FirebaseError("INVALID_EMAIL") }
        guard let password, !password.isEmpty else { throw FirebaseError("MISSING_PASSWORD") }
        do { try commands.checkPassword(password) } catch { throw Self.weakPassword(error) }
        let displayName = try body.string("displayName")
        do { try UserAccount.checkProfile(displayName: displayName, photoURL: nil) } catch { throw FirebaseError(converting: error) }
        let (session, refreshToken) = newSession(provider: ProviderName.password.rawValue)
        let account: UserAccount
        var answered = session
        if let idToken = try body.string("idToken") {
            let caller = try await authenticate(idToken: idToken)
            let context = context(request, user: caller.account.id)
            let reissue = Reissue(claims: caller.claims, proved: nil, linked: ProviderName.password.rawValue, base: (session, refreshToken), now: context.now)
            do {
                // A password added to a user who is not anonymous needs a recent sign-in, as on /v1. The name,
                // and new tokens (the caller just proved the password and a live session), come in the same command.
                // Its address becomes the user's email, unverified when it is another, as Firebase's signUp sets it:
                // so the address is found, mailed and reset where it signs in, never held by a user who does not
                // show it (the link has checked, under the address's lock, that no other user holds it).
                var link = LinkCommand(
                    credential: .password(email: email, password: password), userId: caller.account.id, context: context,
                    authTime: caller.claims.authTime
                ) { linked in
                    try linked.deciding([
                        { state in try displayName.map { try state.updateProfile(displayName: $0, photoURL: nil, clearing: [], emailVerified: nil) } ?? [] },
                        { state in try reissue.decision(on: state) },
                    ], at: context.now)
                }
                link.passwordBecomesTheEmail = true
                account = try await commands.link(link)
                answered = reissue.session(in: account)
            } catch let error as AccountError where error.reason == .providerAlreadyLinked {
                throw FirebaseError("PROVIDER_ALREADY_LINKED")
            }
        } else {
            do {
                account = try await commands.signUp(SignUpCommand(
                    email: email, password: password, displayName: displayName, session: session, context: context(request)))
            } catch let error as AccountError where error.reason == .emailAlreadyInUse {
                throw FirebaseError.emailExists
            }
        }
        answer["email"] = .string(email)
        if let name = account.displayName { answer["displayName"] = .string(name) }
        return .object(answer.merging(try await tokens(account, session: answered, refreshToken: refreshToken, signInProvider: "password")) { $1 })
    }

    /// `WEAK_PASSWORD : <the policy's reason>` for a password the policy refuses (at least 8 characters, where
    /// Firebase asks 6).
    static func weakPassword(_ error: any Error) -> FirebaseError {
        FirebaseError("WEAK_PASSWORD", (error as? ProviderError)?.clientSentence ?? "The password does not meet the policy.")
    }

    /// `accounts:signInWithPassword`.
    func signInWithPassword(_ request: FirebaseRequest) async throws -> JSONValue {
        guard let email = try request.body.email(), !email.isEmpty else { throw FirebaseError("INVALID_EMAIL") }
        guard let password = try request.body.string("password"), !password.isEmpty else { throw FirebaseError("MISSING_PASSWORD") }
        guard AccountCommands.isEmail(email) else { throw FirebaseError("INVALID_EMAIL") }
        let (session, refreshToken) = newSession(provider: ProviderName.password.rawValue)
        let result: SignInResult
        do {
            result = try await commands.signIn(SignInCommand(
                credential: .password(email: email, password: password), session: session, context: context(request)))
        } catch {
            throw FirebaseError(converting: error, password: true)
        }
        var answer: [String: JSONValue] = ["kind": "identitytoolkit#VerifyPasswordResponse", "email": .string(email), "registered": true]
        switch result {
        case .signedIn(let account, _):
            if let name = account.displayName { answer["displayName"] = .string(name) }
            return .object(answer.merging(try await tokens(account, session: session, refreshToken: refreshToken, signInProvider: "password")) { $1 })
        case .secondFactorRequired(let userId, let pending, let factors):
            return try await secondFactorRequired(answer, userId: userId, pending: pending, factors: factors)
        case .needsConfirmation:
            throw FirebaseError.invalidLoginCredentials
        }
    }

    /// A first factor that needs a second: no tokens, `mfaPendingCredential` and `mfaInfo`.
    private func secondFactorRequired(
        _ answer: [String: JSONValue], userId: UUID, pending: String, factors: [MFAState.Factor]
    ) async throws -> JSONValue {
        var answer = answer
        answer["mfaPendingCredential"] = .string(pending)
        answer["mfaInfo"] = .array(factors.map(FirebaseUserRecord.mfaInfo))
        answer["localId"] = .string(Self.localId(of: try await accounts.read(userId)))
        return .object(answer)
    }

    /// `accounts:signInWithIdp`: `postBody` names the provider and its token (and the raw nonce); with an
    /// `idToken`, the identity is linked to that user. An identity linked elsewhere, or an email another
    /// account holds, is `FEDERATED_USER_ID_ALREADY_LINKED` / `EMAIL_EXISTS`: 400, or 200 with `errorMessage`
    /// when `returnIdpCredential` asks for it. An account holding the email that this identity may not
    /// take over answers `needConfirmation` with no tokens. Those refusals of a token with a nonce carry a
    /// `pendingToken` that stands for the credential (``FirebasePendingTokens``).
    func signInWithIdp(_ request: FirebaseRequest) async throws -> JSONValue {
        let context = context(request)
        let posted = try request.body.string("postBody").flatMap { $0.isEmpty ? nil : Self.postBodyFields($0) }
        var pending: FirebasePendingTokens.Pending?
        if let pendingToken = try request.body.string("pendingToken"), !pendingToken.isEmpty {
            let opened = try await pendingTokens.open(pendingToken, now: context.now, on: accounts.database)
            // What is posted beside it (the iOS SDK posts the token again, without its nonce) must be what it stands for.
            if let posted, posted["providerId"] != opened.providerId || posted["id_token"] != opened.echoed["oauthIdToken"] || posted["nonce"] != nil {
                throw FirebasePendingTokens.invalid
            }
            pending = opened
        }
        guard let fields = pending.map(Self.postBodyFields(of:)) ?? posted else {
            throw FirebaseError("INVALID_IDP_RESPONSE", "postBody or pendingToken is required.")
        }
        let (providerId, credential, echoed) = try Self.idpCredential(fields)
        let returnsCredential = try request.body.bool("returnIdpCredential") ?? false
        // The caller a link is for is authenticated first: a bad `idToken` must not spend the credential's nonce.
        var caller: (account: UserAccount, claims: FirebaseIDTokenClaims)?
        if let idToken = try request.body.string("idToken") { caller = try await authenticate(idToken: idToken) }
        var identity: ExternalIdentity
        do {
            if let pending {
                // Verified when it was refused: what it stands for is taken once.
                guard let respent = try await commands.respend(
                    pending.identity, nonce: FirebasePendingTokens.singleUse(of: pending), context: context) else {
                    throw FirebasePendingTokens.used
                }
                identity = respent
            } else {
                identity = try await commands.verify(credential, context: context)
            }
        } catch {
            throw FirebaseError(converting: error)
        }
        // What a refusal's pending token stands for: the credential as it was verified (a redeemed one's, again).
        let refused = FirebasePendingTokens.Pending(
            providerId: providerId, echoed: echoed, identity: pending?.identity ?? identity,
            expires: pending?.expires ?? Int(context.now.timeIntervalSince1970 + FirebasePendingTokens.lifetime))
        // Firebase keeps an IdP's address in lowercase too (FirebaseBody.email(_:)).
        identity.email = identity.email.map(ExternalIdentity.normalize)
        var answer: [String: JSONValue] = [
            "kind": "identitytoolkit#VerifyAssertionResponse", "providerId": .string(providerId), "federatedId": .string(identity.uid),
            "rawUserInfo": .string(Self.rawUserInfo(identity)),
        ]
        answer.merge(echoed.mapValues(JSONValue.string)) { $1 }
        if let email = identity.email {
            answer["email"] = .string(email)
            answer["emailVerified"] = .bool(identity.isEmailVerified)
        }
        if let name = identity.displayName { answer["displayName"] = .string(name) }
        if let photo = identity.photoURL { answer["photoUrl"] = .string(photo) }
        let (session, refreshToken) = newSession(provider: identity.provider)
        let signIn = SignInCommand(credential: credential, session: session, context: context)
        if let caller {
            let context = self.context(request, user: caller.account.id)
            let account: UserAccount
            // Linked: new tokens for the caller in the same command, continuing the caller's sign-in (its time and
            // second factor), with no second sign-in (which a second factor would stop).
            let reissue = Reissue(claims: caller.claims, proved: nil, linked: identity.provider, base: (session, refreshToken), now: context.now)
            do {
                account = try await commands.link(identity, to: caller.account.id, context: context) { linked in
                    try reissue.decision(on: linked)
                }
            } catch let error as AccountError where [.credentialAlreadyInUse, .emailAlreadyInUse].contains(error.reason) && returnsCredential {
                answer["errorMessage"] = .string(FirebaseError(converting: error).code)
                return try await refusal(answer, of: refused, redeemed: pending != nil, context: context)
            } catch {
                throw FirebaseError(converting: error)
            }
            return .object(answer.merging(
                try await tokens(account, session: reissue.session(in: account), refreshToken: refreshToken, signInProvider: providerId)) { $1 })
        }
        if try request.body.bool("autoCreate") == false,
           try await accounts.database.query(try AccountProjection.identityOwner(
               provider: identity.provider, uid: identity.uid, seal: try await accounts.database.readModelSeal())).isEmpty {
            // Reauthentication (the iOS SDK sends autoCreate: false) never makes a user.
            await commands.release([identity])
            throw FirebaseError.userNotFound
        }
        let result: SignInResult
        do {
            result = try await commands.signIn(signIn, verified: identity)
        } catch {
            throw FirebaseError(converting: error)
        }
        switch result {
        case .signedIn(let account, let isNewUser):
            if isNewUser { answer["isNewUser"] = true }
            return .object(answer.merging(try await tokens(account, session: session, refreshToken: refreshToken, signInProvider: providerId)) { $1 })
        case .secondFactorRequired(let userId, let pending, let factors):
            return try await secondFactorRequired(answer, userId: userId, pending: pending, factors: factors)
        case .needsConfirmation(let email, let methods, let owner):
            answer["needConfirmation"] = true
            answer["email"] = .string(email)
            answer["verifiedProvider"] = .array(methods.compactMap(FirebaseProviders.firebaseName).map(JSONValue.string))
            if let owner {
                answer["localId"] = .string(Self.localId(of: try await accounts.read(owner)))
            }
            return try await refusal(answer, of: refused, redeemed: pending != nil, context: context)
        }
    }

    /// `answer`, a refusal of a credential that the SDKs offer the app again, with a pending token when the
    /// credential is an ID token (which they post again without its nonce, code and name, or not at all).
    ///
    /// A token's nonce, given back when the command was refused, goes to the pending token instead: it is spent again
    /// until the pending token expires, so that neither the token posted again directly, nor a pending token once
    /// that has been done, takes what it stands for a second time. (The SDKs cannot post the nonce again anyway.)
    private func refusal(
        _ answer: [String: JSONValue], of credential: FirebasePendingTokens.Pending, redeemed: Bool, context: CommandContext
    ) async throws -> JSONValue {
        var answer = answer
        guard credential.echoed["oauthIdToken"] != nil else { return .object(answer) }
        if !redeemed, let nonce = credential.identity.spentNonce {
            let until = Date(timeIntervalSince1970: TimeInterval(credential.expires))
            let kept = UsedNonce(scope: nonce.scope, hash: nonce.hash, expiresAt: max(nonce.expiresAt, until))
            // Spent meanwhile (the same token and nonce posted again at once): that request has it, this one gets no token.
            guard try await commands.respend(credential.identity, nonce: kept, context: context) != nil else { return .object(answer) }
        }
        answer["pendingToken"] = .string(try await pendingTokens.issue(credential, on: accounts.database))
        return .object(answer)
    }

    /// The fields of the credential `pending` stands for, as they were posted but for what it holds verified.
    private static func postBodyFields(of pending: FirebasePendingTokens.Pending) -> [String: String] {
        var fields = ["providerId": pending.providerId]
        fields["id_token"] = pending.echoed["oauthIdToken"]
        fields["access_token"] = pending.echoed["oauthAccessToken"]
        return fields
    }

    /// The fields of a `postBody` (`providerId=…&id_token=…&nonce=…`), raw as the SDKs send them; a field named
    /// twice keeps its first value, an empty one is left out.
    static func postBodyFields(_ postBody: String) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in HTTPRequest.formFields(postBody, plusAsSpace: false) where fields[name] == nil && !value.isEmpty {
            fields[name] = value
        }
        return fields
    }

    /// The provider, its credential and the IdP's tokens to echo from a `postBody`'s fields (`providerId`, `id_token`,
    /// `nonce`, or `access_token` for classic Facebook; Apple's name in `user` and its authorization code in `code`).
    ///
    /// The echo is `oauthIdToken` and `oauthAccessToken` for the posted `id_token` and `access_token`, as Firebase
    /// answers them: the iOS SDK builds the credential of an `accountExistsWithDifferentCredential` or
    /// `credentialAlreadyInUse` error only when one of them is there (WIRE-FACTS §6b).
    static func idpCredential(_ fields: [String: String]) throws(FirebaseError) -> (String, ProviderCredential, [String: String]) {
        let nonce = fields["nonce"]
        let idToken = fields["id_token"]
        let accessToken = fields["access_token"]
        for token in [idToken, accessToken, nonce].compactMap({ $0 }) where token.utf8.count > ProviderCredential.maximumFieldLength {
            throw FirebaseError("INVALID_IDP_RESPONSE", "A token in postBody is too long.")
        }
        guard let providerId = fields["providerId"] else {
            throw FirebaseError("INVALID_PROVIDER_ID", "postBody names no providerId.")
        }
        var echoed: [String: String] = [:]
        echoed["oauthIdToken"] = idToken
        echoed["oauthAccessToken"] = accessToken
        switch providerId {
        case "apple.com":
            guard let idToken else { throw FirebaseError("INVALID_IDP_RESPONSE", "apple.com needs an id_token.") }
            let code = fields["code"].flatMap { $0.utf8.count > ProviderCredential.maximumFieldLength ? nil : $0 }
            return (providerId, .apple(identityToken: idToken, rawNonce: nonce, fullName: appleName(fields["user"]), authorizationCode: code), echoed)
        case "facebook.com":
            if let idToken { return (providerId, .facebookLimitedLogin(authenticationToken: idToken, rawNonce: nonce), echoed) }
            guard let accessToken else { throw FirebaseError("INVALID_IDP_RESPONSE", "facebook.com needs an id_token or access_token.") }
            return (providerId, .facebookAccessToken(accessToken), echoed)
        case "google.com":
            guard let idToken else { throw FirebaseError("INVALID_IDP_RESPONSE", "google.com needs an id_token: a bare access token is not verified.") }
            return (providerId, .google(idToken: idToken, rawNonce: nonce), echoed)
        default:
            throw FirebaseError("INVALID_PROVIDER_ID", "Tether verifies apple.com, facebook.com and google.com.")
        }
    }

    /// Apple's `user={"name":{"firstName","lastName"}}`, which the app receives on the first sign-in only.
    private static func appleName(_ text: String?) -> PersonName? {
        guard let text, let value = try? CompactJSONDecoder().decode(JSONValue.self, from: Array(text.utf8)),
              case .object(let user) = value, case .object(let name)? = user["name"] else { return nil }
        func part(_ key: String) -> String? { if case .string(let text)? = name[key], !text.isEmpty { text } else { nil } }
        let person = PersonName(givenName: part("firstName"), familyName: part("lastName"))
        return person.formatted == nil ? nil : person
    }

    /// `rawUserInfo`: the verified profile as a JSON string (clients parse it when they want it).
    private static func rawUserInfo(_ identity: ExternalIdentity) -> String {
        var info: [String: JSONValue] = ["sub": .string(identity.uid), "id": .string(identity.uid)]
        if let email = identity.email { info["email"] = .string(email); info["email_verified"] = .bool(identity.isEmailVerified) }
        if let name = identity.displayName { info["name"] = .string(name) }
        if let photo = identity.photoURL { info["picture"] = .string(photo) }
        let bytes = SurfaceJSON.response(.object(info)).body
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `POST /securetoken.googleapis.com/v1/token`: a refresh token for a new ID token. The refresh token
    /// stays the same for the session's life, as Firebase's does; a revoked, ended or unknown one is
    /// `TOKEN_EXPIRED`, a disabled user's `USER_DISABLED` and a deleted user's `USER_NOT_FOUND` (Firebase's
    /// codes, each of which makes the SDKs sign out). Keys answered in snake_case.
    func refresh(_ request: FirebaseRequest) async throws -> JSONValue {
        guard let grantType = try request.body.string("grantType") else { throw FirebaseError("MISSING_GRANT_TYPE") }
        guard grantType == "refresh_token" else { throw FirebaseError("INVALID_GRANT_TYPE") }
        guard let presented = try request.body.string("refreshToken"), !presented.isEmpty else { throw FirebaseError("MISSING_REFRESH_TOKEN") }
        // Google's refresh tokens, which apps moving from Firebase still hold, end here too: the SDK signs out.
        guard FirebaseTokenFormat.format.isWellFormed(presented) else { throw FirebaseError.tokenExpired }
        let (account, session): (UserAccount, UserAccount.Session)
        do {
            // A session whose provider ended the grant is refused like an ended one: the SDK signs out.
            (account, session) = try await commands.liveSession(
                secretHash: FirebaseTokenFormat().hash(presented), kind: .firebaseTokens, context: context(request))
        } catch let error as AccountError where error.reason == .invalidToken {
            throw FirebaseError.tokenExpired
        }
        let idToken = try await idTokens.issue(
            account, localId: Self.localId(of: account), sessionId: session.id, authTime: session.authTime,
            signInProvider: Self.signInProvider(amr: session.amr), secondFactor: Self.secondFactor(amr: session.amr),
            secondFactorId: session.secondFactorId, developerClaims: session.developerClaims)
        return .object([
            "access_token": .string(idToken), "id_token": .string(idToken), "expires_in": "3600", "token_type": "Bearer",
            "refresh_token": .string(presented), "user_id": .string(Self.localId(of: account)), "project_id": .string(projectID),
        ])
    }

    /// `firebase.sign_in_provider` of a session opened with `amr`.
    static func signInProvider(amr: [String]) -> String {
        switch amr.first {
        case "pwd"?: "password"
        case let provider?: FirebaseProviders.firebaseName(provider) ?? provider
        case nil: "custom"
        }
    }

    /// `firebase.sign_in_second_factor` of a session that passed one.
    static func secondFactor(amr: [String]) -> String? {
        guard amr.contains("mfa") else { return nil }
        return amr.contains("sms") ? "phone" : "totp"
    }
}
