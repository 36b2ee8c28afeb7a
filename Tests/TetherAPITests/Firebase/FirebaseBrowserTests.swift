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

    /// What `tether dev` serves its developer alone stays out of other sites' reach: the pending codes (no
    /// credential) allow no other origin, and `Bearer owner` from a page of another origin is no admin.
    @Test func aPageOfAnotherSiteCannotReadDevCodesOrActAsTheOwner() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "dev-codes@example.com", "password": "a long password"]))
            #expect(signUp.status == 200, "\(signUp.text)")
            let codesPath = "/emulator/v1/projects/\(FirebaseApp.projectID)/oobCodes"
            #expect(try await firebase.app.client.get(codesPath).status == 200, "the developer's own tools read them")
            let codes = try await firebase.app.client.send("GET", codesPath, fields: [("Origin", Self.origin)])
            #expect(codes.status == 404, "a page of another site does not")
            #expect(codes.headers["Access-Control-Allow-Origin"] == nil)
            // A page of a name re-pointed at 127.0.0.1 (DNS rebinding) is same-origin and sends no Origin, but its Host is its name.
            let rebound = try await firebase.app.client.send("GET", codesPath, fields: [("Host", "rebound.example:8080")])
            #expect(rebound.status == 404, "\(rebound.bodyText)")
            let codesPreflight = try await preflight(firebase, codesPath, requesting: nil)
            #expect(codesPreflight.response.headers["Access-Control-Allow-Origin"] == nil && codesPreflight.status != 204)

            let lookup = JSONValue.object(["email": .array(["dev-codes@example.com"])])
            let body = Array(try JSONEncoder().encode(lookup))
            let path = "\(FirebaseApp.v1)/projects/\(FirebaseApp.projectID)/accounts:lookup"
            for (origin, allowed) in [(nil, true), ("http://localhost:5173", true), ("http://127.0.0.1:3000", true),
                                      (Self.origin, false), ("null", false), ("http://localhost.example.com", false)] as [(String?, Bool)] {
                var fields: [(key: String, value: String)] = [("Content-Type", "application/json"), ("Authorization", "Bearer owner")]
                if let origin { fields.append(("Origin", origin)) }
                let answer = FirebaseAnswer(try await firebase.app.client.send("POST", path, fields: fields, body: body))
                #expect((answer.status == 200) == allowed, "\(origin ?? "no origin"): \(answer.status) \(answer.text)")
                #expect(allowed ? answer.users.count == 1 : answer.text.contains("UNAUTHENTICATED") || answer.status == 401)
            }
            for host in ["rebound.example:8080", "localhost:1@evil.example"] {
                let answer = FirebaseAnswer(try await firebase.app.client.send("POST", path, fields: [
                    ("Host", host), ("Content-Type", "application/json"), ("Authorization", "Bearer owner"),
                ], body: body))
                #expect(answer.status == 401, "Host \(host): \(answer.status) \(answer.text)")
            }
            // The dev identity provider's outboxes (mailed and texted codes) answer this machine's tools alone too.
            #expect(try await firebase.app.idp.get("/dev-idp/mail").status == 200)
            for route in ["/dev-idp/mail", "/dev-idp/sms"] {
                let rebound = try await firebase.app.idp.send("GET", route, fields: [("Host", "rebound.example:8080")])
                #expect(rebound.status == 404, "\(route): \(rebound.bodyText)")
            }
        }
    }

    /// `Bearer owner` is the developer's own tools on this machine: a client that a trusted proxy passes on is not.
    @Test func aClientATrustedProxyPassesOnIsNoOwner() async throws {
        try await FirebaseApp.run(settings: ["TETHER_TRUSTED_PROXIES": "127.0.0.1"]) { firebase in
            let body = Array(try JSONEncoder().encode(JSONValue.object(["email": .array(["nobody@example.com"])])))
            let path = "\(FirebaseApp.v1)/projects/\(FirebaseApp.projectID)/accounts:lookup"
            for (forwarded, allowed) in [("127.0.0.1", true), ("203.0.113.7", false)] {
                let answer = FirebaseAnswer(try await firebase.app.client.send("POST", path, fields: [
                    ("Content-Type", "application/json"), ("Authorization", "Bearer owner"), ("X-Forwarded-For", forwarded),
                ], body: body))
                #expect((answer.status == 200) == allowed, "\(forwarded): \(answer.status) \(answer.text)")
            }
        }
    }
}
