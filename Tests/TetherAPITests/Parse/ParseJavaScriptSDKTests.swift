import Foundation
import Testing
import TetherCore
import TetherTesting

/// The Parse JavaScript SDK's requests (RESTController): every call a `POST` of `text/plain` whose body carries
/// the keys, the session token and any other method (`_method`), from a page of another origin.
@Suite("Parse surface: the JavaScript SDK's requests from a browser")
struct ParseJavaScriptSDKTests {
    /// `POST /parse<path>` as the JS SDK sends it: `text/plain`, the envelope in the body, an `Origin`.
    private func jsRequest(_ parse: ParseApp, _ path: String, _ members: [String: JSONValue]) async throws -> ParseAnswer {
        var body = members
        body["_ApplicationId"] = .string(ParseApp.appID)
        body["_ClientVersion"] = "js5.3.0"
        return ParseAnswer(try await parse.app.client.send(
            "POST", "/parse" + path, fields: [("Content-Type", "text/plain"), ("Origin", "https://app.example.com")],
            body: Array(try JSONEncoder().encode(JSONValue.object(body)))))
    }

    @Test func signUpLogInBecomeUpdateAndLogOutThroughTheEnvelope() async throws {
        try await ParseApp.run { parse in
            let installation = UUID().uuidString.lowercased()
            let signUp = try await jsRequest(parse, "/users", [
                "username": "js@example.com", "password": "a long password", "_InstallationId": .string(installation),
            ])
            #expect(signUp.status == 201, "\(signUp.text)")
            #expect(signUp.response.headers["Access-Control-Allow-Origin"] == "*")
            #expect(signUp.body["_ApplicationId"] == nil && signUp.body["_ClientVersion"] == nil)
            let objectId = try #require(signUp.string("objectId"))

            // logIn: `_method: GET` with the credentials in the body.
            let logIn = try await jsRequest(parse, "/login", ["_method": "GET", "username": "js@example.com", "password": "a long password"])
            #expect(logIn.status == 200, "\(logIn.text)")
            let token = try #require(logIn.string("sessionToken"))

            // become(): GET /users/me with the token in the body.
            let me = try await jsRequest(parse, "/users/me", ["_method": "GET", "_SessionToken": .string(token)])
            #expect(me.status == 200, "\(me.text)")
            #expect(me.string("objectId") == objectId)
            #expect(try await jsRequest(parse, "/sessions/me", ["_method": "GET", "_SessionToken": .string(token)]).status == 200)

            // save(): PUT /users/:id, here a new password, which answers a new token.
            let saved = try await jsRequest(parse, "/users/\(objectId)", [
                "_method": "PUT", "_SessionToken": .string(token), "password": "another long password",
            ])
            #expect(saved.status == 200, "\(saved.text)")
            let renewed = try #require(saved.string("sessionToken"))
            #expect(try await jsRequest(parse, "/users/me", ["_method": "GET", "_SessionToken": .string(token)]).code == 209)

            #expect(try await jsRequest(parse, "/logout", ["_SessionToken": .string(renewed)]).status == 200)
            #expect(try await jsRequest(parse, "/users/me", ["_method": "GET", "_SessionToken": .string(renewed)]).code == 209)

            // destroy(): `_method: DELETE` on the user, with a session of theirs, erases them.
            let again = try await jsRequest(parse, "/login", ["_method": "GET", "username": "js@example.com", "password": "another long password"])
            let lastToken = try #require(again.string("sessionToken"), "\(again.text)")
            let destroyed = try await jsRequest(parse, "/users/\(objectId)", ["_method": "DELETE", "_SessionToken": .string(lastToken)])
            #expect(destroyed.status == 200 && destroyed.text == "{}", "\(destroyed.text)")
            #expect(destroyed.response.headers["Access-Control-Allow-Origin"] == "*")
            #expect(try await jsRequest(parse, "/users/me", ["_method": "GET", "_SessionToken": .string(lastToken)]).code == 209)
            #expect(try await parse.app.eventCount("UserErased") == 1)
        }
    }

    @Test func theEnvelopeIsCheckedAsHeadersAreAndBrowsersArePreflighted() async throws {
        try await ParseApp.run { parse in
            let before = try await parse.app.totalEvents()
            // A wrong application id in the body is Parse's 403, as in the header.
            let wrong = ParseAnswer(try await parse.app.client.send(
                "POST", "/parse/users", fields: [("Content-Type", "text/plain")],
                body: Array(#"{"username":"x@example.com","password":"a long password","_ApplicationId":"another-app"}"#.utf8)))
            #expect(wrong.status == 403, "\(wrong.text)")
            // A method the path does not serve is refused, not run as the POST.
            let deleted = try await jsRequest(parse, "/sessions/me", ["_method": "DELETE"])
            #expect(deleted.status == 405, "\(deleted.text)")
            let notASignUp = try await jsRequest(parse, "/users", ["_method": "DELETE", "username": "z@example.com", "password": "a long password"])
            #expect(notASignUp.status == 405, "\(notASignUp.text)")
            #expect(try await parse.app.totalEvents() == before)

            let preflight = try await parse.app.client.send(
                "OPTIONS", "/parse/users/me",
                fields: [("Origin", "https://app.example.com"), ("Access-Control-Request-Method", "POST"),
                         ("Access-Control-Request-Headers", "x-parse-application-id, content-type")],
                body: [])
            #expect(preflight.status == 200)
            #expect(preflight.headers["Access-Control-Allow-Origin"] == "*")
            #expect(preflight.headers["Access-Control-Allow-Methods"]?.contains("PUT") == true)
            #expect(preflight.headers["Access-Control-Allow-Headers"]?.contains("X-Parse-Application-Id") == true)
            // The other SDKs' requests carry the header too, and so do errors the HTTP layer answers.
            #expect(try await parse.send("GET", "/users/me").response.headers["Access-Control-Allow-Origin"] == "*")
            let unknown = try await parse.send("GET", "/classes/GameScore")
            #expect(unknown.status == 404 && unknown.response.headers["Access-Control-Allow-Origin"] == "*")
        }
    }
}
