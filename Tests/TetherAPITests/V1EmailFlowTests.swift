import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherProviders
import TetherTesting

@Suite("/v1 email flows: password reset, verification and email change through the dev outbox")
struct V1EmailFlowTests {
    private func signUp(_ service: DevService, _ email: String, password: String = "first password") async throws -> SignedIn {
        let response = try await service.client.post("/v1/sign-up", json: ["email": email, "password": password])
        guard response.status == 201 else { throw HarnessError("sign-up answered \(response.status): \(response.bodyText)") }
        return try response.decodeJSON(SignedIn.self)
    }

    private func bearer(_ signedIn: SignedIn) -> KeyValuePairs<String, String> {
        ["Authorization": "Bearer \(signedIn.session.accessToken)"]
    }

    @Test func aResetCodeWorksOnceEndsEverySessionAndProvesTheAddress() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "Ada@Example.com")
            let notAnEmail = try await service.client.post("/v1/password-reset", json: ["email": "ada at example.com"])
            let notAnEmailPointer = try notAnEmail.json["pointer"]?.string
            #expect(notAnEmail.status == 400 && notAnEmailPointer == "/email", "\(notAnEmail.bodyText)")
            let asked = try await service.client.post("/v1/password-reset", headers: ["Accept-Language": "fr-CH, fr;q=0.9"], json: ["email": "ada@example.com"])
            #expect(asked.status == 202)
            let mail = try await service.lastMail(to: "Ada@Example.com")
            #expect(mail.template == "password_reset")
            #expect(mail.locale == "fr-CH")
            #expect(mail.mailed)
            #expect(mail.code.count == 54)
            #expect(mail.link.hasSuffix("/actions/reset-password?code=\(mail.code)"))
            #expect(ISO8601Milliseconds.parse(mail.expiresAt)!.timeIntervalSinceNow > 3500)

            let weak = try await service.client.post("/v1/password-reset/confirm", json: ["code": mail.code, "newPassword": "short"])
            #expect(weak.status == 400)
            #expect(try weak.json["pointer"]?.string == "/newPassword", "the member the request named")
            #expect(try await service.eventCount("EmailCodeUsed") == 0, "a weak password spends nothing")

            let reset = try await service.client.post("/v1/password-reset/confirm", json: ["code": mail.code, "newPassword": "a new password"])
            #expect(reset.status == 200)
            let user = try reset.decodeJSON([String: SignedIn.User].self)["user"]
            #expect(user?.emailVerified == true)
            #expect(try await service.me(ada.session.accessToken).status == 401, "the reset ended the old session")

            let again = try await service.client.post("/v1/password-reset/confirm", json: ["code": mail.code, "newPassword": "a third password"])
            #expect(again.status == 401)
            #expect(again.bodyText.contains("invalid_code"))
            #expect(again.bodyText.contains("already used"))
            #expect(try await service.signIn(service.password("ada@example.com", "a third password")).status == 401)
            #expect(try await service.signIn(service.password("ada@example.com", "first password")).status == 401)
            #expect(try await service.signIn(service.password("ada@example.com", "a new password")).status == 200)
            // Presented again and again, it is refused each time and recorded once: a kept code cannot grow the log.
            for _ in 0..<5 {
                let more = try await service.client.post("/v1/password-reset/confirm", json: ["code": mail.code, "newPassword": "a third password"])
                #expect(more.status == 401 && more.bodyText.contains("already used"))
            }
            #expect(try await service.eventCount("EmailCodeRefused", userId: ada.user.id) == 1)
        }
    }

    /// Anyone can make up a code of the right shape (for a user they know, or for nobody): refusing it costs
    /// no password hash (scrypt), on `/v1`, on the page a mail links to, and on Firebase; a real code costs one.
    @Test func aMadeUpResetCodeCostsNoPasswordHash() async throws {
        try await DevService.run(settings: ["TETHER_FIREBASE_PROJECT_ID": "demo-project"]) { service in
            let ada = try await signUp(service, "hash-ada@example.com")
            #expect(try await service.client.post("/v1/password-reset", json: ["email": "hash-ada@example.com"]).status == 202)
            let mail = try await service.lastMail(to: "hash-ada@example.com")
            func hashes() async throws -> Double { try await service.passwordHashes() }
            let before = try await hashes()
            let made = [EmailCodeFormat.make(for: try #require(UUID(uuidString: ada.user.id))).code, EmailCodeFormat.make(for: UUID()).code]
            for code in made {
                let v1 = try await service.client.post("/v1/password-reset/confirm", json: ["code": code, "newPassword": "a new password"])
                #expect(v1.status == 401 && v1.bodyText.contains("invalid_code"), "\(v1.bodyText)")
                let page = try await service.client.post(
                    "/actions/reset-password", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                    body: Array("code=\(code)&newPassword=a+new+password&confirmPassword=a+new+password".utf8))
                #expect(page.status >= 400 && page.status < 500, "\(page.status)")
                let firebase = try await service.client.post(
                    "/identitytoolkit.googleapis.com/v1/accounts:resetPassword?key=k", json: ["oobCode": code, "newPassword": "a new password"])
                #expect(firebase.status == 400 && firebase.bodyText.contains("INVALID_OOB_CODE"), "\(firebase.bodyText)")
            }
            #expect(try await hashes() == before, "made-up codes hashed nothing")
            let reset = try await service.client.post("/v1/password-reset/confirm", json: ["code": mail.code, "newPassword": "a new password"])
            #expect(reset.status == 200, "\(reset.bodyText)")
            #expect(try await hashes() == before + 1)
        }
    }

    /// `tether dev` builds links from the request's Host only when it names this machine: a forged one would aim
    /// the link in someone else's mail at the forger's site (with real mail, under TETHER_MAIL_WEBHOOK_URL).
    @Test func aDevServerBuildsMailLinksOnlyFromALoopbackHost() async throws {
        try await DevService.run { service in
            _ = try await signUp(service, "host-ada@example.com")
            let before = try await service.totalEvents()
            // Four forged Hosts and a loopback one: five resets, the most an address is sent in a while.
            for host in ["evil.example:666", "localhost:1@evil.example", "127.0.0.1:80@evil.example", "[::1]:1@evil.example"] {
                let asked = try await service.client.send(
                    "POST", "/v1/password-reset", fields: [("Host", host), ("Content-Type", "application/json")],
                    body: Array(#"{"email":"host-ada@example.com"}"#.utf8))
                #expect(asked.status == 202)
            }
            #expect(try await service.mails(to: "host-ada@example.com").isEmpty)
            // No code is issued for a mail that could hold no link: issuing one would withdraw the user's earlier ones.
            #expect(try await service.totalEvents() == before)
            // Nor do those requests take from the address's allowance: the five of a window all go from here.
            for _ in 0..<EmailFlows.mailsPerAddress {
                let asked = try await service.client.send(
                    "POST", "/v1/password-reset", fields: [("Host", "localhost:4000"), ("Content-Type", "application/json")],
                    body: Array(#"{"email":"host-ada@example.com"}"#.utf8))
                #expect(asked.status == 202, "\(asked.bodyText)")
            }
            #expect(try await service.mails(to: "host-ada@example.com").count == EmailFlows.mailsPerAddress)
            #expect(try await service.lastMail(to: "host-ada@example.com").link.hasPrefix("http://localhost:4000/actions/reset-password?code="))
        }
    }

    @Test func knownAndUnknownAddressesGetTheSameAnswer() async throws {
        try await DevService.run { service in
            _ = try await signUp(service, "known@example.com")
            let known = try await service.client.post("/v1/password-reset", json: ["email": "known@example.com"])
            let unknown = try await service.client.post("/v1/password-reset", json: ["email": "unknown@example.com"])
            #expect(known.status == 202)
            #expect(unknown.status == known.status)
            #expect(unknown.bodyText == known.bodyText)
            #expect(unknown.headers["content-type"] == known.headers["content-type"])
            #expect(try await service.mails(to: "known@example.com").count == 1)
            #expect(try await service.mails(to: "unknown@example.com").isEmpty)
            // The limit counts an address whether or not anyone uses it: the sixth request of each is refused alike.
            for _ in 1..<EmailFlows.mailsPerAddress {
                #expect(try await service.client.post("/v1/password-reset", json: ["email": "known@example.com"]).status == 202)
                #expect(try await service.client.post("/v1/password-reset", json: ["email": "unknown@example.com"]).status == 202)
            }
            let knownLimited = try await service.client.post("/v1/password-reset", json: ["email": "known@example.com"])
            let unknownLimited = try await service.client.post("/v1/password-reset", json: ["email": "unknown@example.com"])
            #expect(knownLimited.status == 429)
            #expect(unknownLimited.status == 429)
            #expect(knownLimited.bodyText == unknownLimited.bodyText)
            #expect(knownLimited.headers["retry-after"] != nil)
            #expect(try await service.mails(to: "known@example.com").count == EmailFlows.mailsPerAddress)
        }
    }

    @Test func anExpiredCodeAndACodeOfAnotherPurposeAreRefused() async throws {
        try await DevService.run(settings: ["TETHER_PASSWORD_RESET_CODE_TTL": "2s"]) { service in
            let ada = try await signUp(service, "ada@example.com")
            #expect(try await service.client.post("/v1/users/me/email-verification", headers: bearer(ada), body: []).status == 202)
            let verify = try await service.lastMail(to: "ada@example.com")
            #expect(verify.template == "verify_email")
            #expect(verify.link.contains("/actions/verify-email?code="))
            let wrongPurpose = try await service.client.post("/v1/password-reset/confirm", json: ["code": verify.code, "newPassword": "a new password"])
            #expect(wrongPurpose.status == 401)
            #expect(wrongPurpose.bodyText.contains("not for this"))

            _ = try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"])
            let reset = try await service.lastMail(to: "ada@example.com")
            let resetAtVerify = try await service.client.post("/v1/email-verification/confirm", json: ["code": reset.code])
            #expect(resetAtVerify.status == 401)
            try await Task.sleep(for: .milliseconds(2200))
            for _ in 0..<2 {
                let expired = try await service.client.post("/v1/password-reset/confirm", json: ["code": reset.code, "newPassword": "a new password"])
                #expect(expired.status == 401)
                #expect(expired.bodyText.contains("expired"))
            }
            #expect(try await service.eventCount("EmailCodeExpired", userId: ada.user.id) == 1, "the expiry is recorded once")
            #expect(try await service.signIn(service.password("ada@example.com", "first password")).status == 200)

            let verified = try await service.client.post("/v1/email-verification/confirm", json: ["code": verify.code])
            #expect(verified.status == 200)
            let answered = try #require(try verified.decodeJSON([String: SignedIn.User].self)["user"])
            #expect(answered.emailVerified == true)
            // The password signs in with the proved address: its identity says so, in the answer and when read again.
            #expect(answered.identities.map(\.emailVerified) == [true], "\(verified.bodyText)")
            let read = try await service.client.get("/v1/users/me", headers: bearer(ada)).decodeJSON([String: SignedIn.User].self)["user"]
            #expect(read?.identities.map(\.emailVerified) == [true])
            let already = try await service.client.post("/v1/users/me/email-verification", headers: bearer(ada), body: [])
            #expect(already.status == 409)
            #expect(already.bodyText.contains("email_already_verified"))
        }
    }

    /// A code that a newer one replaced minutes after it was mailed is refused as replaced, not as expired
    /// (which would puzzle its holder); Firebase answers INVALID_OOB_CODE, as for a code it deleted.
    @Test func aReplacedCodeSaysItWasReplaced() async throws {
        try await DevService.run { service in
            _ = try await signUp(service, "ada@example.com")
            _ = try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"])
            let older = try await service.lastMail(to: "ada@example.com").code
            _ = try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"])
            // The newer code is issued and mailed after the answer: wait for its mail.
            #expect(try await service.lastMail(to: "ada@example.com").code != older)
            let replaced = try await service.client.post("/v1/password-reset/confirm", json: ["code": older, "newPassword": "a new password"])
            #expect(replaced.status == 401)
            #expect(replaced.bodyText.contains("replaced") && !replaced.bodyText.contains("expired"), "\(replaced.bodyText)")
            #expect(try await service.eventCount("EmailCodeRefused") == 1)
        }
    }

    @Test func aResetOfAnUnprovedAddressDropsCredentialsThatDoNotVouchForIt() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "ada@example.com")
            let apple = try await service.apple("apple-ada", email: "ada@example.com", verified: false)
            #expect(try await service.link(apple, to: ada.session.accessToken).status == 200)
            _ = try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"])
            let code = try await service.lastMail(to: "ada@example.com").code
            let reset = try await service.client.post("/v1/password-reset/confirm", json: ["code": code, "newPassword": "a new password"])
            #expect(reset.status == 200)
            let user = try #require(try reset.decodeJSON([String: SignedIn.User].self)["user"])
            #expect(user.emailVerified)
            #expect(user.identities.map(\.provider) == ["password"], "the Apple identity, which did not prove the address, is gone")
            let unlinked = try await service.admin.query("""
                SELECT data ->> 'reason' AS reason FROM events WHERE type = 'IdentityUnlinked' AND user_id = \(ada.user.id)::uuid
                """)
            #expect(try unlinked.map { try $0.decode("reason", as: String.self) } == ["password_reset"])

            // A user without a password gets one on their proved address.
            let bob = try await service.signedIn(try await service.apple("apple-bob", email: "bob@example.com", verified: true))
            _ = try await service.client.post("/v1/password-reset", json: ["email": "BOB@example.com"])
            let bobCode = try await service.lastMail(to: "bob@example.com").code
            let bobReset = try await service.client.post("/v1/password-reset/confirm", json: ["code": bobCode, "newPassword": "bob's password"])
            #expect(bobReset.status == 200)
            #expect(try bobReset.decodeJSON([String: SignedIn.User].self)["user"]?.identities.map(\.provider).sorted() == ["apple", "password"])
            let signedIn = try await service.signedIn(service.password("bob@example.com", "bob's password"))
            #expect(signedIn.user.id == bob.user.id)
        }
    }

    /// An address gets five mails an hour, counted when they go: a refused email change (the address is another
    /// account's) spent one, so a stranger's refused changes used up its owner's password resets; and verification
    /// mails were not counted against the address at all.
    @Test func mailsToAnAddressAreCountedWhenTheyGoAndEveryKindCounts() async throws {
        try await DevService.run { service in
            let owner = try await signUp(service, "owner@example.com")
            let stranger = try await signUp(service, "stranger@example.com")
            for attempt in 0..<10 {
                let refused = try await service.client.post("/v1/users/me/email", headers: bearer(stranger), json: ["email": "owner@example.com"])
                #expect(refused.status == 409, "attempt \(attempt): \(refused.bodyText)")
            }
            // Each answer tells whether the address has an account: the asker's own ten an hour still count them.
            let eleventh = try await service.client.post("/v1/users/me/email", headers: bearer(stranger), json: ["email": "owner@example.com"])
            #expect(eleventh.status == 429, "\(eleventh.bodyText)")
            #expect(try await service.client.post("/v1/password-reset", json: ["email": "owner@example.com"]).status == 202)
            #expect(try await service.mails(to: "owner@example.com").map(\.template) == ["password_reset"])
            for _ in 0..<4 {
                #expect(try await service.client.post("/v1/users/me/email-verification", headers: bearer(owner), body: []).status == 202)
            }
            let sixth = try await service.client.post("/v1/users/me/email-verification", headers: bearer(owner), body: [])
            #expect(sixth.status == 429, "the address's sixth mail of the hour: \(sixth.bodyText)")
            #expect(try await service.mails(to: "owner@example.com").count == 5)
        }
    }

    /// A request refused for what the account is (its address verified already, a change to its own address) sends
    /// nothing, and spends none of the address's mails: five such refusals used up the hour, and the owner's password
    /// reset was then 429 with one mail sent.
    @Test func aRefusedMailRequestSpendsNoneOfTheAddressesMails() async throws {
        try await DevService.run { service in
            let owner = try await signUp(service, "owner@example.com")
            try await service.verifyEmail("owner@example.com", accessToken: owner.session.accessToken)
            for _ in 0..<5 {
                let verified = try await service.client.post("/v1/users/me/email-verification", headers: bearer(owner), body: [])
                #expect(verified.status == 409 && verified.bodyText.contains("email_already_verified"), "\(verified.bodyText)")
                let same = try await service.client.post("/v1/users/me/email", headers: bearer(owner), json: ["email": "OWNER@example.com"])
                #expect(same.status == 400, "\(same.bodyText)")
            }
            #expect(try await service.client.post("/v1/password-reset", json: ["email": "owner@example.com"]).status == 202)
            #expect(try await service.mails(to: "owner@example.com").map(\.template) == ["verify_email", "password_reset"])
        }
    }

    /// A reset's revocation is dated when it is written, after the password's hash, not when the request came: tokens
    /// a session refreshed while the hash ran would otherwise be dated after it, and a backend checking `iat` against
    /// `validSince` (firebase-admin's check_revoked) would take them.
    @Test func aResetRevokesAsOfItsWriteNotItsRequest() async throws {
        try await DevService.run { service in
            _ = try await signUp(service, "dated@example.com")
            #expect(try await service.client.post("/v1/password-reset", json: ["email": "dated@example.com"]).status == 202)
            let code = try await service.lastMail(to: "dated@example.com").code
            let started = Date()
            // A request that came a minute ago (its context's time), whose hash and write happen now.
            let account = try await service.service.emailFlows.resetPassword(
                code: code, newPassword: "a new password 1", context: CommandContext(now: started.addingTimeInterval(-60)))
            let validSince = try #require(account.validSince)
            #expect(validSince >= started, "validSince \(validSince) is the request's time, before \(started)")
        }
    }

    @Test func anEmailChangeMovesTheAccountAndTheOldAddressCanUndoIt() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "ada@example.com")
            try await service.verifyEmail("ada@example.com", accessToken: ada.session.accessToken)
            // A reset mailed to the address before it moves away: it proves that address, and not after a move back.
            #expect(try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"]).status == 202)
            let earlierReset = try await service.lastMail(to: "ada@example.com")
            #expect(earlierReset.template == "password_reset")
            _ = try await signUp(service, "taken@example.com")
            let taken = try await service.client.post("/v1/users/me/email", headers: bearer(ada), json: ["email": "taken@example.com"])
            #expect(taken.status == 409)
            #expect(taken.bodyText.contains("email_already_in_use"))
            #expect(try await service.mails(to: "taken@example.com").isEmpty)

            // White space around the address is no part of it: the mail goes to, and the account moves to, the address itself.
            let asked = try await service.client.post("/v1/users/me/email", headers: bearer(ada), json: ["email": " ada@new.example "])
            #expect(asked.status == 202)
            #expect(try await service.me(ada.session.accessToken).bodyText.contains("ada@example.com"), "nothing moves before the new address confirms")
            let change = try await service.lastMail(to: "ada@new.example")
            #expect(change.template == "change_email")
            // Confirmed where the old address's notice could hold no link (a Host that is not this machine, under
            // tether dev): the address does not change unannounced, and the code is not spent.
            let unannounced = try await service.client.send(
                "POST", "/v1/email-verification/confirm", fields: [("Host", "elsewhere.example"), ("Content-Type", "application/json")],
                body: Array(#"{"code":"\#(change.code)"}"#.utf8))
            #expect(unannounced.status == 503, "\(unannounced.bodyText)")
            #expect(try await service.me(ada.session.accessToken).bodyText.contains("ada@example.com"))
            let moved = try await service.client.post("/v1/email-verification/confirm", json: ["code": change.code])
            #expect(moved.status == 200)
            let user = try #require(try moved.decodeJSON([String: SignedIn.User].self)["user"])
            #expect(user.email == "ada@new.example")
            #expect(user.emailVerified)
            #expect(try await service.me(ada.session.accessToken).status == 401, "a change ends every session")
            let afterChange = try await service.signedIn(service.password("ada@new.example", "first password"))
            #expect(try await service.signIn(service.password("ada@example.com", "first password")).status == 401)

            let notice = try await service.lastMail(to: "ada@example.com")
            #expect(notice.template == "email_changed")
            #expect(notice.link.contains("/actions/undo-email-change?code="))
            #expect(ISO8601Milliseconds.parse(notice.expiresAt)!.timeIntervalSinceNow > 2.9 * 86400)
            let undone = try await service.client.post("/v1/email-change/undo", json: ["code": notice.code])
            #expect(undone.status == 200)
            let back = try #require(try undone.decodeJSON([String: SignedIn.User].self)["user"])
            #expect(back.email == "ada@example.com")
            #expect(back.emailVerified, "the old address comes back as it was: proved")
            #expect(try await service.me(afterChange.session.accessToken).status == 401, "an undo signs everyone out")
            #expect(try await service.signIn(service.password("ada@example.com", "first password")).status == 200)
            #expect(try await service.client.post("/v1/email-change/undo", json: ["code": notice.code]).status == 401)
            let revived = try await service.client.post(
                "/v1/password-reset/confirm", json: ["code": earlierReset.code, "newPassword": "a password from an old mail"])
            #expect(revived.status == 401 && revived.bodyText.contains("replaced by a newer one or by a change"), "\(revived.bodyText)")
            #expect(try await service.signIn(service.password("ada@example.com", "first password")).status == 200)
        }
    }

    /// The holder of a mistyped address gets no hold on the account: a newer change withdraws the one before
    /// it, and an address nobody proved gets no notice of a change away from it, nor a way to undo it.
    @Test func onlyTheNewestChangeWorksAndAnUnprovedOldAddressCannotUndoIt() async throws {
        try await DevService.run { service in
            let tess = try await signUp(service, "tess@gmial.example")
            for address in ["tess-typo@exmaple.com", "tess@gmail.example"] {
                #expect(try await service.client.post("/v1/users/me/email", headers: bearer(tess), json: ["email": address]).status == 202)
            }
            let typo = try await service.client.post(
                "/v1/email-verification/confirm", json: ["code": try await service.lastMail(to: "tess-typo@exmaple.com").code])
            #expect(typo.status == 401)
            #expect(typo.bodyText.contains("replaced by a newer one"), "\(typo.bodyText)")
            let moved = try await service.client.post(
                "/v1/email-verification/confirm", json: ["code": try await service.lastMail(to: "tess@gmail.example").code])
            #expect(moved.status == 200)
            #expect(try moved.decodeJSON([String: SignedIn.User].self)["user"]?.email == "tess@gmail.example")
            // The address she signed up with was never proved: it hears nothing, and holds no undo.
            #expect(try await service.mails(to: "tess@gmial.example").isEmpty)
            #expect(try await service.me(tess.session.accessToken).status == 401, "a change ends every session")
        }
    }

    /// The email routes take an Idempotency-Key like every other change: a retry after a lost answer gets the
    /// first answer, sends no second mail (which would withdraw the first's code) and does not find its code spent.
    @Test func retriedEmailRequestsWithTheirKeyAreAnsweredOnce() async throws {
        try await DevService.run { service in
            _ = try await signUp(service, "ada@example.com")
            for _ in 0..<2 {
                let asked = try await service.client.post(
                    "/v1/password-reset", headers: ["Idempotency-Key": "reset-1"], json: ["email": "ada@example.com"])
                #expect(asked.status == 202)
            }
            #expect(try await service.mails(to: "ada@example.com").count == 1)
            let code = try await service.lastMail(to: "ada@example.com").code
            let confirm: JSONValue = ["code": .string(code), "newPassword": "a new password"]
            let reset = try await service.client.post("/v1/password-reset/confirm", headers: ["Idempotency-Key": "confirm-1"], json: confirm)
            let retried = try await service.client.post("/v1/password-reset/confirm", headers: ["Idempotency-Key": "confirm-1"], json: confirm)
            #expect(reset.status == 200)
            #expect(retried.status == 200 && retried.bodyText == reset.bodyText, "\(retried.bodyText)")
            #expect(try await service.eventCount("EmailCodeUsed") == 1)

            let signedIn = try await service.signedIn(service.password("ada@example.com", "a new password"))
            let change: JSONValue = ["email": "ada@new.example"]
            for _ in 0..<2 {
                let asked = try await service.client.post(
                    "/v1/users/me/email", headers: ["Authorization": "Bearer \(signedIn.session.accessToken)", "Idempotency-Key": "change-1"],
                    json: change)
                #expect(asked.status == 202)
            }
            #expect(try await service.mails(to: "ada@new.example").count == 1)
            let moved = try await service.lastMail(to: "ada@new.example").code
            // Confirmed by the signed-in client itself: the change ends every session, the caller's too, and the
            // retry with that session's token still gets the first answer.
            for _ in 0..<2 {
                let confirmed = try await service.client.post(
                    "/v1/email-verification/confirm",
                    headers: ["Authorization": "Bearer \(signedIn.session.accessToken)", "Idempotency-Key": "moved-1"], json: ["code": moved])
                #expect(confirmed.status == 200, "\(confirmed.bodyText)")
            }
            #expect(try await service.me(signedIn.session.accessToken).status == 401, "the change ended the session")
            #expect(try await service.signIn(service.password("ada@new.example", "a new password")).status == 200)
        }
    }

    @Test func anEmailChangeNeedsARecentSignInAndAValidAddress() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "ada@example.com")
            let stale = try await service.accessToken(ada.session.accessToken, signedInSecondsAgo: 600)
            let old = try await service.client.post("/v1/users/me/email", headers: ["Authorization": "Bearer \(stale)"], json: ["email": "a@new.example"])
            #expect(old.status == 401)
            #expect(old.bodyText.contains("recent_login_required"))
            let notEmail = try await service.client.post("/v1/users/me/email", headers: bearer(ada), json: ["email": "not an address"])
            #expect(notEmail.status == 400)
            let same = try await service.client.post("/v1/users/me/email", headers: bearer(ada), json: ["email": "ADA@example.com"])
            #expect(same.status == 400)
            #expect(try await service.mails().isEmpty)
            #expect(try await service.eventCount("EmailCodeIssued") == 0)
        }
    }

    @Test func badCodesAreClearAndChangeNothing() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "ada@example.com")
            let bob = try await signUp(service, "bob@example.com")
            for body in [#"{"code": "short"}"#, #"{"code": 12}"#, #"{"cod": "x"}"#, "{not json"] {
                let response = try await service.client.post("/v1/email-verification/confirm", body: Array(body.utf8))
                #expect(response.status == 400, "\(body)")
            }
            let malformedReset = try await service.client.post(
                "/v1/password-reset/confirm", json: ["code": String(repeating: "A", count: 53) + "!", "newPassword": "a new password"])
            #expect(malformedReset.status == 400)
            #expect(malformedReset.bodyText.contains("copy the whole link"))
            // A code that names no user, and one that names a user but matches none of their codes.
            let nobody = try await service.client.post("/v1/email-verification/confirm", json: ["code": EmailCodeFormat.make(for: UUID()).code])
            #expect(nobody.status == 401)
            let forged = EmailCodeFormat.make(for: UUID(uuidString: ada.user.id)!).code
            #expect(try await service.client.post("/v1/email-verification/confirm", json: ["code": forged]).status == 401)

            // Ada's code, presented by Bob while signed in, does nothing for either of them.
            #expect(try await service.client.post("/v1/users/me/email-verification", headers: bearer(ada), body: []).status == 202)
            let adaCode = try await service.lastMail(to: "ada@example.com").code
            // Each account that tries it is recorded once, however often it tries.
            let carol = try await signUp(service, "carol@example.com")
            for thief in [bob, bob, carol, bob, carol] {
                let stolen = try await service.client.post("/v1/email-verification/confirm", headers: bearer(thief), json: ["code": adaCode])
                #expect(stolen.status == 401)
            }
            #expect(try await service.me(ada.session.accessToken).bodyText.contains(#""emailVerified":false"#))
            #expect(try await service.me(bob.session.accessToken).bodyText.contains(#""emailVerified":false"#))
            let reasons = try await service.admin.query("""
                SELECT data ->> 'reason' AS reason, data ->> 'presentedBy' AS thief FROM events WHERE type = 'EmailCodeRefused' ORDER BY position
                """)
            #expect(try reasons.map { try $0.decode("reason", as: String.self) } == ["other_user", "other_user"], "made-up codes leave no trace")
            #expect(try reasons.map { try $0.decode("thief", as: String.self).lowercased() } == [bob.user.id, carol.user.id])
            #expect(try await service.eventCount("EmailVerified") == 0)
            // The code still works for its owner.
            #expect(try await service.client.post("/v1/email-verification/confirm", headers: bearer(ada), json: ["code": adaCode]).status == 200)
        }
    }

    @Test func aCodeUsedInParallelWinsExactlyOnce() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "ada@example.com")
            _ = try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"])
            let code = try await service.lastMail(to: "ada@example.com").code
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        try await service.withNewClient { client in
                            try await client.post("/v1/password-reset/confirm", json: ["code": code, "newPassword": "password number \(index)"]).status
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 == 401 }.count == 7)
            #expect(try await service.eventCount("EmailCodeUsed", userId: ada.user.id) == 1)
            #expect(try await service.eventCount("PasswordSet", userId: ada.user.id) == 2, "the sign-up's and the winner's")
        }
    }

    @Test func whenTheMailWebhookIsDownSignedInUsersAreToldAndStrangersAreNot() async throws {
        let receiver = try WebhookReceiver()
        let secret = "a mail webhook secret"
        try await DevService.run(settings: [
            "TETHER_MAIL_WEBHOOK_URL": receiver.url.absoluteString, "TETHER_MAIL_WEBHOOK_SECRET": secret,
            "TETHER_PUBLIC_URL": "https://auth.example.com",
        ], mail: TetherConfiguration(values: [
            "TETHER_MAIL_WEBHOOK_URL": receiver.url.absoluteString, "TETHER_MAIL_WEBHOOK_SECRET": secret,
            "TETHER_PUBLIC_URL": "https://auth.example.com",
        ]).mailSender()) { service in
            let ada = try await signUp(service, "ada@example.com")
            receiver.isUp = false
            let down = try await service.client.post("/v1/users/me/email-verification", headers: bearer(ada), body: [])
            #expect(down.status == 503)
            #expect(try down.decodeJSON(ProblemBody.self).code == "mail_unavailable")
            #expect(down.headers["retry-after"] != nil)
            let strangerKnown = try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"])
            let strangerUnknown = try await service.client.post("/v1/password-reset", json: ["email": "nobody@example.com"])
            #expect(strangerKnown.status == 202)
            #expect(strangerKnown.bodyText == strangerUnknown.bodyText, "a stranger cannot tell a failed mail from no account")
            #expect(try await service.eventCount("EmailCodeDeliveryFailed", userId: ada.user.id) == 2, "support staff see both")
            #expect(receiver.received.isEmpty)

            receiver.isUp = true
            #expect(try await service.client.post("/v1/users/me/email-verification", headers: bearer(ada), body: []).status == 202)
            let received = try #require(receiver.received.last)
            let members = try received.members()
            #expect(Set(members.keys) == ["to", "template", "locale", "link", "code", "expiresAt"])
            #expect(members["to"] == "ada@example.com")
            #expect(members["template"] == "verify_email")
            #expect(members["link"] == "https://auth.example.com/actions/verify-email?code=\(members["code"] ?? "")")
            // The signature covers the exact bytes: t=<seconds>,v1=<HMAC-SHA256(secret, "t." + body)>.
            let signature = try #require(received.headers["x-tether-signature"])
            let timestamp = try #require(Int(signature.split(separator: ",")[0].dropFirst(2)))
            #expect(signature == SignedWebhook.signature(of: received.body, secret: secret, timestamp: timestamp))
            #expect(received.headers["idempotency-key"] != nil)
            let verified = try await service.client.post("/v1/email-verification/confirm", json: ["code": members["code"] ?? ""])
            #expect(verified.status == 200, "the code that went through works")
        }
        await receiver.stop()
    }

    @Test func theHistoryTellsWhatBecameOfEachCodeAndTheLogKeepsNoCodeOrAddressInClear() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "ada@example.com")
            _ = try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"])
            let code = try await service.lastMail(to: "ada@example.com").code
            _ = try await service.client.post("/v1/email-verification/confirm", json: ["code": code])
            _ = try await service.client.post("/v1/password-reset/confirm", json: ["code": code, "newPassword": "a new password"])
            let page = try await UserHistory(database: service.admin).all(of: UUID(uuidString: ada.user.id)!)
            let lines = page.entries.filter { $0.type.hasPrefix("EmailCode") }.map(\.summary.text)
            #expect(lines.count == 3)
            #expect(lines.first?.hasPrefix("password_reset code ") == true)
            #expect(lines.first?.contains("mailed to ada@example.com, expires ") == true)
            #expect(lines.dropFirst().first?.hasSuffix("refused for verify_email (wrong_purpose)") == true)
            #expect(lines.last?.hasSuffix(" used") == true)

            let clear: Int = try await service.admin.query("""
                SELECT count(*)::int AS n FROM events WHERE type LIKE 'EmailCode%'
                  AND (data::text LIKE '%ada@example.com%' OR data ? 'codeHash' OR data -> 'personal' ? 'codeHash')
                """)[0].decode("n")
            #expect(clear == 0, "the code's hash and its address are sealed with the user's key")

            // Ten mails an hour per user, whatever the addresses: the eleventh is refused.
            let token = try await service.signedIn(service.password("ada@example.com", "a new password")).session.accessToken
            var statuses: [Int] = []
            for index in 0...EmailFlows.mailsPerUser {
                statuses.append(try await service.client.post(
                    "/v1/users/me/email", headers: ["Authorization": "Bearer \(token)"], json: ["email": "ada\(index)@elsewhere.example"]).status)
            }
            #expect(statuses == Array(repeating: 202, count: EmailFlows.mailsPerUser) + [429])
        }
    }

    @Test func anUndoWithdrawsEveryOtherPendingChangeAndAResetVoidsChangesAskedBeforeIt() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "ada@example.com")
            try await service.verifyEmail("ada@example.com", accessToken: ada.session.accessToken)
            // An intruder with a fresh session moves the account twice (signing in again under the new address, as
            // each change ends every session): ada@ gets the first undo, the intruder the second.
            var intruder = ada
            for address in ["intruder1@example.com", "intruder2@example.com"] {
                #expect(try await service.client.post("/v1/users/me/email", headers: bearer(intruder), json: ["email": address]).status == 202)
                let moved = try await service.client.post("/v1/email-verification/confirm", json: ["code": try await service.lastMail(to: address).code])
                #expect(moved.status == 200)
                intruder = try await service.signedIn(service.password(address, "first password"))
            }
            let adasUndo = try await service.lastMail(to: "ada@example.com")
            let intrudersUndo = try await service.lastMail(to: "intruder1@example.com")
            #expect(adasUndo.template == "email_changed" && intrudersUndo.template == "email_changed")
            let back = try await service.client.post("/v1/email-change/undo", json: ["code": adasUndo.code])
            #expect(back.status == 200)
            #expect(try back.decodeJSON([String: SignedIn.User].self)["user"]?.email == "ada@example.com")
            let stale = try await service.client.post("/v1/email-change/undo", json: ["code": intrudersUndo.code])
            #expect(stale.status == 401, "the intruder's undo was withdrawn by ada's")
            #expect(try await service.lastMail(to: "intruder1@example.com").code == intrudersUndo.code, "and nothing more went to the intruder")

            // A change asked for before a reset (which ends every session) no longer works after it.
            let bob = try await signUp(service, "bob@example.com")
            #expect(try await service.client.post("/v1/users/me/email", headers: bearer(bob), json: ["email": "thief@example.com"]).status == 202)
            let pending = try await service.lastMail(to: "thief@example.com").code
            _ = try await service.client.post("/v1/password-reset", json: ["email": "bob@example.com"])
            let reset = try await service.client.post(
                "/v1/password-reset/confirm", json: ["code": try await service.lastMail(to: "bob@example.com").code, "newPassword": "bob's new password"])
            #expect(reset.status == 200)
            let refused = try await service.client.post("/v1/email-verification/confirm", json: ["code": pending])
            #expect(refused.status == 401)
            #expect(refused.bodyText.contains("before every session was ended"))
            #expect(try await service.signIn(service.password("bob@example.com", "bob's new password")).status == 200)
        }
    }

    /// An intruder who moved the account away reset its password through the new address, linked their own Google
    /// and enrolled a factor. The owner's undo took the address back and signed everyone out, but kept all three:
    /// the intruder's Google signed in again, past the owner's own reset too (the address stays proved). What was
    /// added since the change now goes with the undo; the owner resets the password through their own address.
    @Test func anUndoneChangeTakesBackTheWaysInAddedSinceIt() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "ada@example.com")
            try await service.verifyEmail("ada@example.com", accessToken: ada.session.accessToken)
            let userId = try #require(UUID(uuidString: ada.user.id))
            #expect(try await service.link(try await service.apple("apple-ada-own"), to: ada.session.accessToken).status == 200, "before the change")

            // The intruder, holding ada's session, asks to move the account, links their Google while the mail is on
            // its way, moves it, resets its password there and enrols a factor.
            #expect(try await service.client.post("/v1/users/me/email", headers: bearer(ada), json: ["email": "thief@example.com"]).status == 202)
            #expect(try await service.link(try await service.google("google-thief", email: "thief@gmail.com"), to: ada.session.accessToken).status == 200)
            let moved = try await service.client.post("/v1/email-verification/confirm", json: ["code": try await service.lastMail(to: "thief@example.com").code])
            #expect(moved.status == 200)
            #expect(try await service.client.post("/v1/password-reset", json: ["email": "thief@example.com"]).status == 202)
            let reset = try await service.client.post(
                "/v1/password-reset/confirm", json: ["code": try await service.lastMail(to: "thief@example.com").code, "newPassword": "the thief's password"])
            #expect(reset.status == 200, "\(reset.bodyText)")
            let thief = try await service.signedIn(service.password("thief@example.com", "the thief's password"))
            try await service.enrolTOTP(accessToken: thief.session.accessToken)

            let undone = try await service.client.post("/v1/email-change/undo", json: ["code": try await service.lastMail(to: "ada@example.com").code])
            #expect(undone.status == 200, "\(undone.bodyText)")
            let account = try await service.service.accounts.read(userId)
            #expect(account.email == "ada@example.com" && account.isEmailVerified)
            #expect(account.identities.keys.sorted() == ["apple"], "ada's Apple id stays; the thief's Google and password go: \(account.identities.keys)")
            #expect(account.mfa.factors.isEmpty)
            // The undo's events: the password goes once, from the thief's address, and is not moved back to ada's first.
            let events = try await PostgresEventStore(client: service.admin).readStream(.user(userId), after: 0)
            let undo = try #require(events.lastIndex { $0.type == "EmailCodeUsed" })
            #expect(events[undo...].map(\.type).filter { $0.hasPrefix("Identity") } == ["IdentityUnlinked", "IdentityUnlinked"], "google and password")

            // The thief's ways in lead nowhere; ada's own does, and her reset gives her a password again.
            let google = try await service.signIn(try await service.google("google-thief", email: "thief@gmail.com"))
            #expect(try google.decodeJSON(SignedIn.self).user.id != ada.user.id, "a new user, not ada's account")
            #expect(try await service.signIn(service.password("ada@example.com", "the thief's password")).status == 401)
            #expect(try await service.signIn(service.password("thief@example.com", "the thief's password")).status == 401)
            #expect(try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"]).status == 202)
            let own = try await service.client.post(
                "/v1/password-reset/confirm", json: ["code": try await service.lastMail(to: "ada@example.com").code, "newPassword": "ada's own password"])
            #expect(own.status == 200, "\(own.bodyText)")
            let back = try await service.signIn(service.password("ada@example.com", "ada's own password"))
            #expect(back.status == 200, "\(back.bodyText)")
            #expect(try back.decodeJSON(SignedIn.self).user.id == ada.user.id)
        }
    }

    @Test func aResetOfAnUnprovedAddressKeepsOnlyIdentitiesThatProvedThatAddress() async throws {
        try await DevService.run { service in
            let squatter = try await signUp(service, "victim@example.com")
            // The squatter's Google account is verified, but for the squatter's own address.
            let google = try await service.google("google-squatter", email: "squatter@gmail.com", verified: true)
            #expect(try await service.link(google, to: squatter.session.accessToken).status == 200)
            // No factor on an address nobody proved (V1MFATests); one enrolled before that rule goes with the reset
            // (UserAccountMFATests.aResetOfAnUnprovedAddressDropsTheFactorsOnIt).
            let enrolled = try await service.client.post(
                "/v1/users/me/mfa/totp", headers: bearer(squatter), json: ["displayName": "squatter's phone"])
            #expect(enrolled.status == 403 && enrolled.bodyText.contains("email_not_verified"), "\(enrolled.bodyText)")
            _ = try await service.client.post("/v1/password-reset", json: ["email": "victim@example.com"])
            let reset = try await service.client.post(
                "/v1/password-reset/confirm", json: ["code": try await service.lastMail(to: "victim@example.com").code, "newPassword": "the victim's password"])
            #expect(reset.status == 200)
            let user = try #require(try reset.decodeJSON([String: SignedIn.User].self)["user"])
            #expect(user.identities.map(\.provider) == ["password"], "the Google identity proved another address")
            let again = try await service.signedIn(try await service.google("google-squatter", email: "squatter@gmail.com"))
            #expect(again.user.id != squatter.user.id, "that Google account now signs in as another user, never this one")
            let signedIn = try await service.signedIn(service.password("victim@example.com", "the victim's password"))
            #expect(signedIn.user.id == squatter.user.id, "no second factor stands in the owner's way")
        }
    }
}
