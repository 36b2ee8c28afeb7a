import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherJOSE
import TetherTesting

/// `projects/{projectId}:createSessionCookie` on the wire (firebase-admin's `create_session_cookie`).
@Suite("Firebase session cookies")
struct FirebaseSessionCookieTests {
    /// `POST <v1>/projects/<project>:createSessionCookie`, as firebase-admin sends it.
    private func createCookie(
        _ firebase: FirebaseApp, _ body: JSONValue, project: String = FirebaseApp.projectID, admin: String? = "owner"
    ) async throws -> FirebaseAnswer {
        var fields: [(key: String, value: String)] = [("Content-Type", "application/json")]
        if let admin { fields.append(("Authorization", "Bearer \(admin)")) }
        return FirebaseAnswer(try await firebase.app.client.send(
            "POST", "\(FirebaseApp.v1)/projects/\(project):createSessionCookie", fields: fields, body: Array(try JSONEncoder().encode(body))))
    }

    @Test func aCookieCarriesTheTokensClaimsUnderTheSessionIssuerSignedByTheProjectsKey() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "cookie@example.com", "password": "cookie's password"]))
            let idToken = try #require(signUp.string("idToken"))
            let localId = try #require(signUp.string("localId"))
            let jwks = try await firebase.app.client.get("/.well-known/firebase-jwks.json")
            let keys = try JWKSet(parsing: jwks.body, allowsSymmetricKeys: false)
            let verifier = JWTVerifier(configuration: .init(
                allowedAlgorithms: [.rs256], issuer: "https://session.firebase.google.com/\(FirebaseApp.projectID)",
                audiences: [FirebaseApp.projectID]))
            for (asked, lifetime) in [(JSONValue.int(3600), 3600), (.string("600"), 600), (.null, 1_209_600), (.int(0), 1_209_600)] {
                let answer = try await createCookie(firebase, .object(["idToken": .string(idToken), "validDuration": asked]))
                #expect(answer.status == 200, "\(answer.text)")
                #expect(answer.body.keys.sorted() == ["sessionCookie"])
                let cookie = try verifier.verify(try #require(answer.string("sessionCookie")), keys: keys).claims
                let issuedAt = try #require(cookie.issuedAt), expiresAt = try #require(cookie.expiresAt)
                #expect(expiresAt.timeIntervalSince(issuedAt) == TimeInterval(lifetime), "validDuration \(asked)")
                #expect(abs(issuedAt.timeIntervalSinceNow) < 5)
                #expect(cookie.subject == localId && cookie["user_id"]?.stringValue == localId)
                #expect(cookie["email"]?.stringValue == "cookie@example.com")
                #expect(cookie["firebase"]?.objectValue?["sign_in_provider"]?.stringValue == "password")
                #expect(cookie["auth_time"] != nil)
            }
        }
    }

    @Test func aBadDurationOrTokenIsRefusedAndOnlyAnAdminMayAsk() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "crumb@example.com", "password": "crumb's password"]))
            let idToken = try #require(signUp.string("idToken"))
            let localId = try #require(signUp.string("localId"))
            for duration in [JSONValue.int(299), .int(1_209_601), .int(-5), .string("an hour"), .double(3600.5), .bool(true)] {
                let answer = try await createCookie(firebase, .object(["idToken": .string(idToken), "validDuration": duration]))
                #expect(answer.status == 400 && answer.errorMessage?.hasPrefix("INVALID_DURATION") == true, "\(duration): \(answer.text)")
            }
            #expect(try await createCookie(firebase, .object(["validDuration": 3600])).errorMessage == "MISSING_ID_TOKEN")
            let forged = idToken.dropLast(4) + "AAAA"
            #expect(try await createCookie(firebase, .object(["idToken": .string(String(forged))])).errorMessage == "INVALID_ID_TOKEN")
            #expect(try await createCookie(firebase, .object(["idToken": .string(idToken)]), admin: nil).status == 401)
            let someone = try await createCookie(firebase, .object(["idToken": .string(idToken)]), admin: "someone")
            #expect(someone.status == 401)
            // The emulator's form of a refused header (WIRE-FACTS §0).
            guard case .object(let error)? = someone.body["error"], case .array(let errors)? = error["errors"] else {
                Issue.record("\(someone.text)"); return
            }
            #expect(errors == [.object([
                "message": "Invalid Credentials", "reason": "authError", "location": "Authorization", "locationType": "header"])])
            #expect(try await createCookie(firebase, .object(["idToken": .string(idToken)]), project: "other").status == 404)
            // A client's call with its API key alone is not enough, as in Firebase.
            let client = try await firebase.call("projects/\(FirebaseApp.projectID):createSessionCookie", .object(["idToken": .string(idToken)]))
            #expect(client.status == 401, "\(client.text)")

            // A revoked token makes no cookie; nor does a disabled user's.
            try await Task.sleep(for: .seconds(1.1)) // validSince is whole seconds: revoke in a later second than the token's iat
            let revoke = try await firebase.admin(
                "accounts:update", .object(["localId": .string(localId), "validSince": .int(Int(Date().timeIntervalSince1970))]))
            #expect(revoke.status == 200)
            #expect(try await createCookie(firebase, .object(["idToken": .string(idToken)])).errorMessage == "TOKEN_EXPIRED")
            let again = try await firebase.call("accounts:signInWithPassword", .object(["email": "crumb@example.com", "password": "crumb's password"]))
            let fresh = try #require(again.string("idToken"))
            #expect(try await createCookie(firebase, .object(["idToken": .string(fresh)])).status == 200)
            #expect(try await firebase.admin("accounts:update", .object(["localId": .string(localId), "disableUser": true])).status == 200)
            #expect(try await createCookie(firebase, .object(["idToken": .string(fresh)])).errorMessage == "USER_DISABLED")
        }
    }
}
