import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherJOSE
import TetherTesting

/// The cases a review of the Firebase surface found.
@Suite("Firebase surface: hardening")
struct FirebaseHardeningTests {
    /// A custom token signed by `key` of a service account of `email`.
    private func customToken(uid: String, claims: JOSEObject? = nil, key: PrivateKey, keyID: String, email: String) throws -> String {
        let now = Date().timeIntervalSince1970.rounded(.down)
        var payload: JOSEObject = [
            "iss": .string(email), "sub": .string(email), "aud": .string(FirebaseRoutesAudience.value), "uid": .string(uid),
            "iat": .number(now), "exp": .number(now + 600),
        ]
        if let claims { payload["claims"] = .object(claims) }
        let jwk = try JWK(material: .privateKey(key), keyID: keyID, algorithm: .rs256, use: "sig")
        return try JWTSigner(key: jwk).sign(claims: payload, type: "JWT")
    }

    /// A new service account of the project: the store, its email, and the private key and key id it signs with.
    private func serviceAccount(_ firebase: FirebaseApp) async throws -> (FirebaseServiceAccounts, String, PrivateKey, String) {
        let accounts = FirebaseServiceAccounts(database: firebase.app.admin)
        let (email, _, json) = try await accounts.create(projectID: FirebaseApp.projectID)
        let document = try JSONDecoder().decode([String: String].self, from: Data(json.utf8))
        return (accounts, email, try PrivateKey(pem: try #require(document["private_key"])), try #require(document["private_key_id"]))
    }

    @Test func aRevokedServiceAccountsTokensAreRefusedAndAnUppercaseIdIsNotTheUser() async throws {
        try await FirebaseApp.run(settings: ["TETHER_TEST_PRODUCTION": "1"]) { firebase in
            let (accounts, email, key, keyID) = try await serviceAccount(firebase)

            let first = try await firebase.call("accounts:signInWithCustomToken", .object([
                "token": .string(try customToken(uid: "svc-user", claims: ["email": "forged@example.com", "tier": "gold"], key: key, keyID: keyID, email: email)),
            ]))
            #expect(first.status == 200, "\(first.text)")
            #expect(first.idTokenClaims["tier"] == "gold")
            #expect(first.idTokenClaims["email"] == nil, "developer claims never say who the person is")

            // An existing user's Tether id is that user, however many first sign-ins with it come at once.
            let v1 = try await firebase.app.signedIn(try await firebase.app.apple("apple-case"))
            let tokens = try (0..<8).map { _ in try customToken(uid: v1.user.id, key: key, keyID: keyID, email: email) }
            let together = try await withThrowingTaskGroup(of: FirebaseAnswer.self) { group in
                for token in tokens {
                    group.addTask {
                        try await firebase.app.withNewClient { client in
                            FirebaseAnswer(try await client.send(
                                "POST", "\(FirebaseApp.v1)/accounts:signInWithCustomToken?key=fake-api-key", fields: [("Content-Type", "application/json")],
                                body: Array(try JSONEncoder().encode(JSONValue.object(["token": .string(token)])))))
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(together.allSatisfy { $0.status == 200 && $0.string("localId") == v1.user.id }, "\(together.map(\.text))")
            // An existing user's Tether id in another spelling is another uid, not that user.
            let upper = try await firebase.call("accounts:signInWithCustomToken", .object([
                "token": .string(try customToken(uid: v1.user.id.uppercased(), key: key, keyID: keyID, email: email)),
            ]))
            #expect(upper.body["isNewUser"] == .bool(true))
            #expect(upper.string("localId") != v1.user.id)
            // A uid with a NUL made a user that accounts:update and accounts:delete could never name (they refuse a NUL).
            let events = try await firebase.app.totalEvents()
            let nul = try await firebase.call("accounts:signInWithCustomToken", .object([
                "token": .string(try customToken(uid: "a\u{0}b", key: key, keyID: keyID, email: email)),
            ]))
            #expect(nul.errorMessage == "INVALID_CUSTOM_TOKEN : uid holds a NUL.", "\(nul.text)")
            #expect(try await firebase.app.totalEvents() == events)

            #expect(try await accounts.revoke(keyId: keyID))
            let revoked = try await firebase.call("accounts:signInWithCustomToken", .object([
                "token": .string(try customToken(uid: "svc-user", key: key, keyID: keyID, email: email)),
            ]))
            #expect(revoked.status == 400)
            #expect(revoked.errorMessage?.hasPrefix("INVALID_CUSTOM_TOKEN") == true)
            #expect(try await !accounts.revoke(keyId: keyID))
        }
    }

    /// The user a sign-in answered, and an ID token of their session whose sign-in was ten minutes ago.
    private func staleIDToken(_ firebase: FirebaseApp, of answer: FirebaseAnswer, provider: String) async throws -> (UUID, String) {
        let localId = try #require(answer.string("localId"))
        let userId = try #require(UUID(uuidString: localId))
        let account = try await firebase.app.service.accounts.read(userId)
        let session = try #require(account.activeSessions.first)
        let tokens = try #require(firebase.app.service.firebaseIDTokens)
        let stale = try await tokens.issue(
            account, localId: userId.uuidString.lowercased(), sessionId: session.id, authTime: Date().addingTimeInterval(-600),
            signInProvider: provider, secondFactor: nil)
        return (userId, stale)
    }

    /// A custom token of a user who has a second factor gets a challenge, as every way in does (Firebase asks
    /// none there): a leaked service-account key must not pass the factor of a user it can name. The session the
    /// factor then opens carries the token's developer claims, refreshes included.
    @Test func aCustomTokenOfAUserWithASecondFactorGetsAChallenge() async throws {
        try await FirebaseApp.run(settings: ["TETHER_TEST_PRODUCTION": "1"]) { firebase in
            let (_, email, key, keyID) = try await serviceAccount(firebase)
            let v1 = try await firebase.app.signedIn(try await firebase.app.apple("apple-mfa-custom", email: "mfa@privaterelay.appleid.com"))
            let (factorId, totp) = try await firebase.app.enrolTOTP(accessToken: v1.session.accessToken)
            let custom = try await firebase.call("accounts:signInWithCustomToken", .object([
                "token": .string(try customToken(uid: v1.user.id, claims: ["tier": "gold"], key: key, keyID: keyID, email: email)),
            ]))
            #expect(custom.status == 200, "\(custom.text)")
            let pending = try #require(custom.string("mfaPendingCredential"))
            #expect(custom.string("idToken") == nil && custom.string("refreshToken") == nil)
            let done = try await firebase.app.client.post("/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:finalize?key=k", json: JSONValue.object([
                "mfaPendingCredential": .string(pending), "mfaEnrollmentId": .string(factorId),
                "totpVerificationInfo": .object(["verificationCode": .string(totp.code(at: Date().addingTimeInterval(30)))]),
            ]))
            let finished = FirebaseAnswer(done)
            #expect(finished.status == 200, "\(finished.text)")
            #expect(finished.idTokenClaims["tier"] == "gold", "\(finished.idTokenClaims)")
            let refreshed = try await firebase.refresh(try #require(finished.string("refreshToken")))
            #expect(refreshed.idTokenClaims["tier"] == "gold", "a refresh keeps the developer claims")
        }
    }

    /// A client's password change voids the tokens issued before it for every backend: `validSince` moves, so
    /// firebase-admin's `check_revoked` (an ID token's `iat` before it) refuses the old ID token and takes the new.
    @Test func aClientsPasswordChangeMovesValidSince() async throws {
        try await FirebaseApp.run { firebase in
            let signedUp = try await firebase.call("accounts:signUp", .object([
                "email": "changes@example.com", "password": "the first password", "returnSecureToken": true,
            ]))
            let old = try #require(signedUp.string("idToken"))
            let localId = try #require(signedUp.string("localId"))
            try await Task.sleep(for: .milliseconds(1100)) // a token of an earlier second
            let changed = try await firebase.call("accounts:update", .object([
                "idToken": .string(old), "password": "a second password", "returnSecureToken": true,
            ]))
            #expect(changed.status == 200, "\(changed.text)")
            let looked = try await firebase.admin("accounts:lookup", .object(["localId": .array([.string(localId)])]))
            guard case .string(let text)? = looked.users.first?["validSince"], let validSince = Int(text) else {
                Issue.record("no validSince: \(looked.text)")
                return
            }
            let iat = { (answer: FirebaseAnswer) -> Int? in
                if case .int(let value)? = answer.idTokenClaims["iat"] { value } else { nil }
            }
            #expect(try #require(iat(signedUp)) < validSince, "the old token is revoked for check_revoked")
            #expect(try #require(iat(changed)) >= validSince, "the new one is not")
            // The new session continues the one that changed the password: its sign-in time is that session's.
            #expect(changed.idTokenClaims["auth_time"] == signedUp.idTokenClaims["auth_time"], "\(changed.idTokenClaims)")
        }
    }

    /// An admin's `accounts:update` is one command: when a later change fails at commit (a password on an
    /// address another account already signs in with), the earlier ones in the same request are not kept.
    @Test func anAdminsUpdateIsWrittenWholeOrNotAtAll() async throws {
        try await FirebaseApp.run(settings: ["TETHER_EMAIL_POLICY": "allow-duplicate-emails"]) { firebase in
            let holder = try await firebase.admin("accounts", .object(["email": "shared@example.com", "password": "the holder's password"]))
            #expect(holder.status == 200, "\(holder.text)")
            let other = try await firebase.admin("accounts", .object(["email": "shared@example.com", "displayName": "Before"]))
            let localId = try #require(other.string("localId"))
            let before = try await firebase.app.totalEvents()
            let refused = try await firebase.admin("accounts:update", .object([
                "localId": .string(localId), "displayName": "After", "customAttributes": #"{"tier":"gold"}"#, "password": "a password of its own",
            ]))
            #expect(refused.errorMessage == "EMAIL_EXISTS", "\(refused.text)")
            #expect(try await firebase.app.totalEvents() == before, "nothing of the request is written")
            let looked = try await firebase.admin("accounts:lookup", .object(["localId": .array([.string(localId)])]))
            #expect(looked.users.first?["displayName"] == "Before", "\(looked.text)")
            #expect(looked.users.first?["customAttributes"] == nil, "\(looked.text)")

            // The same changes without the password are written together, in one transaction.
            let position = try await firebase.app.lastEventPosition()
            let changed = try await firebase.admin("accounts:update", .object([
                "localId": .string(localId), "displayName": "Later", "customAttributes": #"{"tier":"silver"}"#, "disableUser": true,
            ]))
            #expect(changed.status == 200, "\(changed.text)")
            #expect(try await firebase.app.totalEvents() >= before + 3, "a name, claims and a disable")
            #expect(try await firebase.app.transactions(after: position) == 1, "one command, one transaction")
            let after = try await firebase.admin("accounts:lookup", .object(["localId": .array([.string(localId)])]))
            #expect(after.users.first?["displayName"] == "Later" && after.users.first?["disabled"] == .bool(true), "\(after.text)")
        }
    }

    /// An admin's change of a user's email voids the tokens issued before it, as Firebase's `validSince`
    /// moves with the address (the emulator's `setAccountInfo`): the old refresh token is `TOKEN_EXPIRED`.
    @Test func anAdminsEmailChangeVoidsEarlierTokens() async throws {
        try await FirebaseApp.run { firebase in
            let signedUp = try await firebase.call("accounts:signUp", .object([
                "email": "moving@example.com", "password": "a moving password", "returnSecureToken": true,
            ]))
            let localId = try #require(signedUp.string("localId"))
            let refreshToken = try #require(signedUp.string("refreshToken"))
            try await Task.sleep(for: .milliseconds(1100)) // a token of an earlier second
            let changed = try await firebase.admin("accounts:update", .object(["localId": .string(localId), "email": "moved@example.com"]))
            #expect(changed.status == 200 && changed.string("email") == "moved@example.com", "\(changed.text)")
            let looked = try await firebase.admin("accounts:lookup", .object(["localId": .array([.string(localId)])]))
            guard case .string(let text)? = looked.users.first?["validSince"], let validSince = Int(text),
                  case .int(let iat)? = signedUp.idTokenClaims["iat"] else {
                Issue.record("no validSince or iat: \(looked.text)")
                return
            }
            #expect(iat < validSince, "the ID token of before the change is revoked for check_revoked")
            #expect(try await firebase.refresh(refreshToken).errorMessage == "TOKEN_EXPIRED")
            // The user signs in again with the new address.
            let again = try await firebase.call("accounts:signInWithPassword", .object([
                "email": "moved@example.com", "password": "a moving password", "returnSecureToken": true,
            ]))
            #expect(again.status == 200, "\(again.text)")
        }
    }

    /// What Tether does not do is refused, not answered 200 with nothing done: a tenant's request (one pool of
    /// users here), an admin's provider link or federated upgrade; and an admin's validSince never goes back.
    @Test func unsupportedRequestsAreRefusedAndValidSinceNeverGoesBack() async throws {
        try await FirebaseApp.run { firebase in
            let before = try await firebase.app.lastEventPosition()
            let tenant = try await firebase.call("accounts:signUp", .object([
                "tenantId": "tenant-a", "email": "tenant@example.com", "password": "a long password",
            ]))
            #expect(tenant.status == 400 && tenant.errorMessage?.hasPrefix("TENANT_NOT_FOUND") == true, "\(tenant.text)")
            #expect(try await firebase.app.lastEventPosition() == before, "nothing written")
            let noTenant = try await firebase.call("accounts:signUp", .object([
                "tenantId": "", "email": "tenant@example.com", "password": "a long password",
            ]))
            #expect(noTenant.status == 200, "an empty tenantId is the default pool: \(noTenant.text)")
            let localId = try #require(noTenant.string("localId"))

            for member: (String, JSONValue) in [
                ("linkProviderUserInfo", .object(["providerId": "google.com", "rawId": "lp1"])), ("upgradeToFederatedLogin", true),
            ] {
                let refused = try await firebase.admin("accounts:update", .object(["localId": .string(localId), member.0: member.1]))
                #expect(refused.status == 400 && refused.errorMessage?.hasPrefix("OPERATION_NOT_ALLOWED") == true, "\(member.0): \(refused.text)")
            }

            let now = Int(Date().timeIntervalSince1970)
            // Ahead of now it would refuse every new token until it came (it never moves back): refused.
            let ahead = try await firebase.admin("accounts:update", .object(["localId": .string(localId), "validSince": .int(now + 3600)]))
            #expect(ahead.status == 400 && ahead.errorMessage?.hasPrefix("INVALID_ARGUMENT") == true, "\(ahead.text)")
            #expect(try await firebase.admin("accounts:update", .object(["localId": .string(localId), "validSince": .int(now)])).status == 200)
            #expect(try await firebase.admin("accounts:update", .object(["localId": .string(localId), "validSince": 0])).status == 200)
            let looked = try await firebase.admin("accounts:lookup", .object(["localId": .array([.string(localId)])]))
            #expect(looked.users.first?["validSince"] == .string(String(now)), "\(looked.text)")
        }
    }

    /// firebase-admin's `revoke_refresh_tokens` sends the caller's clock, which may run ahead of the server's: a
    /// `validSince` up to a minute ahead is taken as now. Stored as given, it refused every token issued until it came,
    /// while sign-ins and refreshes went on handing them out.
    @Test func aValidSinceAheadOfTheServersClockIsTakenAsNow() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "ahead@example.com", "password": "ahead password 1"]))
            let localId = try #require(signUp.string("localId"))
            try await Task.sleep(for: .milliseconds(1_100))  // the sign-up's token a second older than the revocation
            let ahead = Int(Date().timeIntervalSince1970) + 50
            let revoked = try await firebase.admin("accounts:update", .object(["localId": .string(localId), "validSince": .int(ahead)]))
            #expect(revoked.status == 200, "\(revoked.text)")
            let looked = try await firebase.admin("accounts:lookup", .object(["localId": .array([.string(localId)])]))
            let stored = try #require(looked.users.first?["validSince"]?.string.flatMap { Int($0) }, "\(looked.text)")
            #expect(stored <= Int(Date().timeIntervalSince1970), "\(stored) is no later than now")
            let old = try #require(signUp.string("idToken"))
            #expect(try await firebase.call("accounts:lookup", .object(["idToken": .string(old)])).errorMessage == "TOKEN_EXPIRED")

            // A token issued from now on is good.
            let signIn = try await firebase.call("accounts:signInWithPassword", .object(["email": "ahead@example.com", "password": "ahead password 1"]))
            let fresh = try #require(signIn.string("idToken"), "\(signIn.text)")
            let lookup = try await firebase.call("accounts:lookup", .object(["idToken": .string(fresh)]))
            #expect(lookup.status == 200, "\(lookup.text)")
        }
    }

    /// The password's `providerUserInfo` entry carries the user's name and photo as they are now, as Firebase rebuilds
    /// it at every change (the iOS SDK's `providerData` is made of these entries); it kept the sign-up's name.
    @Test func thePasswordEntryShowsTheUsersNameAndPhotoAsTheyAreNow() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object([
                "email": "renamed@example.com", "password": "renamed password 1", "displayName": "First Name",
            ]))
            let idToken = try #require(signUp.string("idToken"), "\(signUp.text)")
            func passwordEntry() async throws -> [String: JSONValue] {
                let lookup = try await firebase.call("accounts:lookup", .object(["idToken": .string(idToken)]))
                guard case .array(let entries)? = lookup.users.first?["providerUserInfo"],
                      case .object(let entry)? = entries.first(where: { $0["providerId"] == "password" }) else { return [:] }
                return entry
            }
            let updated = try await firebase.call("accounts:update", .object([
                "idToken": .string(idToken), "displayName": "Second Name", "photoUrl": "https://example.com/p.png",
            ]))
            #expect(updated.status == 200, "\(updated.text)")
            var entry = try await passwordEntry()
            #expect(entry["displayName"] == "Second Name" && entry["photoUrl"] == "https://example.com/p.png", "\(entry)")
            _ = try await firebase.call("accounts:update", .object(["idToken": .string(idToken), "deleteAttribute": ["DISPLAY_NAME", "PHOTO_URL"]]))
            entry = try await passwordEntry()
            #expect(entry["displayName"] == nil && entry["photoUrl"] == nil && entry["rawId"] == "renamed@example.com", "\(entry)")
        }
    }

    @Test func destructiveClientChangesNeedARecentSignIn() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "old@example.com", "password": "old password 1"]))
            let (userId, stale) = try await staleIDToken(firebase, of: signUp, provider: "password")
            let before = try await firebase.app.totalEvents()
            for body: [String: JSONValue] in [["password": "new password 1"], ["deleteProvider": ["password"]]] {
                var request = body
                request["idToken"] = .string(stale)
                let answer = try await firebase.call("accounts:update", .object(request))
                #expect(answer.errorMessage == "CREDENTIAL_TOO_OLD_LOGIN_AGAIN", "\(answer.text)")
            }
            #expect(try await firebase.call("accounts:delete", .object(["idToken": .string(stale)])).errorMessage == "CREDENTIAL_TOO_OLD_LOGIN_AGAIN")
            // A profile change needs no recent sign-in.
            #expect(try await firebase.call("accounts:update", .object(["idToken": .string(stale), "displayName": "Still Me"])).status == 200)
            #expect(try await firebase.app.totalEvents() == before + 1)
            // The last way in is kept, and a phone number is no user field.
            let fresh = try #require(signUp.string("idToken"))
            #expect(try await firebase.call("accounts:update", .object(["idToken": .string(fresh), "deleteProvider": ["password"]])).errorMessage?
                .hasPrefix("OPERATION_NOT_ALLOWED") == true)
            #expect(try await firebase.admin("accounts:update", .object(["localId": .string(userId.uuidString.lowercased()), "phoneNumber": "+15555550100"]))
                .errorMessage?.hasPrefix("INVALID_ARGUMENT") == true)
            #expect(try await firebase.admin("accounts:update", .object(["localId": .string(userId.uuidString.lowercased()), "validSince": .int(99_999_999_999)]))
                .errorMessage?.hasPrefix("INVALID_ARGUMENT") == true)

            // An anonymous user cannot sign in again: its own deletion needs no recent sign-in.
            let anonymous = try await firebase.call("accounts:signUp", .object(["returnSecureToken": true]))
            let (anonymousId, staleAnonymous) = try await staleIDToken(firebase, of: anonymous, provider: "anonymous")
            let deleted = try await firebase.call("accounts:delete", .object(["idToken": .string(staleAnonymous)]))
            #expect(deleted.status == 200, "\(deleted.text)")
            #expect(try await firebase.app.eventCount("UserErased", userId: anonymousId.uuidString.lowercased()) == 1)
        }
    }

    /// `accounts:signUp` with an `idToken` links a password to that user: to one who is not anonymous, a stale
    /// token (a stolen refresh token's) must not add a way in, as `accounts:update` must not change the password.
    @Test func aPasswordAddedBySignUpToAUserWhoIsNotAnonymousNeedsARecentSignIn() async throws {
        try await FirebaseApp.run { firebase in
            let apple = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(try await firebase.appleToken("apple-stale-signup"))")
            let (_, stale) = try await staleIDToken(firebase, of: apple, provider: "apple.com")
            let before = try await firebase.app.totalEvents()
            let refused = try await firebase.call("accounts:signUp", .object([
                "idToken": .string(stale), "email": "intruder@example.com", "password": "intruder password 1",
            ]))
            #expect(refused.errorMessage == "CREDENTIAL_TOO_OLD_LOGIN_AGAIN", "\(refused.text)")
            #expect(try await firebase.app.totalEvents() == before)
            let fresh = try #require(apple.string("idToken"))
            let added = try await firebase.call("accounts:signUp", .object([
                "idToken": .string(fresh), "email": "owner@example.com", "password": "owner password 1",
            ]))
            #expect(added.status == 200, "\(added.text)")
        }
    }

    /// A password linked with `accounts:signUp` and an `idToken` on another address makes that address the
    /// user's email, unverified, as Firebase's signUp does: the address is then found by email and its reset
    /// goes where it signs in, instead of a password holding an address its user does not show.
    @Test func aPasswordLinkedOnAnotherAddressBecomesTheUsersUnverifiedEmail() async throws {
        try await FirebaseApp.run { firebase in
            let apple = try await firebase.signInWithIdp(
                "providerId=apple.com&id_token=\(try await firebase.appleToken("apple-squat", email: "squatter@privaterelay.appleid.com"))")
            let localId = try #require(apple.string("localId"))
            let linked = try await firebase.call("accounts:signUp", .object([
                "idToken": .string(try #require(apple.string("idToken"))), "email": "Owner1@Example.com", "password": "squatter password 1",
            ]))
            #expect(linked.status == 200, "\(linked.text)")
            let looked = try await firebase.admin("accounts:lookup", .object(["email": ["owner1@example.com"]]))
            #expect(looked.users.first?["localId"] == .string(localId), "found by the address: \(looked.text)")
            #expect(looked.users.first?["emailVerified"] == .bool(false), "\(looked.text)")
            let reset = try await firebase.admin("accounts:sendOobCode", .object([
                "requestType": "PASSWORD_RESET", "email": "owner1@example.com", "returnOobLink": true,
            ]))
            #expect(reset.status == 200 && reset.string("oobCode") != nil, "\(reset.text)")
        }
    }

    @Test func reauthenticationNeverMakesAUser() async throws {
        try await FirebaseApp.run { firebase in
            let answer = try await firebase.call("accounts:signInWithIdp", .object([
                "postBody": .string("providerId=apple.com&id_token=\(try await firebase.appleToken("apple-nobody"))"), "requestUri": "http://localhost",
                "returnSecureToken": true, "autoCreate": false,
            ]))
            #expect(answer.errorMessage == "USER_NOT_FOUND")
            #expect(try await firebase.app.eventCount("UserRegistered") == 0)
        }
    }

    /// A body over the limit is refused by the HTTP layer before any route runs; under the Firebase prefixes the
    /// answer is still an Identity Toolkit error, which firebase-admin and the client SDKs can read.
    @Test func anOversizedBodyGetsAFirebaseShapedError() async throws {
        try await FirebaseApp.run { firebase in
            let padding = String(repeating: "a", count: 1_100_000)
            for (method, body) in [
                ("accounts:signUp", #"{"email":"big@example.com","password":"big password 1","displayName":"\#(padding)"}"#),
                ("projects/\(FirebaseApp.projectID)/accounts:batchCreate", #"{"users":[{"localId":"\#(padding)"}]}"#),
            ] {
                let answer = FirebaseAnswer(try await firebase.app.client.send(
                    "POST", "\(FirebaseApp.v1)/\(method)?key=fake-api-key",
                    fields: [("Content-Type", "application/json"), ("Authorization", "Bearer owner")], body: Array(body.utf8)))
                #expect(answer.status == 413, "\(method): \(answer.text)")
                #expect(answer.errorMessage == "INVALID_ARGUMENT : The request body is too large.", "\(method): \(answer.text)")
                #expect(answer.header("Content-Type")?.hasPrefix("application/json") == true)
            }
            #expect(try await firebase.app.totalEvents() == 0)
        }
    }

    /// A user of an import naming two identities of one provider is that user's error, not a server fault that
    /// stops the batch halfway (firebase-admin retries a 500 and then cannot tell what was imported).
    @Test func anImportedUserWithTwoIdentitiesOfAProviderIsAnErrorOfTheirOwn() async throws {
        try await FirebaseApp.run { firebase in
            let users: JSONValue = .array([
                .object(["localId": "impA", "email": "impa@example.com"]),
                .object(["localId": "impB", "email": "impb@example.com", "providerUserInfo": .array([
                    .object(["providerId": "google.com", "rawId": "g1"]), .object(["providerId": "google.com", "rawId": "g2"]),
                ])]),
                .object(["localId": "impC", "email": "impc@example.com"]),
            ])
            let imported = try await firebase.admin("accounts:batchCreate", .object(["users": users]))
            #expect(imported.status == 200, "\(imported.text)")
            guard case .array(let errors)? = imported.body["error"], errors.count == 1, case .object(let error) = errors[0] else {
                Issue.record("expected one error: \(imported.text)")
                return
            }
            #expect(error["index"] == .int(1))
            #expect(error["message"]?.string?.hasPrefix("INVALID_ARGUMENT") == true, "\(imported.text)")
            let found = try await firebase.admin("accounts:lookup", .object(["localId": ["impA", "impB", "impC"]]))
            guard case .array(let accounts)? = found.body["users"] else {
                Issue.record("no users: \(found.text)")
                return
            }
            #expect(Set(accounts.compactMap { $0["localId"]?.string }) == ["impA", "impC"])
            // An address is stored as every other path stores it, lowercased and trimmed: firebase-admin's get_users
            // matches it exactly.
            let mixed = try await firebase.admin("accounts:batchCreate", .object(["users": .array([
                .object(["localId": "impD", "email": " Mixed@Example.COM"]),
            ])]))
            #expect(mixed.status == 200 && mixed.body["error"] == nil, "\(mixed.text)")
            let byEmail = try await firebase.admin("accounts:lookup", .object(["email": ["mixed@example.com"]]))
            #expect(byEmail.users.first?["email"] == "mixed@example.com", "\(byEmail.text)")
        }
    }

    /// A display name, a photo URL or an imported identity's members longer than Tether keeps were a 500
    /// (an index refused the row) on `accounts:update` and `accounts:batchCreate`: now each is refused,
    /// before any write.
    @Test func overlongProfileMembersAreRefusedNotAServerFault() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "long@example.com", "password": "long password 1"]))
            let token = try #require(signUp.string("idToken"))
            let longest = String(repeating: "n", count: UserAccount.maximumDisplayNameLength)
            #expect(try await firebase.call("accounts:update", .object(["idToken": .string(token), "displayName": .string(longest)])).status == 200)
            let events = try await firebase.app.eventCount("ProfileUpdated")
            for body: JSONValue in [
                .object(["idToken": .string(token), "displayName": .string(longest + "n"), "deleteProvider": ["password"]]),
                .object(["idToken": .string(token), "displayName": .string(String(repeating: "y", count: 3_000))]),
                .object(["idToken": .string(token), "photoUrl": .string("https://example.com/" + String(repeating: "p", count: UserAccount.maximumPhotoURLLength))]),
            ] {
                let update = try await firebase.call("accounts:update", body)
                #expect(update.status == 400 && update.errorMessage?.hasPrefix("INVALID_ARGUMENT") == true, "\(update.text)")
            }
            #expect(try await firebase.app.eventCount("ProfileUpdated") == events)
            #expect(try await firebase.call("accounts:lookup", .object(["idToken": .string(token)])).text.contains("password"))

            let imported = try await firebase.admin("accounts:batchCreate", .object(["users": .array([
                .object(["localId": "imported-long-uid", "providerUserInfo": .array([
                    .object(["providerId": "google.com", "rawId": .string(String(repeating: "r", count: 3_000))]),
                ])]),
                .object(["localId": "imported-long-email", "providerUserInfo": .array([
                    .object(["providerId": "google.com", "rawId": "g-1", "email": .string(String(repeating: "e", count: 3_000) + "@example.com")]),
                ])]),
                .object(["localId": "imported-fine", "displayName": "Fine"]),
            ])]))
            #expect(imported.status == 200, "\(imported.text)")
            guard case .array(let errors)? = imported.body["error"] else {
                Issue.record("no error list: \(imported.text)")
                return
            }
            #expect(errors.count == 2, "\(imported.text)")
            #expect(try await firebase.admin("accounts:lookup", .object(["localId": ["imported-fine", "imported-long-uid", "imported-long-email"]]))
                .text.components(separatedBy: "\"localId\"").count == 2, "only the fine user was made")
        }
    }
}

/// The audience custom tokens carry.
enum FirebaseRoutesAudience {
    static let value = "https://identitytoolkit.googleapis.com/google.identity.identitytoolkit.v1.IdentityToolkit"
}
