import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherTesting

/// Bad input on the Parse surface: each answered with Parse's error, byte for byte where clients parse it, and no write.
@Suite("Parse surface: errors and bad input")
struct ParseErrorTests {
    @Test func aWrongOrMissingApplicationIdOrClientKeyIs403Unauthorized() async throws {
        try await ParseApp.run(settings: ["TETHER_PARSE_CLIENT_KEY": "client-key-1"]) { parse in
            let body: JSONValue = .object(["authData": .object(["anonymous": ParseApp.strings(["id": UUID().uuidString.lowercased()])])])
            for headers in [
                ParseApp.Headers(appID: nil, clientKey: "client-key-1"), ParseApp.Headers(appID: "other-app", clientKey: "client-key-1"),
                ParseApp.Headers(), ParseApp.Headers(clientKey: "client-key-2"),
            ] {
                let answer = try await parse.send("POST", "/users", headers, json: body)
                #expect(answer.status == 403)
                #expect(answer.text == #"{"error":"unauthorized"}"#)
            }
            #expect(try await parse.send("GET", "/users/me", ParseApp.Headers(appID: nil)).status == 403)
            #expect(try await parse.app.totalEvents() == 0)
            #expect(try await parse.send("POST", "/users", .init(clientKey: "client-key-1"), json: body).status == 201)
            // The REST key header is the other name of the same key.
            var rest = ParseApp.Headers()
            rest.appID = ParseApp.appID
            let viaREST = try await parse.app.client.send("GET", "/parse/users/me", fields: rest.fields + [("X-Parse-REST-API-Key", "client-key-1")])
            #expect(viaREST.status == 400) // past the keys: no session
            #expect(viaREST.bodyText == #"{"code":209,"error":"Invalid session token"}"#)
        }
    }

    @Test func authDataThatNamesNoUsableProviderIs252AndMalformedAuthDataIs107() async throws {
        try await ParseApp.run { parse in
            let unsupported = #"{"code":252,"error":"This authentication method is unsupported."}"#
            for authData: JSONValue in [
                .null, .object([:]), .object(["github": ParseApp.strings(["id": "1", "token": "t"])]),
                .object(["apple": ParseApp.strings(["token": "no-id"])]), .object(["apple": .null]), .string("apple"),
            ] {
                let answer = try await parse.send("POST", "/users", json: .object(["authData": authData]))
                #expect(answer.status == 400, "\(authData)")
                #expect(answer.text == unsupported, "\(authData)")
            }
            for authData: JSONValue in [
                .object(["apple": .object(["id": .int(12), "token": "t"])]),
                .object(["apple": .object(["id": "a", "token": .object(["nested": "x"])])]),
                .object(["apple": .array(["a"])]),
            ] {
                let answer = try await parse.send("POST", "/users", json: .object(["authData": authData]))
                #expect(answer.status == 400)
                #expect(answer.code == 107, "\(answer.text)")
            }
            let malformed = try await parse.send("POST", "/users", body: Array(#"{"authData": {"apple": "#.utf8))
            #expect(malformed.status == 400)
            #expect(malformed.text == #"{"code":107,"error":"Invalid JSON"}"#)
            #expect(try await parse.send("POST", "/users", body: Array("[1,2]".utf8)).code == 107)
            #expect(try await parse.app.totalEvents() == 0)

            // Beside an entry that names a user, one without its id was passed over: it is verified, so refused.
            let apple = ParseApp.strings(["id": "apple-beside", "token": try await parse.appleToken("apple-beside")])
            for beside: JSONValue in [ParseApp.strings(["access_token": "garbage"]), ParseApp.strings(["id_token": "garbage"])] {
                let answer = try await parse.send("POST", "/users", json: .object(["authData": .object(["apple": apple, "facebook": beside])]))
                #expect(answer.status == 404 && answer.code == 101, "\(answer.text)")
            }
            let unknown = try await parse.send(
                "POST", "/users", json: .object(["authData": .object(["apple": apple, "github": ParseApp.strings(["token": "t"])])]))
            #expect(unknown.text == unsupported)
            #expect(try await parse.app.totalEvents() == 0)
        }
    }

    @Test func anIdThatIsNotTheTokensSubjectOrAForgedTokenIs101() async throws {
        try await ParseApp.run { parse in
            let token = try await parse.appleToken("apple-real")
            let mismatch = try await parse.logIn("apple", ["id": "apple-someone-else", "token": token])
            #expect(mismatch.status == 404)
            #expect(mismatch.text == #"{"code":101,"error":"auth data is invalid for this user."}"#)
            // Flip a character of the signature.
            var forged = Array(token)
            forged[forged.count - 3] = forged[forged.count - 3] == "A" ? "B" : "A"
            let refused = try await parse.logIn("apple", ["id": "apple-real", "token": String(forged)])
            #expect(refused.status == 404)
            #expect(refused.text == #"{"code":101,"error":"id token is invalid for this user."}"#)
            let facebook = try await parse.logIn("facebook", ["id": "fb-1", "access_token": "not-a-token"])
            #expect(facebook.text == #"{"code":101,"error":"Facebook auth is invalid for this user."}"#)
            #expect(try await parse.accountEvents() == 0)
            // The refused tokens count against the client's limits, as on /v1.
            #expect(try await parse.app.tallied("failed") == 2)
        }
    }

    @Test func oversizedBodiesAndUnknownRoutesGetParseShapedErrors() async throws {
        try await ParseApp.run { parse in
            // Declared too large: answered before the body is sent (the connection then closes).
            try await parse.app.withNewClient { client in
                try await client.sendRaw(Array("""
                    POST /parse/users HTTP/1.1\r\nHost: test\r\nX-Parse-Application-Id: \(ParseApp.appID)\r\n\
                    Content-Type: application/json\r\nContent-Length: 2000000\r\n\r\n
                    """.utf8))
                let declared = ParseAnswer(try await client.readResponse(method: "POST"))
                #expect(declared.status == 413)
                #expect(declared.text == #"{"code":-1,"error":"request entity too large"}"#)
            }
            // Chunked, with no length: read to the end, then refused the same way.
            let chunk = [UInt8](repeating: 0x61, count: 400_000)
            let chunked = ParseAnswer(try await parse.app.client.sendChunked(
                "POST", "/parse/users", headers: ["X-Parse-Application-Id": ParseApp.appID, "Content-Type": "application/json"],
                chunks: [Array(#"{"authData":{"anonymous":{"id":""#.utf8), chunk, chunk, chunk]))
            #expect(chunked.status == 413)
            #expect(chunked.text == #"{"code":-1,"error":"request entity too large"}"#)
            let unknown = try await parse.send("GET", "/classes/GameScore")
            #expect(unknown.status == 404)
            #expect(unknown.code == -1)
            #expect(unknown.string("error") != nil)
            // A method the route does not take: 405 in Parse's shape, with the methods it does take.
            let wrongMethod = try await parse.send("PATCH", "/logout")
            #expect(wrongMethod.status == 405)
            #expect(wrongMethod.code == -1)
            #expect(wrongMethod.header("Allow") == "OPTIONS, POST")
            #expect(try await parse.app.totalEvents() == 0)
        }
    }

    @Test func putWithoutASessionIs206AnotherUsersSessionIs101AndAnOwnedIdentityIs208AfterVerification() async throws {
        try await ParseApp.run { parse in
            let owner = try await parse.logIn("apple", ["id": "apple-owned", "token": try await parse.appleToken("apple-owned")])
            let other = try await parse.anonymousLogIn()
            let ownerId = try #require(owner.string("objectId"))
            let otherId = try #require(other.string("objectId"))
            let otherToken = try #require(other.string("sessionToken"))
            let before = try await parse.accountEvents()

            let noSession = try await parse.send("PUT", "/users/\(otherId)", json: .object(["authData": .object(["anonymous": .null])]))
            #expect(noSession.text == #"{"code":206,"error":"Cannot modify user \#(otherId)."}"#)
            let wrongUser = try await parse.send("PUT", "/users/\(ownerId)", .init(session: otherToken), json: .object([:]))
            #expect(wrongUser.status == 404)
            #expect(wrongUser.text == #"{"code":101,"error":"Object not found."}"#)
            // Owned by someone else, but the token is forged: the provider's 101 comes first, so ids cannot be probed.
            let forged = try await parse.send("PUT", "/users/\(otherId)", .init(session: otherToken), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-owned", "token": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"]),
            ])]))
            #expect(forged.status == 404)
            #expect(forged.code == 101)
            let owned = try await parse.send("PUT", "/users/\(otherId)", .init(session: otherToken), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-owned", "token": try await parse.appleToken("apple-owned")]),
            ])]))
            #expect(owned.text == #"{"code":208,"error":"this auth is already used"}"#)
            // An anonymous user's last method is its anonymous identity.
            let last = try await parse.send("PUT", "/users/\(otherId)", .init(session: otherToken), json: .object(["authData": .object(["anonymous": .null])]))
            #expect(last.status == 400)
            #expect(last.code == 119)
            #expect(try await parse.accountEvents() == before)
        }
    }

    @Test func theSessionOfADisabledOrErasedUserIs209() async throws {
        try await ParseApp.run { parse in
            let (_, adminKey) = try await AdminKeyStore(database: parse.app.admin).create(
                role: .admin, name: "test", metadata: EventMetadata(surface: "cli"))
            let first = try await parse.anonymousLogIn()
            let second = try await parse.anonymousLogIn()
            let firstToken = try #require(first.string("sessionToken"))
            let secondToken = try #require(second.string("sessionToken"))
            let ids = try await parse.app.admin.query("""
                SELECT id, substr(translate(encode(sha256(uuid_send(id)), 'base64'), '+/=', ''), 1, 10) AS object_id
                FROM users ORDER BY created_at
                """).map { (try $0.decode("id", as: UUID.self), try $0.decode("object_id", as: String.self)) }
            #expect(ids.map(\.1) == [first.string("objectId"), second.string("objectId")])
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(adminKey)"]
            #expect(try await parse.app.client.post("/v1/admin/users/\(ids[0].0.uuidString.lowercased())/disable", headers: auth, json: [String: String]()).status == 200)
            #expect(try await parse.app.client.delete("/v1/admin/users/\(ids[1].0.uuidString.lowercased())", headers: auth).status == 200)
            for token in [firstToken, secondToken] {
                let me = try await parse.send("GET", "/users/me", .init(session: token))
                #expect(me.text == #"{"code":209,"error":"Invalid session token"}"#)
            }
            // The erased user is gone from the Parse surface too; the master key sees no such object.
            let fetched = try await parse.send("GET", "/users/\(ids[1].1)", .init(master: adminKey))
            #expect(fetched.status == 404)
        }
    }
}
