import Foundation
import TetherCore
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders

/// User management of the Firebase surface: the end-user form (`idToken`) and the admin form
/// (`projects/{pid}/…`, `localId`) of `accounts:lookup`, `:update` and `:delete`, and the admin-only
/// `accounts` (create), `:batchDelete` and `:batchGet` that firebase-admin calls.
extension FirebaseRoutes {
    /// The user a request is about: the `idToken`'s for a client; the `localId`'s for an admin (or, when an
    /// admin sends an `idToken`, its user).
    ///
    /// - Returns: the user, and the ID token's claims when a client (not an admin) is acting.
    private func subject(_ request: FirebaseRequest) async throws -> (account: UserAccount, claims: FirebaseIDTokenClaims?) {
        if request.admin != nil, request.body.members["idToken"] == nil {
            guard let localId = try request.body.string("localId"), !localId.isEmpty else { throw FirebaseError("MISSING_LOCAL_ID") }
            guard let userId = try await user(localId: localId) else { throw FirebaseError.userNotFound }
            let account = try await accounts.read(userId)
            guard account.exists else { throw FirebaseError.userNotFound }
            return (account, nil)
        }
        let (account, claims) = try await authenticate(idToken: try request.body.string("idToken"))
        return (account, claims)
    }

    /// A client's change that a stolen token must not make (a password, a removed provider, a deletion) needs a
    /// sign-in of the last five minutes, as Firebase asks (`CREDENTIAL_TOO_OLD_LOGIN_AGAIN`).
    private static func requireRecentSignIn(_ claims: FirebaseIDTokenClaims?) throws(FirebaseError) {
        guard let claims else { return }
        do { try UserAccount.requireRecentSignIn(authTime: claims.authTime, now: Date()) } catch { throw FirebaseError(converting: error) }
    }

    /// `accounts:lookup`: by `idToken`, or (admin) by `localId`, `email`, `phoneNumber` and
    /// `federatedUserId` lists. With no match the answer has no `users` key, as firebase-admin expects.
    func lookup(_ request: FirebaseRequest) async throws -> JSONValue {
        var answer: [String: JSONValue] = ["kind": "identitytoolkit#GetAccountInfoResponse"]
        guard request.admin != nil, request.body.members["idToken"] == nil else {
            answer["users"] = .array([FirebaseUserRecord.json(try await subject(request).account)])
            return .object(answer)
        }
        let body = request.body
        var ids: [UUID] = []
        for localId in try body.strings("localId") {
            if let id = try await user(localId: localId) { ids.append(id) }
        }
        let seal = try await accounts.database.readModelSeal()
        let emails = try body.strings("email").map { try seal.seal(ExternalIdentity.normalize($0)) }
        if !emails.isEmpty {
            ids += try await accounts.database.query("""
                SELECT id FROM users WHERE email_normalized = ANY(\(PostgresArray(emails))::text[]) AND erased_at IS NULL ORDER BY created_at
                """).map { try $0.decode("id", as: UUID.self) }
        }
        for federated in try body.objects("federatedUserId") {
            guard case .string(let providerId)? = federated["providerId"], case .string(let rawId)? = federated["rawId"] else {
                throw FirebaseError("INVALID_ARGUMENT", "federatedUserId entries need a providerId and a rawId.")
            }
            // A provider Tether does not serve (github.com, say) holds nobody: no match, as a lookup of nobody is,
            // so firebase-admin's get_users lists it in not_found and answers the rest.
            guard let provider = FirebaseProviders.tetherName(providerId) else { continue }
            let uid = provider == "password" ? ExternalIdentity.normalize(rawId) : rawId
            ids += try await accounts.database.query(try AccountProjection.identityOwner(provider: provider, uid: uid, seal: seal))
                .map { try $0.decode("user_id", as: UUID.self) }
        }
        // Phone numbers are second factors in Tether, never a way to find a user: no match.
        var seen: Set<UUID> = []
        var users: [JSONValue] = []
        var shown: [UUID] = []
        for id in ids where seen.insert(id).inserted {
            let account = try await accounts.read(id)
            if account.exists {
                users.append(FirebaseUserRecord.json(account))
                shown.append(id)
            }
        }
        try await recordRead(shown.map { .userViewed(.init(userId: $0, status: 200)) }, request)
        if !users.isEmpty { answer["users"] = .array(users) }
        return .object(answer)
    }

    /// Members a user's create or update may carry that Tether does not keep: refused, never answered 200 with
    /// nothing done (firebase-admin would report a success). Phone numbers are second factors only; a provider is
    /// linked by signing in with it.
    static func refuseWhatIsNotKept(_ body: FirebaseBody) throws(FirebaseError) {
        if try body.string("phoneNumber") != nil {
            throw FirebaseError("INVALID_ARGUMENT", "Tether keeps phone numbers as second factors only, not on the user.")
        }
        try refuseGivenFactors(body)
        if let unsupported = ["linkProviderUserInfo", "upgradeToFederatedLogin"].first(where: { body.members[$0] != nil }) {
            throw FirebaseError(
                "OPERATION_NOT_ALLOWED", "\(unsupported) is not offered by this server: a provider is linked by signing in with it (signInWithIdp with the user's idToken).")
        }
    }

    /// Second factors are enrolled by their user, who holds the secret or the phone: none is given at a create or
    /// an import (`mfaInfo`), where they would be dropped.
    static func refuseGivenFactors(_ body: FirebaseBody) throws(FirebaseError) {
        if let factors = body.members["mfaInfo"], factors != .null, factors != .array([]) {
            throw FirebaseError("OPERATION_NOT_ALLOWED", "Second factors are enrolled by their user (mfaEnrollment:start and finalize), not given with mfaInfo.")
        }
    }

    /// `accounts:update`. A client changes its own profile, password and providers; an admin also
    /// disables, verifies the email, sets developer claims, revokes (`validSince`) and sets passwords.
    /// Every field is checked before the first write.
    func update(_ request: FirebaseRequest) async throws -> JSONValue {
        if let code = try request.body.string("oobCode") { return try await applyOobCode(code, request) }
        let body = request.body
        let isAdmin = request.admin != nil
        var (account, claims) = try await subject(request)
        let userId = account.id
        let displayName = try body.string("displayName")
        let photoURL = try body.string("photoUrl")
        do { try UserAccount.checkProfile(displayName: displayName, photoURL: photoURL) } catch { throw FirebaseError(converting: error) }
        let password = try body.string("password")
        var cleared: Set<String> = []
        for attribute in try body.strings("deleteAttribute") {
            switch attribute {
            case "DISPLAY_NAME": cleared.insert("displayName")
            case "PHOTO_URL": cleared.insert("photoURL")
            default: throw FirebaseError("INVALID_ARGUMENT", "deleteAttribute takes DISPLAY_NAME and PHOTO_URL.")
            }
        }
        var unlinks: [String] = []
        for providerId in try body.strings("deleteProvider") where providerId != "phone" {
            guard let provider = FirebaseProviders.tetherName(providerId) else { throw FirebaseError("INVALID_PROVIDER_ID", providerId) }
            unlinks.append(provider)
        }
        var newEmail: String?
        if let email = try body.email(), email != account.email.map(ExternalIdentity.normalize) {
            // A client proves a new address first (verifyBeforeUpdateEmail, with the email flows); an admin sets it.
            guard isAdmin else { throw FirebaseError("EMAIL_CHANGE_NEEDS_VERIFICATION") }
            guard AccountCommands.isEmail(email) else { throw FirebaseError("INVALID_EMAIL") }
            newEmail = email
        }
        let adminOnly = ["disableUser", "emailVerified", "customAttributes", "validSince", "mfa"].filter { body.members[$0] != nil }
        if !isAdmin, !adminOnly.isEmpty { throw FirebaseError.insufficientPermission }
        try Self.refuseWhatIsNotKept(body)
        let disable = try body.bool("disableUser")
        let emailVerified = try body.bool("emailVerified")
        let customClaims = try body.string("customAttributes").map { text throws(FirebaseError) in try Self.checkedClaims(text) }
        let validSince = try body.integer("validSince")
        // firebase-admin's `multiFactor: {enrolledFactors: null}` (or an empty list): every factor goes. Factors
        // are enrolled by their user, so a list of them is refused rather than answered 200 with nothing done.
        var removesFactors = false
        if let mfa = body.members["mfa"], mfa != .null {
            guard case .object(let members) = mfa, members.keys.allSatisfy({ $0 == "enrollments" }),
                  [nil, .null, .array([])].contains(members["enrollments"]) else {
                throw FirebaseError("OPERATION_NOT_ALLOWED", "An admin removes a user's second factors (mfa: {}); their user enrols them.")
            }
            removesFactors = true
        }
        // No later than now (a minute of clock difference allowed): a revocation never moves forward, so a time
        // ahead would refuse every new token, a reset's included, until it came.
        if let validSince, !(0...Int(Date().timeIntervalSince1970) + 60).contains(validSince) {
            throw FirebaseError("INVALID_ARGUMENT", "validSince is a time in seconds, no later than now.")
        }
        if let password { do { try commands.checkPassword(password) } catch { throw Self.weakPassword(error) } }
        // Everything that could refuse the request, before its first write.
        if password != nil || !unlinks.isEmpty { try Self.requireRecentSignIn(claims) }
        if password != nil, !isAdmin, account.identities[ProviderName.password.rawValue] == nil {
            throw FirebaseError("OPERATION_NOT_ALLOWED", "Add a password with accounts:signUp and the idToken.")
        }
        if password != nil, isAdmin, account.identities[ProviderName.password.rawValue] == nil, (newEmail ?? account.email) == nil {
            throw FirebaseError("MISSING_EMAIL", "A password needs an email to sign in with.")
        }
        let remaining = Set(account.identities.keys).subtracting(unlinks)
        if !isAdmin, !unlinks.filter({ account.identities[$0] != nil }).isEmpty, remaining.isEmpty {
            throw FirebaseError("OPERATION_NOT_ALLOWED", AccountError.lastSignInMethod.detail)
        }

        // One command: every change below is written in one transaction, or none is (a password another
        // account signs in with, found at commit, leaves the name given with it unchanged too).
        // The password is hashed (hundreds of milliseconds) before the command is dated, so the sessions it ends are
        // ended after every token they were given meanwhile (``CommandContext/asOfNow``).
        var hash: String?
        if let password { hash = try await commands.hashPassword(password) }
        let command = context(request, user: userId), now = command.now
        var steps: [AccountService.FollowUp] = []
        // The factors go first: an address moved or marked unproved beside `mfa: {}` guards none any more.
        if removesFactors {
            steps.append { $0.mfa.factors.isEmpty ? [] : try $0.removeFactors($0.mfa.factorIds, authTime: nil, byAdmin: true, now: now) }
        }
        if let newEmail { steps.append { try $0.changeEmail(to: newEmail, verified: emailVerified ?? false) } }
        if displayName != nil || photoURL != nil || !cleared.isEmpty || emailVerified != nil {
            steps.append { [cleared] in
                try $0.updateProfile(displayName: displayName, photoURL: photoURL, clearing: cleared, emailVerified: emailVerified)
            }
        }
        for provider in unlinks {
            steps.append { $0.identities[provider] == nil ? [] : try $0.unlink(provider: provider, byAdmin: isAdmin) }
        }
        if let customClaims { steps.append { try $0.setCustomClaims(customClaims) } }
        if let disable { steps.append { try $0.setDisabled(disable, reason: "firebase accounts:update", now: now) } }
        // A changed address voids every earlier token, as Firebase's `validSince` moves with it; so does an admin's
        // `validSince`, no later than now (the minute allowed for a caller's clock ahead of ours would otherwise void
        // every token issued until it came). One revocation, at the later of the two (it never moves back).
        let given = validSince.map { min(Date(timeIntervalSince1970: TimeInterval($0)), now) }
        let revokedAt = [newEmail.map { _ in now }, given].compactMap { $0 }.max()
        if let revokedAt { steps.append { try $0.revokeAllSessions(now: revokedAt) } }
        var answer: [String: JSONValue] = ["kind": "identitytoolkit#SetAccountInfoResponse"]
        var opened: (session: NewSession, refreshToken: String)?
        if let hash {
            if isAdmin {
                steps.append { try $0.setPassword(hash, now: now) }
            } else {
                // The client's own change: every session ends and the answer carries the new one's tokens.
                var (session, refreshToken) = newSession(provider: ProviderName.password.rawValue)
                // It continues the caller's session as it is before the change (which ends it): its ID token says the
                // sign-in that session had, its second factor included, not a password sign-in of now.
                if let claims {
                    session = Reissue(
                        claims: claims, proved: nil, linked: ProviderName.password.rawValue, base: (session, refreshToken), now: now
                    ).session(in: account)
                }
                opened = (session, refreshToken)
                let caller = claims?.sessionId
                steps.append { [session] in try $0.changePassword(passwordHash: hash, session: session, continuing: caller, now: now) }
            }
        }
        if !steps.isEmpty {
            do {
                account = try await accounts.update(userId: userId, claimingEmail: newEmail, context: command, steps: steps)
            } catch let error as AccountError where error.reason == .emailAlreadyInUse {
                throw FirebaseError.emailExists
            }
        }
        if let opened {
            answer.merge(try await tokens(account, session: opened.session, refreshToken: opened.refreshToken, signInProvider: "password")) { $1 }
        }
        answer["localId"] = .string(Self.localId(of: account))
        if let email = account.email { answer["email"] = .string(email) }
        answer["emailVerified"] = .bool(account.isEmailVerified)
        if let name = account.displayName { answer["displayName"] = .string(name) }
        if let photo = account.photoURL { answer["photoUrl"] = .string(photo) }
        answer["providerUserInfo"] = .array(FirebaseUserRecord.providerUserInfo(account))
        if account.identities["password"] != nil { answer["passwordHash"] = .string(FirebaseUserRecord.redactedHash) }
        return .object(answer)
    }

    /// Developer claims as firebase-admin sends them: a JSON object of at most 1000 characters without
    /// reserved names (`CLAIMS_TOO_LARGE`, `INVALID_CLAIMS`, `FORBIDDEN_CLAIM : <name>`).
    static func checkedClaims(_ text: String) throws(FirebaseError) -> String {
        guard text.count <= 1000 else { throw FirebaseError("CLAIMS_TOO_LARGE") }
        guard let object = try? JOSEObject(parsing: Array(text.utf8)) else { throw FirebaseError("INVALID_CLAIMS") }
        if let reserved = object.members.map(\.name).first(where: FirebaseIDTokens.reservedClaims.contains) {
            throw FirebaseError("FORBIDDEN_CLAIM", reserved)
        }
        return text
    }

    /// `accounts:delete`: erasure, crypto-shredding included; answers a non-empty `kind`, which firebase-admin requires.
    func delete(_ request: FirebaseRequest) async throws -> JSONValue {
        let (account, claims) = try await subject(request)
        let context = context(request, user: account.id)
        if let claims {
            // The user's own: a sign-in of the last five minutes unless anonymous, and a session still live.
            try await accounts.eraseByOwner(
                userId: account.id, sessionId: claims.sessionId, authTime: claims.authTime, reason: "firebase accounts:delete", context: context)
        } else {
            try await accounts.erase(userId: account.id, reason: "firebase accounts:delete", context: context)
        }
        return .object(["kind": "identitytoolkit#DeleteAccountResponse"])
    }

    /// `POST projects/{pid}/accounts` (firebase-admin's `create_user`): no tokens; `localId` is the
    /// developer's uid when given. A taken uid is `DUPLICATE_LOCAL_ID`, a taken email `EMAIL_EXISTS`.
    func create(_ request: FirebaseRequest) async throws -> JSONValue {
        let body = request.body
        let localId = try body.string("localId")
        if let localId {
            guard (1...128).contains(localId.utf8.count) else { throw FirebaseError("INVALID_ARGUMENT", "localId is 1 to 128 characters.") }
            if try await user(localId: localId) != nil { throw FirebaseError("DUPLICATE_LOCAL_ID") }
        }
        let email = try body.email()
        if let email, !AccountCommands.isEmail(email) { throw FirebaseError("INVALID_EMAIL") }
        try Self.refuseWhatIsNotKept(body)
        let passwordHash: String?
        if let password = try body.string("password") {
            guard email != nil else { throw FirebaseError("MISSING_EMAIL", "A password needs an email.") }
            do { passwordHash = try await commands.hashPassword(password) } catch { throw Self.weakPassword(error) }
        } else {
            passwordHash = nil
        }
        let profile = NewUserProfile(
            email: email, isEmailVerified: try body.bool("emailVerified") ?? false, displayName: try body.string("displayName"),
            photoURL: try body.string("photoUrl"), customUID: localId, passwordHash: passwordHash,
            isDisabled: try body.bool("disabled") ?? false)
        let account: UserAccount
        do {
            account = try await accounts.createUser(profile, context: context(request))
        } catch let error as AccountError where error.reason == .credentialAlreadyInUse {
            throw FirebaseError("DUPLICATE_LOCAL_ID")
        }
        var answer: [String: JSONValue] = ["kind": "identitytoolkit#SignupNewUserResponse", "localId": .string(Self.localId(of: account))]
        if let email = account.email { answer["email"] = .string(email) }
        if let name = account.displayName { answer["displayName"] = .string(name) }
        return .object(answer)
    }

    /// `accounts:batchDelete` (`localIds`, 1 to 1000, and `force`): unknown ids are skipped; without
    /// `force`, an enabled user is an entry of `errors` and stays.
    func batchDelete(_ request: FirebaseRequest) async throws -> JSONValue {
        let localIds = try request.body.strings("localIds")
        guard (1...1000).contains(localIds.count) else { throw FirebaseError("LOCAL_ID_LIST_EXCEEDS_LIMIT") }
        let force = try request.body.bool("force") ?? false
        var errors: [JSONValue] = []
        for (index, localId) in localIds.enumerated() {
            guard let userId = try await user(localId: localId) else { continue }
            let account = try await accounts.read(userId)
            guard account.exists else { continue }
            guard force || account.isDisabled else {
                errors.append(.object([
                    "index": .int(index), "localId": .string(localId), "message": "NOT_DISABLED : Disable the account before batch deletion.",
                ]))
                continue
            }
            do {
                // Decided again inside the erasure: a user enabled meanwhile stays.
                try await accounts.erase(userId: userId, reason: "firebase accounts:batchDelete", context: context(request, user: userId)) {
                    force || $0.isDisabled
                }
            } catch is AccountService.ConditionNoLongerHolds {
                errors.append(.object([
                    "index": .int(index), "localId": .string(localId), "message": "NOT_DISABLED : Disable the account before batch deletion.",
                ]))
            }
        }
        return .object(errors.isEmpty ? [:] : ["errors": .array(errors)])
    }

    /// `GET accounts:batchGet?maxResults=&nextPageToken=`: users in a stable order, a page at a time; a
    /// full page carries the token of the next.
    func batchGet(_ request: FirebaseRequest) async throws -> JSONValue {
        let query = request.http.query
        let limit = Int(query["maxResults"] ?? "20") ?? 0
        guard (1...1000).contains(limit) else { throw FirebaseError("INVALID_ARGUMENT", "maxResults is 1 to 1000.") }
        let after = query["nextPageToken"].flatMap { $0.isEmpty ? nil : $0 }
        if let after, UUID(text: after) == nil { throw FirebaseError("INVALID_PAGE_SELECTION") }
        let rows = try await accounts.database.query("""
            SELECT id FROM users WHERE erased_at IS NULL AND (\(after)::uuid IS NULL OR id > \(after)::uuid) ORDER BY id LIMIT \(limit)
            """)
        let ids = try rows.map { try $0.decode("id", as: UUID.self) }
        var users: [JSONValue] = []
        for id in ids {
            users.append(FirebaseUserRecord.json(try await accounts.read(id)))
        }
        // A page of the directory, recorded as a listing is on /v1 (how many, not who).
        try await recordRead([.usersSearched(.init(provider: nil, limit: limit, resultCount: users.count, status: 200, personal: .init()))], request)
        var answer: [String: JSONValue] = ["kind": "identitytoolkit#DownloadAccountResponse", "users": .array(users)]
        if ids.count == limit, let last = ids.last { answer["nextPageToken"] = .string(last.lowercasedText) }
        return .object(answer)
    }
}
