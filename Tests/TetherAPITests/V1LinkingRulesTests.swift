import TetherCore
import Foundation
import Testing
import TetherAPI
import TetherHTTP
import TetherPostgres
import TetherTesting

/// SEMANTICS.md §2–§3, one rule a test, over real HTTP with dev identity provider tokens.
@Suite("/v1 linking rules over HTTP")
struct V1LinkingRulesTests {
    @Test func aNewIdentityMakesAUserAndReturningSignsInTheSameUser() async throws {
        try await DevService.run { app in
            let first = try await app.signIn(try await app.apple("apple-new", email: "new@privaterelay.appleid.com"))
            #expect(first.status == 201)
            let created = try first.decodeJSON(SignedIn.self)
            #expect(created.isNewUser == true)
            #expect(created.user.email == "new@privaterelay.appleid.com")
            #expect(created.user.emailVerified)
            #expect(created.user.identities.map(\.provider) == ["apple"])

            let again = try await app.signIn(try await app.apple("apple-new", email: "new@privaterelay.appleid.com"))
            #expect(again.status == 200)
            let returning = try again.decodeJSON(SignedIn.self)
            #expect(returning.isNewUser == false)
            #expect(returning.user.id == created.user.id)
            #expect(returning.session.id != created.session.id)
            #expect(try await app.eventCount("UserRegistered") == 1)
        }
    }

    @Test func linkingAddsAProviderAndTheUserShowsBoth() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-link"))
            let linked = try await app.link(try await app.facebook("fb-link", email: "link@example.com"), to: user.session.accessToken)
            #expect(linked.status == 200)
            let after = try linked.decodeJSON(UserEnvelope.self).user
            #expect(Set(after.identities.map(\.provider)) == ["apple", "facebook"])

            let me = try await app.me(user.session.accessToken)
            #expect(me.status == 200)
            #expect(Set(try me.decodeJSON(UserEnvelope.self).user.identities.map(\.provider)) == ["apple", "facebook"])

            // The linked Facebook identity now signs in to the same user.
            let viaFacebook = try await app.signedIn(try await app.facebook("fb-link"))
            #expect(viaFacebook.user.id == user.user.id)
        }
    }

    /// A token whose sign-in is older than five minutes (a refreshed session, or a stolen refresh token) could
    /// add a password of its holder's choosing and remove the owner's providers, though it could not change
    /// the email. Adding a password and unlinking now need a recent sign-in; linking a provider, whose token
    /// proves that identity afresh, does not.
    @Test func addingAPasswordOrUnlinkingNeedsARecentSignIn() async throws {
        try await DevService.run { app in
            let owner = try await app.signedIn(try await app.apple("apple-stale", email: "stale@privaterelay.appleid.com"))
            _ = try await app.link(try await app.google("google-stale", email: "stale@gmail.com"), to: owner.session.accessToken)
            let stale = try await app.accessToken(owner.session.accessToken, signedInSecondsAgo: 600)
            let events = try await app.admin.query("SELECT count(*)::int AS n FROM events")[0].decode("n", as: Int.self)
            let password = try await app.link(app.password("stale@privaterelay.appleid.com", "intruder's password"), to: stale)
            #expect(password.status == 401 && password.bodyText.contains("recent_login_required"), "\(password.bodyText)")
            let unlink = try await app.client.delete("/v1/users/me/identities/apple", headers: ["Authorization": "Bearer \(stale)"])
            #expect(unlink.status == 401 && unlink.bodyText.contains("recent_login_required"), "\(unlink.bodyText)")
            #expect(try await app.admin.query("SELECT count(*)::int AS n FROM events")[0].decode("n", as: Int.self) == events)
            #expect(try await app.signIn(app.password("stale@privaterelay.appleid.com", "intruder's password")).status == 401)

            let facebook = try await app.link(try await app.facebook("fb-stale"), to: stale)
            #expect(facebook.status == 200, "a provider's fresh token proves that identity: \(facebook.bodyText)")
            let short = try await app.link(app.password("stale@privaterelay.appleid.com", "short"), to: owner.session.accessToken)
            let shortPointer = try short.json["pointer"]?.string
            #expect(short.status == 400 && shortPointer == "/credential/password", "\(short.bodyText)")
            let notAnEmail = try await app.link(app.password("stale@example", "the owner's password"), to: owner.session.accessToken)
            let notAnEmailPointer = try notAnEmail.json["pointer"]?.string
            #expect(notAnEmail.status == 400 && notAnEmailPointer == "/credential/email", "\(notAnEmail.bodyText)")
            #expect(try await app.link(app.password("stale@privaterelay.appleid.com", "the owner's password"), to: owner.session.accessToken).status == 200)
            let fresh = try await app.client.delete("/v1/users/me/identities/google", headers: ["Authorization": "Bearer \(owner.session.accessToken)"])
            #expect(fresh.status == 200, "\(fresh.bodyText)")

            // An anonymous user cannot sign in again: its upgrade to a password is not held to the rule.
            let anonymous = try await app.client.post("/v1/sign-in", json: ["provider": "anonymous"]).decodeJSON(SignedIn.self)
            let staleAnonymous = try await app.accessToken(anonymous.session.accessToken, signedInSecondsAgo: 3_600)
            let upgrade = try await app.link(app.password("upgraded@example.com", "the upgrade's password"), to: staleAnonymous)
            #expect(upgrade.status == 200, "\(upgrade.bodyText)")
        }
    }

    @Test func linkingAnIdentityOwnedByAnotherUserFails() async throws {
        try await DevService.run { app in
            let owner = try await app.signedIn(try await app.apple("apple-owner"))
            _ = try await app.link(try await app.google("google-taken"), to: owner.session.accessToken)
            let other = try await app.signedIn(try await app.apple("apple-other"))
            let before = try await app.totalEvents()
            let response = try await app.link(try await app.google("google-taken"), to: other.session.accessToken)
            #expect(response.status == 409)
            #expect(try response.decodeJSON(ProblemBody.self).code == "credential_already_in_use")
            #expect(try await app.totalEvents() == before)
        }
    }

    /// Two users linking one identity at once: the loser is told the credential is in use, as it is told when the
    /// two come one after the other, not that the winner's new address is taken. (The address's lock is held here
    /// while both links arrive, so that they race for it.)
    @Test func theLoserOfARaceToLinkOneIdentityIsToldTheCredentialIsInUse() async throws {
        try await DevService.run { app in
            let first = try await app.client.post("/v1/sign-in", json: ["provider": "anonymous"]).decodeJSON(SignedIn.self)
            let second = try await app.client.post("/v1/sign-in", json: ["provider": "anonymous"]).decodeJSON(SignedIn.self)
            let google = try await app.google("google-raced", email: "raced@example.com")
            let lock = try await AddressLock.take("raced@example.com", in: app)
            async let a = app.withNewClient { try await app.link(google, to: first.session.accessToken, on: $0) }
            async let b = app.withNewClient { try await app.link(google, to: second.session.accessToken, on: $0) }
            try await lock.waitForWaiters(2)
            try await lock.release()
            let answers = try await [a, b]
            #expect(answers.map(\.status).sorted() == [200, 409])
            let loser = try #require(answers.first { $0.status == 409 })
            #expect(try loser.decodeJSON(ProblemBody.self).code == "credential_already_in_use", "\(loser.bodyText)")
        }
    }

    /// The same race between a link and a Firebase admin's import of a user with that identity: the import, second
    /// to the address's lock, is told the identity is taken, not only the address the link gave its user.
    @Test func anImportThatLosesARaceToALinkIsToldTheIdentityIsTaken() async throws {
        try await DevService.run(settings: ["TETHER_FIREBASE_PROJECT_ID": "demo-race"]) { app in
            let guest = try await app.client.post("/v1/sign-in", json: ["provider": "anonymous"]).decodeJSON(SignedIn.self)
            let google = try await app.google("google-imported", email: "imported@example.com")
            let lock = try await AddressLock.take("imported@example.com", in: app)
            async let linked = app.withNewClient { try await app.link(google, to: guest.session.accessToken, on: $0) }
            try await lock.waitForWaiters(1)
            async let imported = app.withNewClient { client in
                try await client.post(
                    "/identitytoolkit.googleapis.com/v1/projects/demo-race/accounts:batchCreate", headers: ["Authorization": "Bearer owner"],
                    json: ["users": [["localId": "imported-1", "email": "imported@example.com", "emailVerified": true,
                                      "providerUserInfo": [["providerId": "google.com", "rawId": "google-imported"]]]]] as JSONValue)
            }
            try await lock.waitForWaiters(2)
            try await lock.release()
            #expect(try await linked.status == 200)
            let answer = try await imported
            #expect(answer.status == 200 && answer.bodyText.contains("provider identity belongs to an existing account"), "\(answer.bodyText)")
        }
    }

    @Test func aSecondIdentityOfALinkedProviderFails() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-two"))
            #expect(try await app.link(try await app.google("google-first"), to: user.session.accessToken).status == 200)
            let second = try await app.link(try await app.google("google-second"), to: user.session.accessToken)
            #expect(second.status == 409)
            #expect(try second.decodeJSON(ProblemBody.self).code == "provider_already_linked")
            // The same identity again is in use, even by this account (SEMANTICS §1); a password user's own address
            // and a password is a password linked already (it was "another account uses this email address").
            let again = try await app.link(try await app.google("google-first"), to: user.session.accessToken)
            #expect(try again.decodeJSON(ProblemBody.self).code == "credential_already_in_use", "\(again.bodyText)")
            let signUp = try await app.client.post("/v1/sign-up", json: ["email": "own@example.com", "password": "a long password"])
            let own = try signUp.decodeJSON(SignedIn.self)
            let ownAddress = try await app.link(app.password("own@example.com", "another long password"), to: own.session.accessToken)
            #expect(ownAddress.status == 409)
            #expect(try ownAddress.decodeJSON(ProblemBody.self).code == "provider_already_linked", "\(ownAddress.bodyText)")
        }
    }

    @Test func linkingAnEmailOwnedByAnotherUserFailsUnderOneAccountPerEmail() async throws {
        try await DevService.run { app in
            _ = try await app.signedIn(try await app.apple("apple-ada", email: "ada@example.com"))
            let other = try await app.signedIn(try await app.apple("apple-bob"))
            let response = try await app.link(try await app.google("google-ada", email: "ada@example.com"), to: other.session.accessToken)
            #expect(response.status == 409)
            #expect(try response.decodeJSON(ProblemBody.self).code == "email_already_in_use")
        }
    }

    @Test func anEmailOwnedByAnotherUserNeedsTheOtherCredentialFirst() async throws {
        try await DevService.run { app in
            let owner = try await app.signedIn(try await app.apple("apple-grace", email: "grace@example.com"))
            let before = try await app.totalEvents()
            let response = try await app.signIn(try await app.google("google-grace", email: "grace@example.com"))
            #expect(response.status == 409)
            let problem = try response.decodeJSON(ProblemBody.self)
            #expect(problem.code == "account_exists_with_different_credential")
            #expect(problem.email == "grace@example.com")
            #expect(problem.signInMethods == ["apple"])
            #expect(try await app.totalEvents() == before, "a refused sign-in writes nothing")

            // The documented way out: sign in with the existing method, then link.
            #expect(try await app.link(try await app.google("google-grace", email: "grace@example.com"),
                                       to: owner.session.accessToken).status == 200)
        }
    }

    /// A password signs in with the user's own address. Linked on another, it held that address for a user who
    /// does not show it: the address's owner could then neither sign up with it, nor add a password on it after
    /// proving it, nor reset it (a review's squat). It is refused and writes nothing; on the user's own address, or
    /// for a user with none yet (whose address it becomes), it is linked.
    @Test func aPasswordIsLinkedOnlyOnTheUsersOwnAddress() async throws {
        try await DevService.run { app in
            let owner = try await app.signedIn(try await app.apple("apple-pw-other", email: "pw@example.com"))
            let events = try await app.totalEvents()
            let squat = try await app.link(
                Credential(provider: "password", credential: ["email": "PW.Other@example.com", "password": "a long password"]),
                to: owner.session.accessToken)
            let pointer = try squat.json["pointer"]?.string
            #expect(squat.status == 400 && pointer == "/credential/email", "\(squat.bodyText)")
            #expect(try await app.totalEvents() == events, "a refused link writes nothing")
            let signUp = try await app.client.post("/v1/sign-up", json: ["email": "pw.other@example.com", "password": "the owner's password"])
            #expect(signUp.status == 201, "the address's owner signs up with it: \(signUp.bodyText)")

            let own = try await app.link(
                Credential(provider: "password", credential: ["email": "PW@example.com", "password": "a long password"]), to: owner.session.accessToken)
            #expect(own.status == 200, "\(own.bodyText)")
            #expect(try await app.signIn(app.password("pw@example.com", "a long password")).decodeJSON(SignedIn.self).user.id == owner.user.id)

            let noAddress = try await app.signedIn(try await app.facebook("fb-pw-no-address"))
            #expect(noAddress.user.email == nil)
            let first = try await app.link(
                Credential(provider: "password", credential: ["email": "first.address@example.com", "password": "a long password"]),
                to: noAddress.session.accessToken)
            #expect(first.status == 200, "\(first.bodyText)")
            #expect(try first.decodeJSON(UserEnvelope.self).user.email == "first.address@example.com")
        }
    }

    @Test func duplicateEmailsMakeSeparateUsersWhenThePolicyAllowsThem() async throws {
        try await DevService.run(settings: ["TETHER_EMAIL_POLICY": "allow-duplicate-emails"]) { app in
            let first = try await app.signedIn(try await app.apple("apple-dup", email: "dup@example.com"))
            let second = try await app.signIn(try await app.google("google-dup", email: "dup@example.com"))
            #expect(second.status == 201)
            #expect(try second.decodeJSON(SignedIn.self).user.id != first.user.id)
        }
    }

    @Test func aTrustedProviderTakesOverAnUnverifiedAccountAndEndsItsSessions() async throws {
        try await DevService.run { app in
            let signUp = try await app.client.post("/v1/sign-up", json: ["email": "lin@gmail.com", "password": "a long password"])
            #expect(signUp.status == 201)
            let old = try signUp.decodeJSON(SignedIn.self)
            #expect(old.user.emailVerified == false)
            // Whoever signed up may have linked an Apple ID and a Google account of theirs, whose providers proved
            // another address: the owner's Google account takes the place of the squatter's.
            let squatter = try await app.apple("apple-squatter", email: "squatter@icloud.com")
            #expect(try await app.link(squatter, to: old.session.accessToken).status == 200)
            let squattersGoogle = try await app.google("google-squatter", email: "squatter@gmail.com")
            #expect(try await app.link(squattersGoogle, to: old.session.accessToken).status == 200)

            let takeover = try await app.signIn(try await app.google("google-lin", email: "lin@gmail.com", verified: true))
            #expect(takeover.status == 200)
            let now = try takeover.decodeJSON(SignedIn.self)
            #expect(now.user.id == old.user.id)
            #expect(now.user.emailVerified)
            #expect(now.user.identities.map(\.provider) == ["google"], "the unverified password and the other address's identities are dropped")
            for again in [try await app.apple("apple-squatter", email: "squatter@icloud.com"), try await app.google("google-squatter", email: "squatter@gmail.com")] {
                let squattersAgain = try await app.signIn(again)
                #expect(try squattersAgain.decodeJSON(SignedIn.self).user.id != old.user.id, "\(again.provider) no longer signs in to this account")
            }

            #expect(try await app.me(old.session.accessToken).status == 401, "old access tokens stop working")
            let oldRefresh = try await app.refresh(old.session.refreshToken)
            #expect(oldRefresh.status == 401)
            #expect(try await app.me(now.session.accessToken).status == 200)
            let password = try await app.signIn(app.password("lin@gmail.com", "a long password"))
            #expect(password.status == 401)
        }
    }

    @Test func anUntrustedProviderWithTheSameEmailDoesNotTakeOver() async throws {
        try await DevService.run { app in
            let signUp = try await app.client.post("/v1/sign-up", json: ["email": "kay@example.com", "password": "a long password"])
            let old = try signUp.decodeJSON(SignedIn.self)
            // Facebook never vouches for an email, and Google is trusted only for gmail.com.
            for credential in [try await app.facebook("fb-kay", email: "kay@example.com"),
                               try await app.google("google-kay", email: "kay@example.com", verified: true)] {
                let response = try await app.signIn(credential)
                #expect(response.status == 409)
                #expect(try response.decodeJSON(ProblemBody.self).code == "account_exists_with_different_credential")
            }
            #expect(try await app.me(old.session.accessToken).status == 200)
        }
    }

    @Test func unlinkingRemovesAProviderButNeverTheLastOne() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-unlink"))
            _ = try await app.link(try await app.facebook("fb-unlink"), to: user.session.accessToken)
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(user.session.accessToken)"]

            let unlinked = try await app.client.delete("/v1/users/me/identities/facebook", headers: auth)
            #expect(unlinked.status == 200)
            #expect(try unlinked.decodeJSON(UserEnvelope.self).user.identities.map(\.provider) == ["apple"])

            let missing = try await app.client.delete("/v1/users/me/identities/facebook", headers: auth)
            #expect(missing.status == 404)
            #expect(try missing.decodeJSON(ProblemBody.self).code == "no_such_provider")

            let last = try await app.client.delete("/v1/users/me/identities/apple", headers: auth)
            #expect(last.status == 409)
            #expect(try last.decodeJSON(ProblemBody.self).code == "last_sign_in_method")

            // The unlinked Facebook identity is free again: it makes a new user.
            #expect(try await app.signIn(try await app.facebook("fb-unlink")).status == 201)
        }
    }

    @Test func facebookEmailsAreNeverVerified() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.facebook("fb-mail", email: "mail@example.com"))
            #expect(user.user.email == "mail@example.com")
            #expect(user.user.emailVerified == false)
            #expect(user.user.identities.first?.emailVerified == false)
        }
    }

    @Test func aDisabledUserCannotSignInAndLosesItsSessions() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-disabled"))
            let accounts = AccountService(database: app.admin, emailPolicy: .oneAccountPerEmail)
            try await accounts.setDisabled(true, userId: UUID(uuidString: user.user.id)!, reason: "test", context: CommandContext())

            let response = try await app.signIn(try await app.apple("apple-disabled"))
            #expect(response.status == 403)
            #expect(try response.decodeJSON(ProblemBody.self).code == "user_disabled")
            #expect(try await app.me(user.session.accessToken).status == 401)
            #expect(try await app.refresh(user.session.refreshToken).status == 401)
            #expect(try await app.eventCount("SignInFailed", userId: user.user.id) == 1, "support staff see the refused attempt")

            try await accounts.setDisabled(false, userId: UUID(uuidString: user.user.id)!, reason: "test", context: CommandContext())
            #expect(try await app.signIn(try await app.apple("apple-disabled")).status == 200)
        }
    }

    @Test func forgedExpiredAndMisaddressedTokensAreRefusedAndWriteNoUser() async throws {
        try await DevService.run { app in
            let cases: [[String: JSONValue]] = [
                ["sub": "x", "forge": "bad-signature"],
                ["sub": "x", "forge": "alg-none"],
                ["sub": "x", "forge": "hs256-public-key"],
                ["sub": "x", "expiresIn": .int(-600)],
                ["sub": "x", "aud": "com.someone.else"],
            ]
            for claims in cases {
                let token = try await app.idp.post("/dev-idp/apple/token", json: claims).decodeJSON([String: String].self)["identityToken"]!
                let response = try await app.signIn(Credential(provider: "apple", credential: ["identityToken": .string(token)]))
                #expect(response.status == 401, "\(claims)")
                #expect(try response.decodeJSON(ProblemBody.self).code == "invalid_credential")
            }
            let unknown = try await app.signIn(Credential(provider: "myspace", credential: ["token": "x"]))
            #expect(unknown.status == 400)
            #expect(try unknown.decodeJSON(ProblemBody.self).code == "unsupported_provider")
            #expect(try await app.eventCount("UserRegistered") == 0)
        }
    }
}

/// Answers show the state a command left, computed in memory; they must be exactly what a read of
/// the read models shows afterwards.
@Suite("Answers match the read models")
struct AnswersMatchReadModelsTests {
    /// The `user` member of a JSON body, as loose JSON.
    private func user(_ response: HTTPTestClient.Response) throws -> JSONValue? {
        try response.decodeJSON([String: JSONValue].self)["user"]
    }

    @Test func signInLinkAndUnlinkAnswerWhatUsersMeShows() async throws {
        try await DevService.run { app in
            let apple = try await app.apple(
                "apple-answers", email: "answers@privaterelay.appleid.com",
                extra: ["name": "Ada Lovelace", "givenName": "Ada", "familyName": "Lovelace"])
            let first = try await app.signIn(apple)
            #expect(first.status == 201)
            let token = try first.decodeJSON(SignedIn.self).session.accessToken
            #expect(try user(first) == user(try await app.me(token)))
            let returning = try await app.signIn(try await app.apple("apple-answers", email: "answers@privaterelay.appleid.com"))
            #expect(returning.status == 200)
            #expect(try user(returning) == user(try await app.me(token)), "lastSignInAt and all, as the row holds them")
            let linked = try await app.link(try await app.google("google-answers", email: "answers@gmail.com"), to: token)
            #expect(linked.status == 200)
            #expect(try user(linked) == user(try await app.me(token)))
            let unlinked = try await app.client.delete(
                "/v1/users/me/identities/google", headers: ["Authorization": "Bearer \(token)"])
            #expect(unlinked.status == 200)
            #expect(try user(unlinked) == user(try await app.me(token)))
        }
    }
}

/// An address's lock (`email:<address>`, as commands take it) held from outside, so that commands about the
/// address queue behind it in the order they arrive.
struct AddressLock {
    let app: DevService
    let held: AsyncStream<Void>.Continuation
    let holder: Task<Void, any Error>

    static func take(_ address: String, in app: DevService) async throws -> AddressLock {
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        let taken = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await app.admin.withTransaction { connection in
                _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\("email:" + address), 0))")
                taken.continuation.finish()
                for await _ in stream { break }
            }
        }
        for await _ in taken.stream {}
        return AddressLock(app: app, held: continuation, holder: holder)
    }

    /// Returns once `count` sessions wait for an advisory lock.
    func waitForWaiters(_ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let waiting: Int = try await app.admin.query(
                "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")[0].decode("n")
            if waiting >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw HarnessError("\(count) commands never waited for the address's lock")
    }

    func release() async throws {
        held.finish()
        try await holder.value
    }
}
