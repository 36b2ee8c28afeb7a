import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherJOSE
import TetherTesting

/// The Identity Toolkit and Secure Token routes on the wire, with dev identity provider tokens.
@Suite("Firebase surface on the wire")
struct FirebaseWireTests {
    /// `accounts:revokeToken` (v2), which the iOS SDK calls with an Apple authorization code before an app deletes a
    /// Sign in with Apple user, was a 404 (error 17999 in the app). It redeems the code and revokes its token at Apple.
    @Test func revokeTokenRevokesAnAppleAuthorizationCode() async throws {
        try await FirebaseApp.run { firebase in
            let signIn = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(try await firebase.appleToken("apple-revoke"))")
            let idToken = try #require(signIn.string("idToken"), "\(signIn.text)")
            func code(_ sub: String) async throws -> String {
                try #require(try await firebase.app.idp.post("/dev-idp/apple/authorization-code", json: ["sub": sub])
                    .decodeJSON([String: String].self)["authorizationCode"])
            }
            func revoke(_ body: [String: JSONValue]) async throws -> FirebaseAnswer {
                FirebaseAnswer(try await firebase.app.client.post("/identitytoolkit.googleapis.com/v2/accounts:revokeToken?key=k", json: JSONValue.object(body)))
            }
            func revokedSubjects() async throws -> [String] {
                let answer = try await firebase.app.idp.get("/dev-idp/apple/revocations").decodeJSON([String: [[String: String]]].self)
                return (answer["revocations"] ?? []).compactMap { $0["subject"] }
            }
            let appleCode = try await code("apple-revoke")
            let revoked = try await revoke(["providerId": "apple.com", "tokenType": "3", "token": .string(appleCode), "idToken": .string(idToken)])
            #expect(revoked.status == 200 && revoked.text == "{}", "\(revoked.text)")
            #expect(try await revokedSubjects() == ["apple-revoke"])
            // A code that was used already, another provider, no idToken: refused, nothing revoked.
            let used = try await revoke(["providerId": "apple.com", "tokenType": "3", "token": .string(appleCode), "idToken": .string(idToken)])
            #expect(used.errorMessage?.hasPrefix("INVALID_IDP_RESPONSE") == true, "\(used.text)")
            let google = try await revoke(["providerId": "google.com", "tokenType": "3", "token": .string(try await code("apple-revoke")), "idToken": .string(idToken)])
            #expect(google.errorMessage?.hasPrefix("INVALID_PROVIDER_ID") == true, "\(google.text)")
            let noIdToken = try await revoke(["providerId": "apple.com", "tokenType": "3", "token": .string(try await code("apple-revoke"))])
            #expect(noIdToken.errorMessage == "MISSING_ID_TOKEN", "\(noIdToken.text)")
            // Another person's code, from the signed-in user or from one with no Apple ID: not revoked for them.
            let someoneElses = try await revoke(["providerId": "apple.com", "tokenType": "3", "token": .string(try await code("apple-victim")), "idToken": .string(idToken)])
            #expect(someoneElses.errorMessage?.hasPrefix("INVALID_IDP_RESPONSE") == true, "\(someoneElses.text)")
            let anonymous = try await firebase.call("accounts:signUp", .object(["returnSecureToken": true]))
            let fromAnonymous = try await revoke([
                "providerId": "apple.com", "tokenType": "3", "token": .string(try await code("apple-victim")), "idToken": .string(try #require(anonymous.string("idToken"))),
            ])
            #expect(fromAnonymous.errorMessage?.hasPrefix("INVALID_IDP_RESPONSE") == true, "\(fromAnonymous.text)")
            #expect(try await revokedSubjects() == ["apple-revoke"])
        }
    }

    /// A sign-in method switched off answers what Identity Toolkit answers a project that does not allow it: anonymous
    /// sign-up ADMIN_ONLY_OPERATION (WIRE-FACTS §1c), which the SDKs report as a restricted operation; it was
    /// INVALID_PROVIDER_ID, which they report as a malformed provider id.
    @Test func aSignInMethodSwitchedOffIsNotAnInvalidProvider() async throws {
        try await FirebaseApp.run(settings: ["TETHER_ANONYMOUS_USERS": "off"]) { firebase in
            let events = try await firebase.app.totalEvents()
            let anonymous = try await firebase.call("accounts:signUp", .object(["returnSecureToken": true]))
            #expect(anonymous.status == 400)
            #expect(anonymous.errorMessage?.hasPrefix("ADMIN_ONLY_OPERATION : ") == true, "\(anonymous.text)")
            #expect(try await firebase.app.totalEvents() == events)
        }
    }

    @Test func anAnonymousSignUpThenAppleLinkKeepsTheLocalIdAndTokensSayWhatFirebaseSays() async throws {
        try await FirebaseApp.run { firebase in
            let anonymous = try await firebase.call("accounts:signUp", .object(["returnSecureToken": true]))
            #expect(anonymous.status == 200, "\(anonymous.text)")
            #expect(anonymous.string("kind") == "identitytoolkit#SignupNewUserResponse")
            #expect(anonymous.string("expiresIn") == "3600")
            let localId = try #require(anonymous.string("localId"))
            let idToken = try #require(anonymous.string("idToken"))
            #expect(anonymous.string("refreshToken")?.hasPrefix("ftr_") == true)
            let claims = anonymous.idTokenClaims
            #expect(claims["provider_id"] == "anonymous")
            #expect(claims["iss"] == .string("https://securetoken.google.com/\(FirebaseApp.projectID)"))
            #expect(claims["aud"] == .string(FirebaseApp.projectID))
            #expect(claims["sub"] == .string(localId) && claims["user_id"] == .string(localId))
            guard case .object(let fb)? = claims["firebase"] else { Issue.record("no firebase claim"); return }
            #expect(fb["sign_in_provider"] == "anonymous")
            #expect(fb["identities"] == .object([:]))
            let header = try CompactJWS(parsing: idToken).header
            #expect(header.algorithm == .rs256)

            let lookup = try await firebase.call("accounts:lookup", .object(["idToken": .string(idToken)]))
            #expect(lookup.users.count == 1)
            #expect(lookup.users.first?["localId"] == .string(localId))
            #expect(lookup.users.first?["providerUserInfo"] == .array([]))

            // verifyAssertion linking Apple to it (the iOS SDK's v3 name), with the raw nonce in postBody.
            let apple = try await firebase.appleToken("apple-fb", email: "fb@privaterelay.appleid.com", nonce: "raw-nonce-1")
            let beforeLink = try await firebase.app.lastEventPosition()
            let linked = FirebaseAnswer(try await firebase.app.client.post(
                "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyAssertion?key=k",
                json: JSONValue.object([
                    "postBody": .string("providerId=apple.com&id_token=\(apple)&nonce=raw-nonce-1"), "requestUri": "http://localhost",
                    "returnSecureToken": true, "returnIdpCredential": true, "autoCreate": true, "idToken": .string(idToken),
                ])))
            #expect(linked.status == 200, "\(linked.text)")
            #expect(linked.string("localId") == localId)
            #expect(linked.string("providerId") == "apple.com")
            #expect(linked.string("idToken") != nil && linked.string("refreshToken") != nil)
            // The link and the session it answers with are one command: both written, or neither.
            #expect(try await firebase.app.transactions(after: beforeLink) == 1)
            #expect(linked.body["isNewUser"] == nil)
            #expect(linked.body["needConfirmation"] == nil && linked.body["errorMessage"] == nil)
            guard case .string(let rawUserInfo)? = linked.body["rawUserInfo"] else { Issue.record("rawUserInfo is not a string"); return }
            #expect(rawUserInfo.contains("apple-fb"))
            let after = try await firebase.call("accounts:lookup", .object(["idToken": .string(linked.string("idToken")!)]))
            guard case .array(let providers)? = after.users.first?["providerUserInfo"] else { Issue.record("no providers"); return }
            #expect(providers == [.object([
                "providerId": "apple.com", "rawId": "apple-fb", "federatedId": "apple-fb", "email": "fb@privaterelay.appleid.com",
            ])])
            // The nonce was spent: the same token again is refused as the nonce rule says.
            let replay = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(apple)&nonce=raw-nonce-1")
            #expect(replay.status == 400)
            #expect(replay.errorMessage == "MISSING_OR_INVALID_NONCE : the nonce was used already: sign in again with a new one", "\(replay.text)")
            let wrong = try await firebase.signInWithIdp(
                "providerId=apple.com&id_token=\(try await firebase.appleToken("apple-fb-2", nonce: "raw-nonce-2"))&nonce=raw-nonce-3")
            #expect(wrong.errorMessage == "MISSING_OR_INVALID_NONCE : the token's nonce is not the SHA-256 of rawNonce", "\(wrong.text)")
        }
    }

    /// Upgrading an anonymous user with `accounts:signUp` and its `idToken` ignored `displayName`: the user
    /// takes it (the emulator's path A) and the answer says it; an overlong one changes nothing.
    @Test func anAnonymousUpgradeBySignUpTakesTheDisplayName() async throws {
        try await FirebaseApp.run { firebase in
            let anonymous = try await firebase.call("accounts:signUp", .object([:]))
            let idToken = try #require(anonymous.string("idToken"))
            let events = try await firebase.app.totalEvents()
            let overlong = try await firebase.call("accounts:signUp", .object([
                "idToken": .string(idToken), "email": "ida@example.com", "password": "ida's password",
                "displayName": .string(String(repeating: "i", count: UserAccount.maximumDisplayNameLength + 1)),
            ]))
            #expect(overlong.status == 400 && overlong.errorMessage?.hasPrefix("INVALID_ARGUMENT") == true, "\(overlong.text)")
            #expect(try await firebase.app.totalEvents() == events)

            let beforeUpgrade = try await firebase.app.lastEventPosition()
            let upgraded = try await firebase.call("accounts:signUp", .object([
                "idToken": .string(idToken), "email": "ida@example.com", "password": "ida's password", "displayName": "Ida",
            ]))
            #expect(upgraded.status == 200, "\(upgraded.text)")
            // The password, the name and the new session are one command: all written, or none.
            #expect(try await firebase.app.transactions(after: beforeUpgrade) == 1)
            #expect(upgraded.string("localId") == anonymous.string("localId"))
            #expect(upgraded.string("displayName") == "Ida")
            #expect(upgraded.idTokenClaims["name"] == "Ida")
            let lookup = try await firebase.call("accounts:lookup", .object(["idToken": .string(try #require(upgraded.string("idToken")))]))
            #expect(lookup.users.first?["displayName"] == "Ida")

            let fresh = try await firebase.call("accounts:signUp", .object(["email": "jo@example.com", "password": "jo's password", "displayName": "Jo"]))
            #expect(fresh.string("displayName") == "Jo")
        }
    }

    /// Emails kept the case they were sent in, where Firebase lowercases them: firebase-admin's
    /// `get_users([EmailIdentifier("Alice@X.com")])` then finds the user but lists the identifier as not found.
    @Test func emailsAreKeptInLowercase() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "Alice@Example.COM", "password": "alice's password"]))
            #expect(signUp.string("email") == "alice@example.com", "\(signUp.text)")
            #expect(signUp.idTokenClaims["email"] == "alice@example.com")
            let signIn = try await firebase.call("accounts:signInWithPassword", .object(["email": "ALICE@example.com", "password": "alice's password"]))
            #expect(signIn.string("email") == "alice@example.com", "\(signIn.text)")

            let created = try await firebase.admin("accounts", .object(["email": "Bob@Example.com"]))
            #expect(created.string("email") == "bob@example.com", "\(created.text)")
            let bob = try await firebase.admin("accounts:lookup", .object(["email": ["Bob@Example.com"]]))
            #expect(bob.users.first?["email"] == "bob@example.com", "\(bob.text)")
            let moved = try await firebase.admin("accounts:update", .object([
                "localId": .string(try #require(created.string("localId"))), "email": "Carol@Example.com",
            ]))
            #expect(moved.string("email") == "carol@example.com", "\(moved.text)")

            let apple = try await firebase.signInWithIdp(
                "providerId=apple.com&id_token=\(try await firebase.appleToken("apple-dee", email: "Dee@PrivateRelay.AppleID.com"))")
            #expect(apple.status == 200, "\(apple.text)")
            #expect(apple.string("email") == "dee@privaterelay.appleid.com")
            #expect(apple.idTokenClaims["email"] == "dee@privaterelay.appleid.com")
        }
    }

    @Test func signInWithIdpMakesOneUserAndAnIdentityLinkedElsewhereIsRefusedInBothShapes() async throws {
        try await FirebaseApp.run { firebase in
            let first = try await firebase.signInWithIdp("providerId=facebook.com&access_token=\(try await firebase.facebookToken("fb-1"))")
            #expect(first.status == 200, "\(first.text)")
            #expect(first.body["isNewUser"] == .bool(true))
            let again = try await firebase.signInWithIdp("providerId=facebook.com&access_token=\(try await firebase.facebookToken("fb-1"))")
            #expect(again.body["isNewUser"] == nil)
            #expect(again.string("localId") == first.string("localId"))

            let other = try await firebase.call("accounts:signUp", .object([:]))
            let otherToken = try #require(other.string("idToken"))
            let before = try await firebase.app.totalEvents()
            let soft = try await firebase.signInWithIdp(
                "providerId=facebook.com&access_token=\(try await firebase.facebookToken("fb-1"))", idToken: otherToken, returnIdpCredential: true)
            #expect(soft.status == 200)
            #expect(soft.string("errorMessage") == "FEDERATED_USER_ID_ALREADY_LINKED")
            #expect(soft.body["idToken"] == nil && soft.body["localId"] == nil)
            let hard = try await firebase.signInWithIdp(
                "providerId=facebook.com&access_token=\(try await firebase.facebookToken("fb-1"))", idToken: otherToken, returnIdpCredential: false)
            #expect(hard.status == 400)
            #expect(hard.text == #"{"error":{"code":400,"errors":[{"domain":"global","message":"FEDERATED_USER_ID_ALREADY_LINKED","reason":"invalid"}],"message":"FEDERATED_USER_ID_ALREADY_LINKED"}}"#)
            #expect(try await firebase.app.totalEvents() == before)

            let unknown = try await firebase.signInWithIdp("providerId=github.com&access_token=x")
            #expect(unknown.errorMessage?.hasPrefix("INVALID_PROVIDER_ID") == true)
            // The messages say what /v1's problems say, never the logs' detail (a provider's answer, a setting).
            #expect(unknown.errorMessage == "INVALID_PROVIDER_ID : Tether verifies apple.com, facebook.com and google.com.")
            for (claims, reason) in [(["aud": "com.someone.else"], "audience"), (["forge": "bad-signature"], "signature")] as [([String: JSONValue], String)] {
                let token = try firebase.app.token("identityToken", of: try await firebase.app.apple("apple-refused", extra: claims))
                let refused = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(token)")
                #expect(refused.status == 400)
                #expect(refused.errorMessage == "INVALID_IDP_RESPONSE : The Apple credential was rejected (\(reason)).", "\(refused.text)")
            }
            let malformed = try await firebase.call("accounts:signInWithIdp", .object(["postBody": .int(5), "requestUri": "http://localhost"]))
            #expect(malformed.status == 400)
            #expect(malformed.errorMessage?.hasPrefix("INVALID_ARGUMENT") == true)
        }
    }

    @Test func aFacebookEmailOfAPasswordAccountNeedsConfirmationWithNoTokens() async throws {
        try await FirebaseApp.run { firebase in
            let owner = try await firebase.call("accounts:signUp", .object(["email": "ann@example.com", "password": "ann's password"]))
            #expect(owner.status == 200, "\(owner.text)")
            let answer = try await firebase.signInWithIdp(
                "providerId=facebook.com&access_token=\(try await firebase.facebookToken("fb-ann", email: "ann@example.com"))")
            #expect(answer.status == 200)
            #expect(answer.body["needConfirmation"] == .bool(true))
            #expect(answer.body["verifiedProvider"] == .array(["password"]))
            #expect(answer.string("localId") == owner.string("localId"))
            #expect(answer.body["idToken"] == nil && answer.body["refreshToken"] == nil)
        }
    }

    /// Classic Facebook sign-ins answered no `oauthAccessToken`, so the iOS SDK built no updated credential for
    /// `accountExistsWithDifferentCredential` or `credentialAlreadyInUse`: every answer echoes the posted token.
    @Test func facebookAnswersEchoThePostedAccessToken() async throws {
        try await FirebaseApp.run { firebase in
            let first = try await firebase.facebookToken("fb-echo")
            let created = try await firebase.signInWithIdp("providerId=facebook.com&access_token=\(first)")
            #expect(created.body["isNewUser"] == .bool(true), "\(created.text)")
            #expect(created.string("oauthAccessToken") == first)
            #expect(created.body["oauthIdToken"] == nil && created.body["oauthTokenSecret"] == nil)

            let other = try #require(try await firebase.call("accounts:signUp", .object([:])).string("idToken"))
            let again = try await firebase.facebookToken("fb-echo")
            let linkedElsewhere = try await firebase.signInWithIdp("providerId=facebook.com&access_token=\(again)", idToken: other)
            #expect(linkedElsewhere.string("errorMessage") == "FEDERATED_USER_ID_ALREADY_LINKED", "\(linkedElsewhere.text)")
            #expect(linkedElsewhere.string("oauthAccessToken") == again)

            _ = try await firebase.call("accounts:signUp", .object(["email": "echo@example.com", "password": "echo's password"]))
            let owned = try await firebase.facebookToken("fb-echo-2", email: "echo@example.com")
            let confirm = try await firebase.signInWithIdp("providerId=facebook.com&access_token=\(owned)")
            #expect(confirm.body["needConfirmation"] == .bool(true), "\(confirm.text)")
            #expect(confirm.string("oauthAccessToken") == owned)
        }
    }

    @Test func aTrustedProviderTakesOverAnUnverifiedPasswordAccountOfItsEmail() async throws {
        try await FirebaseApp.run { firebase in
            let owner = try await firebase.call("accounts:signUp", .object(["email": "zoe@gmail.com", "password": "zoe's password"]))
            let ownerRefresh = try #require(owner.string("refreshToken"))
            let google = try await firebase.app.google("google-zoe", email: "zoe@gmail.com")
            let token = try firebase.app.token("idToken", of: google)
            let takeover = try await firebase.signInWithIdp("providerId=google.com&id_token=\(token)")
            #expect(takeover.status == 200, "\(takeover.text)")
            #expect(takeover.string("localId") == owner.string("localId"))
            #expect(takeover.body["isNewUser"] == nil && takeover.body["needConfirmation"] == nil)
            let lookup = try await firebase.call("accounts:lookup", .object(["idToken": .string(try #require(takeover.string("idToken")))]))
            #expect(lookup.users.first?["emailVerified"] == .bool(true))
            #expect(lookup.users.first?["passwordHash"] == nil, "the unverified password was dropped")
            #expect(try await firebase.refresh(ownerRefresh).errorMessage == "TOKEN_EXPIRED", "earlier sessions were revoked")
        }
    }

    @Test func passwordSignInAndItsErrors() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "bea@example.com", "password": "bea's password"]))
            #expect(signUp.status == 200)
            #expect(try await firebase.call("accounts:signUp", .object(["email": "bea@example.com", "password": "another password"])).errorMessage == "EMAIL_EXISTS")
            #expect(try await firebase.call("accounts:signUp", .object(["email": "", "password": ""])).errorMessage == "INVALID_EMAIL")
            for malformed in ["f@@example.com", "x@a@example.com", "y@.example.com", "z@example..com", "w@example.com.", "v@localhost"] {
                let refused = try await firebase.call("accounts:signUp", .object(["email": .string(malformed), "password": "a long password"]))
                #expect(refused.errorMessage == "INVALID_EMAIL", "\(malformed): \(refused.text)")
            }
            #expect(try await firebase.call("accounts:signUp", .object(["email": "c@example.com", "password": "short"])).errorMessage?.hasPrefix("WEAK_PASSWORD : ") == true)
            let signIn = try await firebase.call("accounts:signInWithPassword", .object(["email": "bea@example.com", "password": "bea's password", "returnSecureToken": true]))
            #expect(signIn.status == 200)
            #expect(signIn.body["registered"] == .bool(true))
            #expect(signIn.string("localId") == signUp.string("localId"))
            guard case .object(let fb)? = signIn.idTokenClaims["firebase"] else { Issue.record("no firebase claim"); return }
            #expect(fb["sign_in_provider"] == "password")
            #expect(fb["identities"] == .object(["email": .array(["bea@example.com"])]))
            let wrong = try await firebase.call("accounts:signInWithPassword", .object(["email": "bea@example.com", "password": "wrong password"]))
            #expect(wrong.status == 400)
            #expect(wrong.errorMessage == "INVALID_LOGIN_CREDENTIALS")
            #expect(try await firebase.call("accounts:signInWithPassword", .object(["email": "nobody@example.com", "password": "wrong password"])).errorMessage
                    == "INVALID_LOGIN_CREDENTIALS")
        }
    }

    @Test func refreshRotatesAndRevocationAnywhereEndsIt() async throws {
        try await FirebaseApp.run { firebase in
            let apple = try await firebase.appleToken("apple-refresh")
            let signIn = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(apple)")
            let refreshToken = try #require(signIn.string("refreshToken"))
            let refreshed = try await firebase.refresh(refreshToken)
            #expect(refreshed.status == 200, "\(refreshed.text)")
            #expect(refreshed.string("expires_in") == "3600" && refreshed.string("token_type") == "Bearer")
            #expect(refreshed.string("user_id") == signIn.string("localId"))
            let next = try #require(refreshed.string("refresh_token"))
            #expect(next == refreshToken, "Firebase refresh tokens stay the same for the session's life")
            // Two tabs refreshing at once both succeed; nobody is signed out.
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        try await firebase.app.withNewClient { client in
                            try await client.post("/securetoken.googleapis.com/v1/token", json: [
                                "grantType": "refresh_token", "refreshToken": refreshToken,
                            ]).status
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == [200, 200])
            #expect(refreshed.string("access_token") == refreshed.string("id_token"))
            // The form the JS SDK and curl send works too.
            let form = FirebaseAnswer(try await firebase.app.client.send(
                "POST", "/securetoken.googleapis.com/v1/token", fields: [("Content-Type", "application/x-www-form-urlencoded")],
                body: Array("grant_type=refresh_token&refresh_token=\(next)".utf8)))
            #expect(form.status == 200, "\(form.text)")
            let latest = try #require(form.string("refresh_token"))
            #expect(try await firebase.refresh("ftr_nonsense").errorMessage == "TOKEN_EXPIRED")
            #expect(try await firebase.refresh("rt_" + String(repeating: "a", count: 43)).errorMessage == "TOKEN_EXPIRED")
            #expect(try await firebase.refresh("ftr_" + String(repeating: "a", count: 43)).errorMessage == "TOKEN_EXPIRED")

            // Revoke-all on /v1 (the same person signs in there) ends this session too.
            let v1 = try await firebase.app.signedIn(try await firebase.app.apple("apple-refresh"))
            #expect(try await firebase.app.client.post(
                "/v1/users/me/sessions/revoke", headers: ["Authorization": "Bearer \(v1.session.accessToken)"], json: [String: String]()).status == 204)
            let revoked = try await firebase.refresh(latest)
            #expect(revoked.status == 400)
            #expect(revoked.errorMessage == "TOKEN_EXPIRED")
            let lookup = try await firebase.call("accounts:lookup", .object(["idToken": .string(form.string("id_token")!)]))
            #expect(lookup.errorMessage == "TOKEN_EXPIRED")
        }
    }

    /// A disabled user's refresh token answered `TOKEN_EXPIRED` and a deleted user's too: Firebase says
    /// `USER_DISABLED` and `USER_NOT_FOUND`, and the SDKs tell the user why they were signed out.
    @Test func refreshingADisabledUsersTokenIsUserDisabledAndADeletedUsersUserNotFound() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "dot@example.com", "password": "dot's password"]))
            let localId = try #require(signUp.string("localId"))
            let refreshToken = try #require(signUp.string("refreshToken"))
            #expect(try await firebase.refresh(refreshToken).status == 200)
            #expect(try await firebase.admin("accounts:update", .object(["localId": .string(localId), "disableUser": true])).status == 200)
            let disabled = try await firebase.refresh(refreshToken)
            #expect(disabled.status == 400 && disabled.errorMessage == "USER_DISABLED", "\(disabled.text)")
            #expect(try await firebase.admin("accounts:delete", .object(["localId": .string(localId)])).status == 200)
            let deleted = try await firebase.refresh(refreshToken)
            #expect(deleted.status == 400 && deleted.errorMessage == "USER_NOT_FOUND", "\(deleted.text)")
            // A signed-out session's token stays TOKEN_EXPIRED.
            let other = try await firebase.call("accounts:signUp", .object([:]))
            let otherId = try #require(other.string("localId"))
            #expect(try await firebase.admin("accounts:update", .object(["localId": .string(otherId), "validSince": .int(Int(Date().timeIntervalSince1970))])).status == 200)
            #expect(try await firebase.refresh(try #require(other.string("refreshToken"))).errorMessage == "TOKEN_EXPIRED")
        }
    }

    @Test func adminCallsNeedAnAdminAndOwnerOnlyUnderDev() async throws {
        try await FirebaseApp.run { firebase in
            #expect(try await firebase.admin("accounts:lookup", .object(["localId": ["x"]]), as: nil).status == 401)
            #expect(try await firebase.admin("accounts:lookup", .object(["localId": ["x"]]), as: "someone").status == 401)
            let none = try await firebase.admin("accounts:lookup", .object(["localId": ["nobody"]]))
            #expect(none.status == 200)
            #expect(none.body["users"] == nil, "no match: no users key")
            let wrongProject = FirebaseAnswer(try await firebase.app.client.send(
                "POST", "\(FirebaseApp.v1)/projects/other/accounts:lookup", fields: [("Authorization", "Bearer owner")], body: Array("{}".utf8)))
            #expect(wrongProject.status == 404)
        }
        try await FirebaseApp.run(settings: ["TETHER_TEST_PRODUCTION": "1"]) { firebase in
            #expect(try await firebase.admin("accounts:lookup", .object(["localId": ["x"]])).status == 401)
            let (_, key) = try await AdminKeyStore(database: firebase.app.admin).create(role: .admin, name: "fb", metadata: EventMetadata(surface: "cli"))
            #expect(try await firebase.admin("accounts:lookup", .object(["localId": ["x"]]), as: key).status == 200)
            let (_, support) = try await AdminKeyStore(database: firebase.app.admin).create(role: .support, name: "s", metadata: EventMetadata(surface: "cli"))
            #expect(try await firebase.admin("accounts:lookup", .object(["localId": ["x"]]), as: support).status == 403)

            // An admin key's reads are recorded, as on /v1/admin: a lookup in each user's history, a directory page as a listing.
            let signedUp = try await firebase.call("accounts:signUp", .object(["email": "looked-at@example.com", "password": "a long password"]))
            let userId = try #require(signedUp.string("localId"))
            #expect(try await firebase.app.eventCount("AdminUserViewed", userId: userId) == 0)
            let looked = try await firebase.admin("accounts:lookup", .object(["email": ["looked-at@example.com"]]), as: key)
            #expect(looked.users.count == 1)
            #expect(try await firebase.app.eventCount("AdminUserViewed", userId: userId) == 1, "the user's history shows the lookup")
            let listed = FirebaseAnswer(try await firebase.app.client.send(
                "GET", "\(FirebaseApp.v1)/projects/\(FirebaseApp.projectID)/accounts:batchGet?maxResults=10",
                fields: [("Authorization", "Bearer \(key)")]))
            #expect(listed.status == 200 && listed.users.count == 1, "\(listed.text)")
            #expect(try await firebase.app.eventCount("AdminUsersSearched") == 1)
        }
    }

    @Test func adminUserManagementCreateLookupUpdateListAndDelete() async throws {
        try await FirebaseApp.run { firebase in
            let created = try await firebase.admin("accounts", .object([
                "localId": "custom-uid-1", "email": "dan@example.com", "password": "dan's password", "displayName": "Dan",
                "emailVerified": true,
            ]))
            #expect(created.status == 200, "\(created.text)")
            #expect(created.string("localId") == "custom-uid-1")
            #expect(try await firebase.admin("accounts", .object(["localId": "custom-uid-1"])).errorMessage == "DUPLICATE_LOCAL_ID")
            #expect(try await firebase.admin("accounts", .object(["email": "dan@example.com"])).errorMessage == "EMAIL_EXISTS")
            let bare = try await firebase.admin("accounts", .object([:]))
            #expect(bare.status == 200)

            let byId = try await firebase.admin("accounts:lookup", .object(["localId": ["custom-uid-1"]]))
            let dan = try #require(byId.users.first)
            #expect(dan["email"] == "dan@example.com" && dan["displayName"] == "Dan" && dan["emailVerified"] == .bool(true))
            guard case .string(let createdAt)? = dan["createdAt"] else { Issue.record("createdAt"); return }
            #expect(Int64(createdAt) != nil)
            #expect(dan["passwordHash"] == .string("UkVEQUNURUQ="))
            #expect(try await firebase.admin("accounts:lookup", .object(["email": ["DAN@example.com"]])).users.count == 1)
            #expect(try await firebase.admin("accounts:lookup", .object([
                "federatedUserId": .array([.object(["providerId": "password", "rawId": "dan@example.com"])]),
            ])).users.first?["localId"] == "custom-uid-1")
            // A provider Tether does not serve holds nobody: the rest of the lookup is answered (firebase-admin's
            // get_users then lists it in not_found); an entry without its members is still refused.
            let mixed = try await firebase.admin("accounts:lookup", .object([
                "localId": ["custom-uid-1"], "federatedUserId": .array([.object(["providerId": "github.com", "rawId": "123"])]),
            ]))
            #expect(mixed.status == 200 && mixed.users.map { $0["localId"] } == ["custom-uid-1"], "\(mixed.text)")
            #expect(try await firebase.admin("accounts:lookup", .object([
                "federatedUserId": .array([.object(["providerId": "github.com"])]),
            ])).errorMessage?.hasPrefix("INVALID_ARGUMENT") == true)

            // Claims, disable, name; then the password signs in and the claims ride in the ID token.
            #expect(try await firebase.admin("accounts:update", .object(["localId": "custom-uid-1", "customAttributes": #"{"admin":true}"#])).status == 200)
            #expect(try await firebase.admin("accounts:update", .object(["localId": "custom-uid-1", "customAttributes": #"{"sub":"x"}"#])).errorMessage
                    == "FORBIDDEN_CLAIM : sub")
            #expect(try await firebase.admin("accounts:update", .object([
                "localId": "custom-uid-1", "customAttributes": .string("{\"a\":\"\(String(repeating: "x", count: 1000))\"}"),
            ])).errorMessage == "CLAIMS_TOO_LARGE")
            #expect(try await firebase.admin("accounts:update", .object(["localId": "custom-uid-1", "deleteAttribute": ["DISPLAY_NAME"]])).status == 200)
            let signIn = try await firebase.call("accounts:signInWithPassword", .object(["email": "dan@example.com", "password": "dan's password"]))
            #expect(signIn.idTokenClaims["admin"] == .bool(true))
            #expect(signIn.idTokenClaims["name"] == nil)
            #expect(try await firebase.admin("accounts:update", .object(["localId": "custom-uid-1", "disableUser": true])).status == 200)
            #expect(try await firebase.call("accounts:lookup", .object(["idToken": .string(signIn.string("idToken")!)])).errorMessage == "USER_DISABLED")
            #expect(try await firebase.refresh(signIn.string("refreshToken")!).errorMessage == "USER_DISABLED")

            // A client may not use admin fields.
            let anonymous = try await firebase.call("accounts:signUp", .object([:]))
            #expect(try await firebase.call("accounts:update", .object(["idToken": .string(anonymous.string("idToken")!), "disableUser": true])).status == 403)

            // batchGet pages through every user; batchDelete needs force for enabled users.
            var seen: [String] = []
            var token: String?
            repeat {
                let path = "\(FirebaseApp.v1)/projects/\(FirebaseApp.projectID)/accounts:batchGet?maxResults=2" + (token.map { "&nextPageToken=\($0)" } ?? "")
                let page = FirebaseAnswer(try await firebase.app.client.get(path, headers: ["Authorization": "Bearer owner"]))
                #expect(page.status == 200, "\(page.text)")
                seen += page.users.compactMap { if case .string(let id)? = $0["localId"] { id } else { nil } }
                token = page.string("nextPageToken")
            } while token != nil
            #expect(seen.count == 3)
            #expect(Set(seen).count == 3)
            let bareId = try #require(bare.string("localId"))
            let refused = try await firebase.admin("accounts:batchDelete", .object(["localIds": .array([.string(bareId), "nobody"])]))
            #expect(refused.text.contains("NOT_DISABLED"))
            #expect(try await firebase.admin("accounts:batchDelete", .object(["localIds": .array([.string(bareId)]), "force": true])).text == "{}")
            let deleted = try await firebase.admin("accounts:delete", .object(["localId": "custom-uid-1"]))
            #expect(deleted.string("kind") == "identitytoolkit#DeleteAccountResponse")
            #expect(try await firebase.admin("accounts:lookup", .object(["localId": ["custom-uid-1"]])).body["users"] == nil)
            #expect(try await firebase.admin("accounts:delete", .object(["localId": "custom-uid-1"])).errorMessage == "USER_NOT_FOUND")
            #expect(try await firebase.app.eventCount("UserErased") == 2)
        }
    }
}
