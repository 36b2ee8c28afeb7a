import Foundation
import Testing
import TetherCore
import TetherCrypto
import TetherTesting

/// The Parse-Swift flow as it goes on the wire (WIRE-FACTS §1b, §5), against the real server and database.
@Suite("Parse surface: the Parse-Swift flow")
struct ParseSDKFlowTests {

    @Test func anonymousThenAppleThenFacebookThenBecomeFetchLogOut() async throws {
        try await ParseApp.run { parse in
            let installation = UUID().uuidString.lowercased()
            // 1. Anonymous log-in: a new user, 201 with the four members Parse-Swift decodes.
            let anonymousId = UUID().uuidString.lowercased()
            let signUp = try await parse.anonymousLogIn(id: anonymousId, .init(installation: installation))
            #expect(signUp.status == 201)
            #expect(Set(signUp.body.keys) == ["objectId", "createdAt", "username", "sessionToken"])
            let objectId = try #require(signUp.string("objectId"))
            #expect(ParseWire.isObjectId(objectId))
            #expect(ParseWire.isDate(signUp.string("createdAt")))
            #expect(ParseWire.isAlphanumeric(signUp.string("username"), count: 25))
            let anonymousToken = try #require(signUp.string("sessionToken"))
            #expect(ParseWire.isSessionToken(anonymousToken))
            #expect(signUp.header("Location") == "http://127.0.0.1:\(parse.app.port)/parse/users/\(objectId)")
            // Another Host is the client's to send: the Location is then the path alone, never a link to wherever it said.
            let elsewhere = ParseAnswer(try await parse.app.client.send(
                "POST", "/parse/users", fields: ParseApp.Headers().fields + [("Host", "evil.example"), ("Content-Type", "application/json")],
                body: Array(#"{"authData":{"anonymous":{"id":"\#(UUID().uuidString.lowercased())"}}}"#.utf8)))
            #expect(elsewhere.status == 201)
            #expect(elsewhere.header("Location") == "/parse/users/\(try #require(elsewhere.string("objectId")))")

            // 2. Apple log-in while anonymous: Parse-Swift links, with PUT and "anonymous": null.
            let apple = try await parse.appleToken("apple-flow", email: "flow@privaterelay.appleid.com")
            let upgrade = try await parse.send("PUT", "/users/\(objectId)", .init(session: anonymousToken, installation: installation,
                requestId: UUID().uuidString.lowercased()), json: .object(["authData": .object([
                    "anonymous": .null, "apple": ParseApp.strings(["id": "apple-flow", "token": apple]),
                ])]))
            #expect(upgrade.status == 200, "\(upgrade.text)")
            #expect(Set(upgrade.body.keys) == ["updatedAt"])
            #expect(ParseWire.isDate(upgrade.string("updatedAt")))

            // 3. Link Facebook: the SDK echoes every linked provider (apple without a fresh token is unchanged).
            let facebook = try await parse.facebookToken("fb-flow")
            let linked = try await parse.send("PUT", "/users/\(objectId)", .init(session: anonymousToken), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-flow"]),
                "facebook": ParseApp.strings(["id": "fb-flow", "access_token": facebook]),
            ])]))
            #expect(linked.status == 200, "\(linked.text)")

            // 4. become: GET /users/me with the token; fetch: GET /users/<id>. Same objectId, anonymous gone.
            let me = try await parse.send("GET", "/users/me", .init(session: anonymousToken))
            #expect(me.status == 200)
            #expect(me.string("objectId") == objectId)
            #expect(me.string("sessionToken") == anonymousToken)
            #expect(me.authData == ["apple": ["id": "apple-flow"], "facebook": ["id": "fb-flow"]])
            #expect(me.string("email") == "flow@privaterelay.appleid.com")
            #expect(!me.text.contains("null"))
            let fetched = try await parse.send("GET", "/users/\(objectId)", .init(session: anonymousToken))
            #expect(fetched.status == 200)
            #expect(fetched.authData.keys.sorted() == ["apple", "facebook"])
            #expect(fetched.body["sessionToken"] == nil)

            // The same user on /v1: Apple signs in to the user the Parse surface made, and history says parse.
            let viaV1 = try await parse.app.signedIn(try await parse.app.apple("apple-flow"))
            #expect(ParseUserIDs.objectId(ofV1Id: viaV1.user.id) == objectId)
            #expect(viaV1.user.identities.map(\.provider).sorted() == ["apple", "facebook"])
            let surfaces = try await parse.app.admin.query("""
                SELECT DISTINCT metadata->>'surface' AS surface FROM events WHERE user_id = \(viaV1.user.id)::uuid ORDER BY 1
                """).map { try $0.decode("surface", as: String.self) }
            #expect(surfaces == ["parse", "v1"])
            #expect(try await parse.app.eventCount("IdentityUnlinked") == 1)

            // 5. Log out: {} and the token stops working; a second log-out is {} too.
            let logout = try await parse.send("POST", "/logout", .init(session: anonymousToken, requestId: UUID().uuidString))
            #expect(logout.status == 200)
            #expect(logout.text == "{}")
            let after = try await parse.send("GET", "/users/me", .init(session: anonymousToken))
            #expect(after.status == 400)
            #expect(after.text == #"{"code":209,"error":"Invalid session token"}"#)
            #expect(try await parse.send("POST", "/logout", .init(session: anonymousToken)).text == "{}")

            // 6. The Apple id of this user, claimed by another (anonymous) user: 208, and nothing written.
            let other = try await parse.anonymousLogIn()
            let otherToken = try #require(other.string("sessionToken"))
            let otherId = try #require(other.string("objectId"))
            let before = try await parse.app.totalEvents()
            let taken = try await parse.send("PUT", "/users/\(otherId)", .init(session: otherToken), json: .object(["authData": .object([
                "anonymous": .null, "apple": ParseApp.strings(["id": "apple-flow", "token": try await parse.appleToken("apple-flow")]),
            ])]))
            #expect(taken.status == 400)
            #expect(taken.text == #"{"code":208,"error":"this auth is already used"}"#)
            #expect(try await parse.app.totalEvents() == before)
        }
    }

    @Test func authDataSignUpIs201AndTheSameIdentityLogsInWith200AndTheStoredUser() async throws {
        try await ParseApp.run { parse in
            let token = try await parse.appleToken("apple-login", email: "login@icloud.com")
            let created = try await parse.logIn("apple", ["id": "apple-login", "token": token])
            #expect(created.status == 201, "\(created.text)")
            let objectId = try #require(created.string("objectId"))

            let again = try await parse.logIn("apple", ["id": "apple-login", "token": try await parse.appleToken("apple-login")])
            #expect(again.status == 200)
            #expect(again.string("objectId") == objectId)
            #expect(again.string("username") == created.string("username"))
            #expect(again.string("createdAt") == created.string("createdAt"))
            #expect(ParseWire.isDate(again.string("updatedAt")))
            #expect(again.authData == ["apple": ["id": "apple-login"]])
            let second = try #require(again.string("sessionToken"))
            #expect(second != created.string("sessionToken"))
            #expect(again.header("Location")?.hasSuffix("/parse/users/\(objectId)") == true)
            #expect(again.body["error"] == nil && again.body["message"] == nil)
            // Both sessions live (different installations: none named).
            #expect(try await parse.send("GET", "/users/me", .init(session: created.string("sessionToken"))).status == 200)
            #expect(try await parse.send("GET", "/users/me", .init(session: second)).status == 200)
            #expect(try await parse.app.eventCount("UserRegistered") == 1)
        }
    }
}

/// The Parse objectId of a `/v1` user id, computed the way the server documents it.
enum ParseUserIDs {
    static func objectId(ofV1Id id: String) -> String? {
        guard let uuid = UUID(uuidString: id) else { return nil }
        let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
        let digest = DigestAlgorithm.sha256.hash(bytes)
        return String(Data(digest).base64EncodedString().filter { $0.isASCII && ($0.isLetter || $0.isNumber) }.prefix(10))
    }
}
