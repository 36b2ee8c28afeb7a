import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherJOSE
import TetherProviders
import TetherTesting

/// The cases a review of the Parse surface found: each would have leaked, half-written or answered wrongly.
@Suite("Parse surface: hardening")
struct ParseHardeningTests {
    @Test func aLogInByQueryIsNeverAnsweredWithAnotherRequestsAnswer() async throws {
        try await ParseApp.run { parse in
            _ = try await parse.send("POST", "/users", json: .object(["username": "eve@example.com", "password": "eve's password"]))
            let requestId = UUID().uuidString
            let right = try await parse.send("POST", "/login?username=eve%40example.com&password=eve%27s%20password", .init(requestId: requestId))
            #expect(right.status == 200)
            let wrong = try await parse.send("POST", "/login?username=eve%40example.com&password=guess", .init(requestId: requestId))
            #expect(wrong.status == 404, "a different query is a different request, whatever its id")
            #expect(wrong.body["sessionToken"] == nil)
        }
    }

    @Test func aPasswordUsersPublicReadHidesTheirEmailEvenAsUsername() async throws {
        try await ParseApp.run { parse in
            let frank = try await parse.send("POST", "/users", json: .object(["username": "frank@example.com", "password": "frank's password"]))
            let objectId = try #require(frank.string("objectId"))
            let seen = try await parse.send("GET", "/users/\(objectId)")
            #expect(seen.status == 200)
            #expect(!seen.text.contains("frank@example.com"))
            #expect(Set(seen.body.keys) == ["objectId", "createdAt", "updatedAt"])
            // The owner still reads it.
            #expect(try await parse.send("GET", "/users/\(objectId)", .init(session: frank.string("sessionToken"))).string("username")
                    == "frank@example.com")
        }
    }

    /// A returning user's log-in whose other identity claims an address another account holds is 203 before the
    /// sign-in, not after it: no session is opened that the answer never hands over.
    @Test func aLogInsOtherIdentityOnAnotherAccountsAddressOpensNoSession() async throws {
        try await ParseApp.run { parse in
            let returning = try await parse.app.signedIn(try await parse.app.apple("apple-moved", email: "taken@example.com"))
            let userId = try #require(UUID(uuidString: returning.user.id))
            try await parse.app.service.accounts.changeEmail(userId: userId, to: "moved@example.com", verified: true, context: CommandContext())
            _ = try await parse.app.signedIn(try await parse.app.google("google-holder", email: "taken@example.com"))
            let before = try await parse.accountEvents()
            let answer = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-moved", "token": try await parse.appleToken("apple-moved", email: "taken@example.com")]),
                "google": ParseApp.strings(["id": "google-other", "id_token": try await parse.googleToken("google-other", email: "taken@example.com")]),
            ])]))
            #expect(answer.code == 203, "\(answer.text)")
            #expect(try await parse.accountEvents() == before, "no session, nothing written")
        }
    }

    /// The answers kept for retries of `X-Parse-Request-Id` show the user (their email): they go when the user is
    /// erased, as /v1's do, instead of staying their day.
    @Test func theAnswersKeptForRetriesGoWithTheirUsersErasure() async throws {
        try await ParseApp.run { parse in
            let signUp = try await parse.send(
                "POST", "/users", .init(requestId: UUID().uuidString), json: .object(["username": "kept@example.com", "password": "kept password 1"]))
            #expect(signUp.status == 201, "\(signUp.text)")
            let logIn = try await parse.send(
                "POST", "/login", .init(requestId: UUID().uuidString), json: .object(["username": "kept@example.com", "password": "kept password 1"]))
            #expect(logIn.status == 200, "\(logIn.text)")
            func kept() async throws -> Int {
                try await parse.app.admin.query("SELECT count(*)::int AS n FROM idempotent_responses WHERE status IS NOT NULL")[0].decode("n")
            }
            #expect(try await kept() == 2)
            let userId: UUID = try await parse.app.admin.query("SELECT id FROM users ORDER BY created_at DESC LIMIT 1")[0].decode("id")
            try await parse.app.service.accounts.erase(userId: userId, reason: "test", context: CommandContext())
            #expect(try await kept() == 0)
        }
    }

    @Test func theEchoedMFAStatusIsANoOpAndARetriedPasswordChangeGetsItsFirstAnswer() async throws {
        try await ParseApp.run { parse in
            let signUp = try await parse.send("POST", "/users", json: .object(["username": "gus@example.com", "password": "gus's password"]))
            let objectId = try #require(signUp.string("objectId"))
            try await parse.proveEmail(objectId: objectId)
            let token = try #require(signUp.string("sessionToken"))
            let secret = Base32.encode(TOTP.generateSecret())
            let totp = try TOTP(secret: try Base32.decode(secret))
            #expect(try await parse.send("PUT", "/users/\(objectId)", .init(session: token), json: .object([
                "authData": .object(["mfa": ParseApp.strings(["secret": secret, "token": totp.code(at: Date())])]),
            ])).status == 200)
            let events = try await parse.accountEvents()
            let echo = try await parse.send("PUT", "/users/\(objectId)", .init(session: token), json: .object([
                "authData": .object(["mfa": ParseApp.strings(["status": "enabled"])]),
            ]))
            #expect(echo.status == 200, "\(echo.text)")
            #expect(try await parse.accountEvents() == events)

            let requestId = UUID().uuidString
            let change: JSONValue = .object(["password": "gus's new password"])
            let first = try await parse.send("PUT", "/users/\(objectId)", .init(session: token, requestId: requestId), json: change)
            #expect(first.status == 200)
            let newToken = try #require(first.string("sessionToken"))
            // The SDK retries a lost answer with the old token, which the change ended.
            let retry = try await parse.send("PUT", "/users/\(objectId)", .init(session: token, requestId: requestId), json: change)
            #expect(retry.status == 200)
            #expect(retry.string("sessionToken") == newToken)
            #expect(try await parse.send("GET", "/users/me", .init(session: newToken)).status == 200)
            // Without the id the old token is dead.
            #expect(try await parse.send("PUT", "/users/\(objectId)", .init(session: token), json: change).code == 209)
        }
    }

    @Test func applesRefusalsAreWordedAsParseServerWordsThem() async throws {
        try await ParseApp.run { parse in
            let now = Date().timeIntervalSince1970
            func token(_ extra: [String: JSONValue]) async throws -> String {
                try parse.app.token("identityToken", of: try await parse.app.apple("apple-words", extra: extra))
            }
            let expired = try await parse.logIn("apple", ["id": "apple-words", "token": try await token(["iat": .double(now - 7200), "exp": .double(now - 3600)])])
            #expect(expired.text == #"{"code":101,"error":"jwt expired"}"#)
            let issuer = try await parse.logIn("apple", ["id": "apple-words", "token": try await token(["iss": "https://evil.example"])])
            #expect(issuer.text == #"{"code":101,"error":"id token not issued by correct OpenID provider - expected: https://appleid.apple.com | from: https://evil.example"}"#)
            let good = try await token([:])
            let parts = good.split(separator: ".")
            let header = Base64URL.encode(Array(#"{"alg":"RS256","kid":"no-such-key"}"#.utf8))
            let unknown = try await parse.logIn("apple", ["id": "apple-words", "token": "\(header).\(parts[1]).\(parts[2])"])
            #expect(unknown.text == #"{"code":101,"error":"Unable to find matching key for Key ID: no-such-key"}"#)
        }
    }

    @Test func aRefusedPutOrImplicitLinkWritesNothing() async throws {
        try await ParseApp.run { parse in
            let user = try await parse.anonymousLogIn()
            let objectId = try #require(user.string("objectId"))
            let session = try #require(user.string("sessionToken"))
            let before = try await parse.accountEvents()
            // A new Facebook identity with a password too short: nothing is linked.
            let weak = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "username": "hal@example.com", "password": "short",
                "authData": .object(["facebook": ParseApp.strings(["id": "fb-hal", "access_token": try await parse.facebookToken("fb-hal")])]),
            ]))
            #expect(weak.code == 142, "\(weak.text)")
            let badType = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "username": .int(5),
                "authData": .object(["facebook": ParseApp.strings(["id": "fb-hal", "access_token": try await parse.facebookToken("fb-hal")])]),
            ]))
            #expect(badType.code == 107)
            let otherEmail = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "username": "hal@example.com", "email": "someone-else@example.com", "password": "a long enough password",
            ]))
            #expect(otherEmail.code == 125)
            #expect(try await parse.accountEvents() == before)

            // An implicit link whose email another account holds: 203 before any user is made.
            _ = try await parse.send("POST", "/users", json: .object(["username": "ivy@example.com", "password": "ivy's password"]))
            let users = try await parse.app.eventCount("UserRegistered")
            let both = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-ivy", "token": try await parse.appleToken("apple-ivy")]),
                "facebook": ParseApp.strings(["id": "fb-ivy", "access_token": try await parse.facebookToken("fb-ivy", email: "ivy@example.com")]),
            ])]))
            #expect(both.text == #"{"code":203,"error":"Account already exists for this email address."}"#)
            #expect(try await parse.app.eventCount("UserRegistered") == users)
        }
    }

    @Test func controlCharactersInAnEmailAreAClientMistakeNotAServerFault() async throws {
        try await ParseApp.run { parse in
            let signUp = try await parse.send("POST", "/users", json: .object(["username": "nul\u{0}@example.com", "password": "a long password"]))
            #expect(signUp.code == 125)
            let login = try await parse.send("POST", "/login", json: .object(["username": "nul\u{0}@example.com", "password": "a long password"]))
            #expect(login.code == 101)
            let v1 = try await parse.app.signIn(parse.app.password("nul\u{0}@example.com", "a long password"))
            #expect(v1.status == 400)
        }
    }

    /// A provider's user id is the key of the identities' unique index, which holds rows of about 2.7 KB:
    /// a longer id (an anonymous id the client picks, or a signed token's `sub`) was a 500 after the index
    /// refused it. It is refused as a credential, on every surface, before anything is written.
    @Test func aProvidersUserIdLongerThanTheLimitIsARefusedCredentialNotAServerFault() async throws {
        try await ParseApp.run { parse in
            let longest = String(repeating: "a", count: ExternalIdentity.maximumUIDLength)
            #expect(try await parse.anonymousLogIn(id: longest).status == 201, "the longest id is taken")
            let events = try await parse.accountEvents()
            let anonymous = try await parse.anonymousLogIn(id: String(repeating: "y", count: 3_000))
            #expect(anonymous.status == 404 && anonymous.code == 101, "\(anonymous.text)")
            let sub = String(repeating: "s", count: ExternalIdentity.maximumUIDLength + 1)
            let apple = try await parse.logIn("apple", ["id": sub, "token": try await parse.appleToken(sub)])
            #expect(apple.status == 404 && apple.code == 101, "\(apple.text)")
            let v1 = try await parse.app.signIn(try await parse.app.apple(sub))
            #expect(v1.status == 401, "\(v1.bodyText)")
            // The email and the names are keys of indexes too.
            let domain = "@example.com"
            let longestEmail = String(repeating: "e", count: ExternalIdentity.maximumEmailLength - domain.utf8.count) + domain
            #expect(try await parse.app.signIn(try await parse.app.apple("apple-longest-email", email: longestEmail)).status == 201)
            let events2 = try await parse.accountEvents()
            let email = try await parse.app.signIn(try await parse.app.apple("apple-long-email", email: "e" + longestEmail))
            #expect(email.status == 401 && email.bodyText.contains("malformed"), "\(email.bodyText)")
            var named = try await parse.app.apple("apple-long-name")
            named.credential = .object([
                "identityToken": named.credential["identityToken"] ?? .null,
                "fullName": .object(["givenName": .string(String(repeating: "g", count: ExternalIdentity.maximumNameLength + 1))]),
            ])
            let name = try await parse.app.signIn(named)
            #expect(name.status == 401 && name.bodyText.contains("malformed"), "\(name.bodyText)")
            #expect(try await parse.accountEvents() == events2)
            #expect(events2 > events)
        }
    }

    /// A reset link outlived the password it was meant to replace: an older mail (leaked, or found later)
    /// still set a password after a newer link had, or after the user changed it. Parse keeps one reset
    /// token and drops it on any password change; Tether withdraws every pending reset code likewise.
    @Test func onlyTheNewestResetLinkWorksAndAPasswordChangeVoidsEveryPendingOne() async throws {
        try await ParseApp.run { parse in
            let email = "rst@example.com"
            #expect(try await parse.send("POST", "/users", json: .object(["username": .string(email), "password": "original password"])).status == 201)
            func resetCode() async throws -> String {
                let asked = try await parse.send("POST", "/requestPasswordReset", json: .object(["email": .string(email)]))
                #expect(asked.status == 200, "\(asked.text)")
                return try await parse.app.lastMail(to: email).code
            }
            func confirm(_ code: String, _ password: String) async throws -> Int {
                try await parse.app.client.post("/v1/password-reset/confirm", json: ["code": code, "newPassword": password]).status
            }
            func logIn(_ password: String) async throws -> ParseAnswer {
                try await parse.send("POST", "/login", json: .object(["username": .string(email), "password": .string(password)]))
            }
            let older = try await resetCode()
            let newer = try await resetCode()
            #expect(older != newer)
            #expect(try await confirm(older, "older link's password") != 200, "a newer link supersedes it")
            #expect(try await confirm(newer, "newer link's password") == 200)
            #expect(try await logIn("newer link's password").status == 200)
            #expect(try await logIn("older link's password").code == 101)

            // A link mailed before the user changed the password cannot set another after it.
            let pending = try await resetCode()
            let session = try #require(try await logIn("newer link's password").string("sessionToken"))
            let objectId = try #require(try await parse.send("GET", "/users/me", .init(session: session)).string("objectId"))
            let changed = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object(["password": "changed by the user"]))
            #expect(changed.status == 200, "\(changed.text)")
            #expect(try await confirm(pending, "pending link's password") != 200)
            #expect(try await logIn("changed by the user").status == 200)
            #expect(try await logIn("pending link's password").code == 101)
        }
    }

    /// A sign-up's `username` and `password` beside its `authData` were dropped: 201 for a user with a random
    /// username who could not log in with them. Parse saves them on the new user; Tether adds the password
    /// (keyed by the username, an email, as a password sign-up is), and refuses what it cannot keep before
    /// anything is written.
    @Test func aUsernameAndPasswordBesideAuthDataAreKeptOrRefusedNeverDropped() async throws {
        try await ParseApp.run { parse in
            func signUp(_ fields: [String: JSONValue], apple sub: String) async throws -> ParseAnswer {
                var body = fields
                body["authData"] = .object(["apple": ParseApp.strings(["id": sub, "token": try await parse.appleToken(sub)])])
                return try await parse.send("POST", "/users", json: .object(body))
            }
            func logIn(_ username: String, _ password: String) async throws -> ParseAnswer {
                try await parse.send("POST", "/login", json: .object(["username": .string(username), "password": .string(password)]))
            }
            let created = try await signUp(["username": "combo@example.com", "password": "abcdefgh12"], apple: "apple-combo")
            #expect(created.status == 201, "\(created.text)")
            #expect(created.string("username") == "combo@example.com")
            let objectId = try #require(created.string("objectId"))
            let byPassword = try await logIn("combo@example.com", "abcdefgh12")
            #expect(byPassword.status == 200, "\(byPassword.text)")
            #expect(byPassword.string("objectId") == objectId)
            #expect(try await parse.logIn("apple", ["id": "apple-combo", "token": try await parse.appleToken("apple-combo")])
                .string("objectId") == objectId)

            // A log-in of a user without a password adds it too; one with a password changes it with a PUT.
            let plain = try await parse.logIn("apple", ["id": "apple-plain", "token": try await parse.appleToken("apple-plain")])
            let added = try await signUp(["username": "plain@example.com", "password": "plain's password"], apple: "apple-plain")
            #expect(added.status == 200, "\(added.text)")
            #expect(added.string("objectId") == plain.string("objectId"))
            #expect(try await logIn("plain@example.com", "plain's password").string("objectId") == plain.string("objectId"))

            _ = try await parse.logIn("apple", ["id": "apple-taken", "token": try await parse.appleToken("apple-taken", email: "taken@example.com")])
            let users = try await parse.app.eventCount("UserRegistered")
            let events = try await parse.accountEvents()
            let notAnEmail = try await signUp(["username": "mycoolname", "password": "abcdefgh12"], apple: "apple-new")
            #expect(notAnEmail.code == 125, "\(notAnEmail.text)")
            let usernameAlone = try await signUp(["username": "mycoolname"], apple: "apple-new")
            #expect(usernameAlone.code == 119, "\(usernameAlone.text)")
            let emailAlone = try await signUp(["email": "mine@example.com"], apple: "apple-new")
            #expect(emailAlone.code == 119, "\(emailAlone.text)")
            let weak = try await signUp(["username": "new@example.com", "password": "short"], apple: "apple-new")
            #expect(weak.code == 142, "\(weak.text)")
            let username = try await signUp(["username": "combo@example.com", "password": "abcdefgh12"], apple: "apple-new")
            #expect(username.text == #"{"code":202,"error":"Account already exists for this username."}"#)
            let email = try await signUp(["username": "taken@example.com", "password": "abcdefgh12"], apple: "apple-new")
            #expect(email.text == #"{"code":203,"error":"Account already exists for this email address."}"#)
            let again = try await signUp(["username": "combo@example.com", "password": "another password"], apple: "apple-combo")
            #expect(again.code == 119, "\(again.text)")
            #expect(try await parse.app.eventCount("UserRegistered") == users)
            #expect(try await parse.accountEvents() == events)
            #expect(try await logIn("combo@example.com", "another password").code == 101)
        }
    }
}
