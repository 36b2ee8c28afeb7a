import Foundation
import Testing
import TetherCore
import TetherTesting

/// The Firebase JS SDK from a page of another origin: a preflight for each call (its `Content-Type` is
/// `application/json`, and it adds `X-Client-Version` and `X-Firebase-gmpid`), then the call, whose answer the
/// page may read, errors included.
@Suite("Firebase surface: the JS SDK's calls from a browser")
struct FirebaseBrowserTests {
    static let origin = "https://app.example.com"

    private func preflight(_ firebase: FirebaseApp, _ path: String, requesting headers: String?) async throws -> FirebaseAnswer {
        var fields: [(key: String, value: String)] = [("Origin", Self.origin), ("Access-Control-Request-Method", "POST")]
        if let headers { fields.append(("Access-Control-Request-Headers", headers)) }
        return FirebaseAnswer(try await firebase.app.client.send("OPTIONS", path, fields: fields))
    }

    @Test func aPreflightAllowsTheSDKsHeadersAndEveryAnswerAllowsTheOrigin() async throws {
        try await FirebaseApp.run { firebase in
            let signUpPath = "\(FirebaseApp.v1)/accounts:signUp?key=fake-api-key"
            let asked = "content-type,x-client-version,x-firebase-gmpid,x-firebase-client"
            let before = try await firebase.app.lastEventPosition()
            let allowed = try await preflight(firebase, signUpPath, requesting: asked)
            #expect(allowed.status == 204, "\(allowed.text)")
            #expect(allowed.response.body.isEmpty)
            #expect(allowed.response.headers["Access-Control-Allow-Origin"] == "*")
            #expect(allowed.response.headers["Access-Control-Allow-Methods"] == "GET,POST,OPTIONS")
            #expect(allowed.response.headers["Access-Control-Allow-Headers"] == asked)
            #expect(allowed.response.headers["Vary"] == "Access-Control-Request-Headers")
            #expect(allowed.response.headers["Access-Control-Allow-Credentials"] == nil, "no cookie is ever a credential here")
            #expect(try await firebase.app.lastEventPosition() == before, "a preflight writes nothing")

            // A list that is not header names is not echoed: the browser stops at the preflight.
            let forged = try await preflight(firebase, signUpPath, requesting: "content-type\", x-evil: 1")
            #expect(forged.status == 204)
            #expect(forged.response.headers["Access-Control-Allow-Headers"] == nil)

            // Every route has its preflight: the Secure Token refresh, the v3 names, the admin form.
            for path in ["/securetoken.googleapis.com/v1/token?key=k", "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyPassword?key=k",
                         "\(FirebaseApp.v1)/projects/\(FirebaseApp.projectID)/accounts:lookup", "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:start?key=k"] {
                let answer = try await preflight(firebase, path, requesting: "content-type")
                #expect(answer.status == 204 && answer.response.headers["Access-Control-Allow-Origin"] == "*", "\(path): \(answer.status)")
            }

            // The call itself, its error, and an error of the HTTP layer (no such method) all allow the origin.
            let signedUp = FirebaseAnswer(try await firebase.app.client.send(
                "POST", signUpPath, fields: [("Content-Type", "application/json"), ("Origin", Self.origin), ("X-Client-Version", "Chrome/JsCore/11.0.0")],
                body: Array(#"{"returnSecureToken":true}"#.utf8)))
            #expect(signedUp.status == 200, "\(signedUp.text)")
            #expect(signedUp.response.headers["Access-Control-Allow-Origin"] == "*")
            let refused = FirebaseAnswer(try await firebase.app.client.send(
                "POST", "\(FirebaseApp.v1)/accounts:lookup?key=k", fields: [("Content-Type", "application/json"), ("Origin", Self.origin)],
                body: Array(#"{"idToken":"not a token"}"#.utf8)))
            #expect(refused.status == 400 && refused.text.contains("INVALID_ID_TOKEN"), "\(refused.text)")
            #expect(refused.response.headers["Access-Control-Allow-Origin"] == "*")
            let unknown = FirebaseAnswer(try await firebase.app.client.send(
                "POST", "\(FirebaseApp.v1)/accounts:noSuchMethod?key=k", fields: [("Content-Type", "application/json"), ("Origin", Self.origin)],
                body: Array("{}".utf8)))
            #expect(unknown.status == 404, "\(unknown.text)")
            #expect(unknown.response.headers["Access-Control-Allow-Origin"] == "*")
        }
    }
}
