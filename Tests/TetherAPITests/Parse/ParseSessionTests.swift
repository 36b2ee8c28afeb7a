import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherTesting

/// Parse sessions, password users and the reads of the Parse surface.
@Suite("Parse surface: sessions, passwords and reads")
struct ParseSessionTests {
    @Test func sessionsMeDescribesTheSessionAndAnInstallationKeepsOneSession() async throws {
        try await ParseApp.run { parse in
            let id = UUID().uuidString.lowercased()
            let first = try await parse.anonymousLogIn(id: id, .init(installation: "install-a"))
            let firstToken = try #require(first.string("sessionToken"))
            let required = try await parse.send("GET", "/sessions/me")
            #expect(required.text == #"{"code":209,"error":"Session token required."}"#)
            let unknown = try await parse.send("GET", "/sessions/me", .init(session: "r:" + String(repeating: "0", count: 32)))
            #expect(unknown.text == #"{"code":209,"error":"Session token not found."}"#)

            let session = try await parse.send("GET", "/sessions/me", .init(session: firstToken))
            #expect(session.status == 200)
            #expect(session.string("sessionToken") == firstToken)
            #expect(session.string("installationId") == "install-a")
            #expect(session.body["createdWith"] == .object(["action": "login", "authProvider": "anonymous"]))
            #expect(session.body["user"] == .object(["__type": "Pointer", "className": "_User", "objectId": .string(first.string("objectId")!)]))
            #expect(ParseWire.isObjectId(session.string("objectId")))
            guard case .object(let expiresAt)? = session.body["expiresAt"], case .string(let iso)? = expiresAt["iso"] else {
                Issue.record("no expiresAt: \(session.text)"); return
            }
            #expect(expiresAt["__type"] == "Date" && ParseWire.isDate(iso))
            let year = try #require(ISO8601Milliseconds.parse(iso)).timeIntervalSinceNow
            #expect(abs(year - 365 * 86400) < 120)

            // The same anonymous id logs in again from the same installation: the earlier session ends.
            let again = try await parse.anonymousLogIn(id: id, .init(installation: "install-a"))
            #expect(again.status == 200)
            #expect(again.string("objectId") == first.string("objectId"))
            #expect(try await parse.send("GET", "/users/me", .init(session: firstToken)).code == 209)
            let secondToken = try #require(again.string("sessionToken"))
            #expect(try await parse.send("GET", "/users/me", .init(session: secondToken)).status == 200)
            // Another installation keeps its own.
            let other = try await parse.anonymousLogIn(id: id, .init(installation: "install-b"))
            #expect(try await parse.send("GET", "/users/me", .init(session: secondToken)).status == 200)
            #expect(try await parse.send("GET", "/users/me", .init(session: other.string("sessionToken"))).status == 200)
            let reasons = try await parse.app.admin.query("SELECT data->>'reason' AS reason FROM events WHERE type = 'SessionEnded'")
            #expect(try reasons.map { try $0.decode("reason", as: String.self) } == ["replaced"])
        }
    }

    /// An installation id identifies a person's device: it was kept in clear in the log and in `sessions`, where
    /// erasing the user left it (and a replay wrote it back). It is sealed with the user's key now.
    @Test func anInstallationIdIsSealedAndGoesWithTheErasure() async throws {
        try await ParseApp.run { parse in
            let signedUp = try await parse.send(
                "POST", "/users", .init(installation: "device-needle-1"), json: .object(["username": "ina@example.com", "password": "a long password"]))
            #expect(signedUp.status == 201, "\(signedUp.text)")
            let token = try #require(signedUp.string("sessionToken"))
            #expect(try await parse.send("GET", "/sessions/me", .init(session: token)).string("installationId") == "device-needle-1")
            func inClear() async throws -> Int {
                try await parse.app.admin.query("SELECT count(*)::int AS n FROM events WHERE strpos(data::text || metadata::text, 'device-needle') > 0")[0]
                    .decode("n")
            }
            #expect(try await inClear() == 0, "sealed in the log")
            let columns = try await parse.app.admin.query(
                "SELECT 1 FROM information_schema.columns WHERE table_name = 'sessions' AND column_name = 'installation_id'")
            #expect(columns.isEmpty, "no copy in the read models")

            let admin = try await AdminKeyStore(database: parse.app.admin).create(
                role: .admin, name: "erase", metadata: EventMetadata(actor: .operator("t"), surface: "cli")).secret
            let userId = try #require(try await parse.app.admin.query("SELECT id FROM users").first?.decode("id", as: UUID.self))
            let erased = try await parse.app.client.send(
                "DELETE", "/v1/admin/users/\(userId)", fields: [("Authorization", "Bearer \(admin)"), ("Content-Type", "application/json")],
                body: Array(#"{"reason": "asked"}"#.utf8))
            #expect(erased.status == 200)
            let export = try await parse.app.client.get("/v1/admin/users/\(userId)/export", headers: ["Authorization": "Bearer \(admin)"])
            #expect(export.status == 200 && !export.bodyText.contains("device-needle"), "\(export.bodyText)")
        }
    }

    @Test func passwordSignUpLogInAndThePasswordErrors() async throws {
        try await ParseApp.run { parse in
            let signUp = try await parse.send("POST", "/users", json: .object(["username": "ada@example.com", "password": "analytical engine"]))
            #expect(signUp.status == 201, "\(signUp.text)")
            #expect(signUp.string("username") == "ada@example.com")
            let session = try await parse.send("GET", "/sessions/me", .init(session: signUp.string("sessionToken")))
            #expect(session.body["createdWith"] == .object(["action": "signup", "authProvider": "password"]))

            let login = try await parse.send("POST", "/login", json: .object(["username": "ada@example.com", "password": "analytical engine"]))
            #expect(login.status == 200)
            #expect(login.string("objectId") == signUp.string("objectId"))
            #expect(login.string("email") == "ada@example.com")
            #expect(login.body["emailVerified"] == .bool(false))
            #expect(login.body["authData"] == nil)
            #expect(ParseWire.isSessionToken(login.string("sessionToken")))
            let byQuery = try await parse.send("GET", "/login?username=ada%40example.com&password=analytical%20engine")
            #expect(byQuery.status == 200)

            let wrong = try await parse.send("POST", "/login", json: .object(["username": "ada@example.com", "password": "difference engine"]))
            #expect(wrong.status == 404)
            #expect(wrong.text == #"{"code":101,"error":"Invalid username/password."}"#)
            let nobody = try await parse.send("POST", "/login", json: .object(["username": "nobody@example.com", "password": "difference engine"]))
            #expect(nobody.text == wrong.text)
            let notAnEmail = try await parse.send("POST", "/login", json: .object(["username": "ada", "password": "difference engine"]))
            #expect(notAnEmail.text == wrong.text)
            #expect(try await parse.send("POST", "/login", json: .object(["password": "x"])).text
                    == #"{"code":200,"error":"username/email is required."}"#)
            #expect(try await parse.send("POST", "/login", json: .object(["username": "ada@example.com"])).text
                    == #"{"code":201,"error":"password is required."}"#)
            let taken = try await parse.send("POST", "/users", json: .object(["username": "ada@example.com", "password": "another engine"]))
            #expect(taken.code == 202)
            let plainUsername = try await parse.send("POST", "/users", json: .object(["username": "ada", "password": "analytical engine"]))
            #expect(plainUsername.code == 125)
            #expect(try await parse.app.eventCount("UserRegistered") == 1)
        }
    }

    @Test func aPasswordChangeEndsEverySessionAndAnswersANewToken() async throws {
        try await ParseApp.run { parse in
            let signUp = try await parse.send("POST", "/users", json: .object(["username": "bob@example.com", "password": "first password"]))
            let objectId = try #require(signUp.string("objectId"))
            let first = try #require(signUp.string("sessionToken"))
            let second = try #require(try await parse.send("POST", "/login", json: .object([
                "username": "bob@example.com", "password": "first password",
            ])).string("sessionToken"))
            let changed = try await parse.send("PUT", "/users/\(objectId)", .init(session: first), json: .object(["password": "second password"]))
            #expect(changed.status == 200, "\(changed.text)")
            #expect(Set(changed.body.keys) == ["updatedAt", "sessionToken"])
            let next = try #require(changed.string("sessionToken"))
            for old in [first, second] {
                #expect(try await parse.send("GET", "/users/me", .init(session: old)).code == 209)
            }
            #expect(try await parse.send("GET", "/users/me", .init(session: next)).status == 200)
            #expect(try await parse.send("POST", "/login", json: .object(["username": "bob@example.com", "password": "first password"])).code == 101)
            #expect(try await parse.send("POST", "/login", json: .object(["username": "bob@example.com", "password": "second password"])).status == 200)
        }
    }

    @Test func anAnonymousUserSignsUpWithAUsernameAndPasswordKeepingItsObjectId() async throws {
        try await ParseApp.run { parse in
            let anonymous = try await parse.anonymousLogIn()
            let objectId = try #require(anonymous.string("objectId"))
            let token = try #require(anonymous.string("sessionToken"))
            // Parse-Swift's `User.signup(username:password:)` with a current anonymous user.
            let upgraded = try await parse.send("PUT", "/users/\(objectId)", .init(session: token), json: .object([
                "username": "cleo@example.com", "password": "a long password", "authData": .object(["anonymous": .null]),
            ]))
            #expect(upgraded.status == 200, "\(upgraded.text)")
            // As for any password a user's PUT sets (Parse Server's generateNewSession): a new token, the others ended.
            #expect(Set(upgraded.body.keys) == ["updatedAt", "sessionToken"])
            let renewed = try #require(upgraded.string("sessionToken"))
            let login = try await parse.send("POST", "/login", json: .object(["username": "cleo@example.com", "password": "a long password"]))
            #expect(login.string("objectId") == objectId)
            #expect(login.body["authData"] == nil)
            #expect(login.string("username") == "cleo@example.com")
            #expect(try await parse.send("GET", "/users/me", .init(session: token)).code == 209)
            #expect(try await parse.send("GET", "/users/me", .init(session: renewed)).string("objectId") == objectId)
        }
    }

    /// A first password is a new way in: a user who has another (Apple) adds one only with a log-in of the last
    /// five minutes, so a stolen token cannot add the thief's. An anonymous user's upgrade needs none.
    @Test func aFirstPasswordOnAUserWithAnotherWayInNeedsARecentLogIn() async throws {
        try await ParseApp.run { parse in
            let apple = try await parse.logIn("apple", ["id": "apple-stale", "token": try await parse.appleToken("apple-stale", email: "stale@example.com")])
            let objectId = try #require(apple.string("objectId"))
            let session = try #require(apple.string("sessionToken"))
            let anonymous = try await parse.anonymousLogIn()
            _ = try await parse.app.admin.query("UPDATE sessions SET auth_time = auth_time - interval '10 minutes'")
            let events = try await parse.accountEvents()
            let stale = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "username": "thief@example.com", "password": "the thief's password",
            ]))
            #expect(stale.code == 119, "\(stale.text)")
            #expect(try await parse.accountEvents() == events)
            #expect(try await parse.send("GET", "/users/me", .init(session: session)).status == 200, "nobody was signed out")
            let upgraded = try await parse.send(
                "PUT", "/users/\(try #require(anonymous.string("objectId")))", .init(session: anonymous.string("sessionToken")),
                json: .object(["username": "anon@example.com", "password": "a long password", "authData": .object(["anonymous": .null])]))
            #expect(upgraded.status == 200, "\(upgraded.text)")
        }
    }

    /// Parse-Swift's `User.verifyPassword` (GET with the query, or POST) answered 404. It checks the password as a
    /// log-in does and answers the user without a session token: no session opens, and a wrong password is a
    /// failed sign-in, counted against the same limits (here three a minute), the account's included: guesses from
    /// three addresses use up its place for a fourth.
    @Test func verifyPasswordChecksAPasswordAndOpensNoSession() async throws {
        try await ParseApp.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "3", "TETHER_TRUSTED_PROXIES": "127.0.0.1"]) { parse in
            let signUp = try await parse.send("POST", "/users", json: .object(["username": "vera@example.com", "password": "vera's password"]))
            let objectId = try #require(signUp.string("objectId")), session = signUp.string("sessionToken")
            func sessions() async throws -> Int {
                try await parse.app.admin.query("SELECT count(*)::int AS n FROM sessions WHERE ended_at IS NULL")[0].decode("n")
            }
            let before = try await sessions()
            let byQuery = try await parse.send(
                "GET", "/verifyPassword?username=vera%40example.com&password=vera%27s%20password", .init(session: session))
            #expect(byQuery.status == 200 && byQuery.string("objectId") == objectId && byQuery.string("username") == "vera@example.com", "\(byQuery.text)")
            #expect(byQuery.body["sessionToken"] == nil, "\(byQuery.text)")
            let byBody = try await parse.send("POST", "/verifyPassword", json: .object(["username": "vera@example.com", "password": "vera's password"]))
            #expect(byBody.status == 200 && byBody.string("objectId") == objectId, "\(byBody.text)")
            #expect(try await sessions() == before, "no session opens")
            #expect(try await parse.send("POST", "/verifyPassword", json: .object(["password": "x"])).code == 200)
            #expect(try await parse.send("POST", "/verifyPassword", json: .object(["username": "vera@example.com"])).code == 201)
            var codes: [Int?] = []
            for address in ["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"] {
                let guess = try await parse.app.client.send(
                    "POST", "/parse/verifyPassword",
                    fields: [("X-Parse-Application-Id", ParseApp.appID), ("Content-Type", "application/json"), ("X-Forwarded-For", address)],
                    body: Array(#"{"username":"vera@example.com","password":"a wrong guess"}"#.utf8))
                codes.append(ParseAnswer(guess).code)
            }
            #expect(codes == [101, 101, 101, 155], "wrong passwords are failed sign-ins under the limits")
            let logIn = try await parse.send("POST", "/login", json: .object(["username": "vera@example.com", "password": "vera's password"]))
            #expect(logIn.status == 429, "the log-in shares the limit: \(logIn.text)")
            // The account's limit is the address's, however it is written (each spelling had a count of its own).
            let respelled = try await parse.send("POST", "/verifyPassword", json: .object(["username": " VERA@Example.com ", "password": "vera's password"]))
            #expect(respelled.code == 155, "\(respelled.text)")
            #expect(try await parse.app.eventCount("SignInFailed") == 3, "each wrong guess is in the account's history")
        }
    }

    /// A disabled user's right password is refused as their log-in is (119), and counted as a failed sign-in too.
    @Test func verifyPasswordRefusesADisabledUser() async throws {
        try await ParseApp.run { parse in
            _ = try await parse.send("POST", "/users", json: .object(["username": "dora@example.com", "password": "dora's password"]))
            let userId = try await parse.app.signedIn(parse.app.password("dora@example.com", "dora's password")).user.id
            let admin = try await parse.app.adminKey(.admin)
            #expect(try await parse.app.adminPost("/v1/admin/users/\(userId)/disable", key: admin.secret).status == 200)
            let failures = try await parse.app.eventCount("SignInFailed")
            let refused = try await parse.send("POST", "/verifyPassword", json: .object(["username": "dora@example.com", "password": "dora's password"]))
            #expect(refused.code == 119, "\(refused.text)")
            #expect(try await parse.app.eventCount("SignInFailed") == failures + 1)
        }
    }

    @Test func anotherUsersObjectShowsPublicFieldsOnlyAndTheMasterKeySeesAll() async throws {
        try await ParseApp.run { parse in
            let (_, adminKey) = try await AdminKeyStore(database: parse.app.admin).create(
                role: .admin, name: "parse master", metadata: EventMetadata(surface: "cli"))
            let (_, supportKey) = try await AdminKeyStore(database: parse.app.admin).create(
                role: .support, name: "support", metadata: EventMetadata(surface: "cli"))
            let alice = try await parse.logIn("apple", ["id": "apple-alice", "token": try await parse.appleToken("apple-alice", email: "alice@icloud.com")])
            let bob = try await parse.anonymousLogIn()
            let aliceId = try #require(alice.string("objectId"))

            let seenByBob = try await parse.send("GET", "/users/\(aliceId)", .init(session: bob.string("sessionToken")))
            #expect(seenByBob.status == 200)
            #expect(Set(seenByBob.body.keys) == ["objectId", "username", "createdAt", "updatedAt"])
            let seenByNobody = try await parse.send("GET", "/users/\(aliceId)")
            #expect(Set(seenByNobody.body.keys) == ["objectId", "username", "createdAt", "updatedAt"])
            let master = try await parse.send("GET", "/users/\(aliceId)", .init(master: adminKey))
            #expect(master.authData == ["apple": ["id": "apple-alice"]])
            #expect(master.string("email") == "alice@icloud.com")
            #expect(try await parse.app.eventCount("AdminUserViewed") == 1)
            #expect(try await parse.send("GET", "/users/\(aliceId)", .init(master: supportKey)).text == #"{"error":"unauthorized"}"#)
            #expect(try await parse.send("GET", "/users/\(aliceId)", .init(master: "tadm_wrong")).status == 403)
            #expect(try await parse.send("GET", "/users/abcdefghij").text == #"{"code":101,"error":"Object not found."}"#)

            // The master key unlinks as an admin: even the last method, and the action is recorded.
            let unlinked = try await parse.send("PUT", "/users/\(aliceId)", .init(master: adminKey), json: .object(["authData": .object(["apple": .null])]))
            #expect(unlinked.status == 200, "\(unlinked.text)")
            #expect(try await parse.send("GET", "/users/\(aliceId)", .init(master: adminKey)).authData.isEmpty)
            #expect(try await parse.app.eventCount("AdminActionRequested") == 1)
        }
    }

    /// Parse-Swift sends the current user's session token on every request, the master key's too; Parse Server then
    /// acts as the master and reads the token only where it is the subject (`users/me`, `sessions/me`, log-out).
    /// Beside another user's token the master key was refused 101, beside a stale one 209.
    @Test func theMasterKeyOutranksASessionTokenSentBesideIt() async throws {
        try await ParseApp.run { parse in
            let (_, adminKey) = try await AdminKeyStore(database: parse.app.admin).create(
                role: .admin, name: "parse master", metadata: EventMetadata(surface: "cli"))
            let alice = try await parse.logIn("apple", ["id": "apple-alice", "token": try await parse.appleToken("apple-alice", email: "alice@icloud.com")])
            let aliceId = try #require(alice.string("objectId"))
            let bob = try await parse.anonymousLogIn()
            let bobToken = try #require(bob.string("sessionToken"))
            let stale = "r:" + String(repeating: "0", count: 32)
            for (index, token) in [bobToken, stale, try #require(alice.string("sessionToken"))].enumerated() {
                let verified = try await parse.send(
                    "PUT", "/users/\(aliceId)", .init(session: token, master: adminKey), json: .object(["emailVerified": .bool(index != 1)]))
                #expect(verified.status == 200, "token \(index): \(verified.text)")
                let fetched = try await parse.send("GET", "/users/\(aliceId)", .init(session: token, master: adminKey))
                #expect(fetched.body["emailVerified"] == .bool(index != 1), "token \(index): \(fetched.text)")
            }
            // The token's own routes still read it.
            let me = try await parse.send("GET", "/users/me", .init(session: bobToken, master: adminKey))
            #expect(me.string("objectId") == bob.string("objectId"))
            #expect(try await parse.send("GET", "/users/me", .init(session: stale, master: adminKey)).code == 209)
            #expect(try await parse.send("POST", "/logout", .init(session: bobToken, master: adminKey)).status == 200)
            #expect(try await parse.send("GET", "/users/me", .init(session: bobToken)).code == 209, "the log-out ended Bob's session")
        }
    }

    @Test func revokingOnV1OrByAnAdminEndsParseSessionsAndTheSamePersonIsOneUser() async throws {
        try await ParseApp.run { parse in
            let parseLogIn = try await parse.logIn("apple", ["id": "apple-both", "token": try await parse.appleToken("apple-both")])
            let parseToken = try #require(parseLogIn.string("sessionToken"))
            let v1 = try await parse.app.signedIn(try await parse.app.apple("apple-both"))
            #expect(v1.isNewUser == false)
            #expect(ParseUserIDs.objectId(ofV1Id: v1.user.id) == parseLogIn.string("objectId"))
            let revoked = try await parse.app.client.post(
                "/v1/users/me/sessions/revoke", headers: ["Authorization": "Bearer \(v1.session.accessToken)"], json: [String: String]())
            #expect(revoked.status == 204)
            #expect(try await parse.send("GET", "/users/me", .init(session: parseToken)).code == 209)

            // And the other way: a Parse session is not a /v1 refresh token.
            let again = try await parse.logIn("apple", ["id": "apple-both", "token": try await parse.appleToken("apple-both")])
            let refresh = try await parse.app.refresh(try #require(again.string("sessionToken")))
            #expect(refresh.status == 401)
            #expect(try await parse.send("GET", "/users/me", .init(session: again.string("sessionToken"))).status == 200)

            // An admin's revoke ends them too.
            let (_, adminKey) = try await AdminKeyStore(database: parse.app.admin).create(
                role: .admin, name: "ops", metadata: EventMetadata(surface: "cli"))
            let adminRevoke = try await parse.app.client.post(
                "/v1/admin/users/\(v1.user.id)/revoke-sessions", headers: ["Authorization": "Bearer \(adminKey)"], json: [String: String]())
            #expect(adminRevoke.status == 200, "\(adminRevoke.bodyText)")
            #expect(try await parse.send("GET", "/users/me", .init(session: again.string("sessionToken"))).code == 209)
        }
    }
}
