import Foundation
import Testing
import TetherCore
import TetherTesting

/// A request body that names a member twice is refused on every surface: parsers disagree on which of the
/// two counts, so a proxy in front could read one request where Tether acts on another.
@Suite("Duplicate member names in request bodies")
struct DuplicateMemberTests {
    @Test func aBodyNamingAMemberTwiceIsRefusedOnEverySurfaceAndWritesNothing() async throws {
        try await DevService.run(settings: ["TETHER_PARSE_APP_ID": "dup-app", "TETHER_FIREBASE_PROJECT_ID": "demo-dup"]) { app in
            let before = try await app.totalEvents()
            let json: KeyValuePairs<String, String> = ["Content-Type": "application/json"]
            let v1 = try await app.client.send(
                "POST", "/v1/sign-in", fields: Array(json), body: Array(#"{"provider": "anonymous", "provider": "apple"}"#.utf8))
            #expect(v1.status == 400, "\(v1.bodyText)")
            #expect(v1.bodyText.contains("given twice"), "\(v1.bodyText)")
            let parse = try await app.client.send(
                "POST", "/parse/users", fields: [("Content-Type", "application/json"), ("X-Parse-Application-Id", "dup-app")],
                body: Array(#"{"username": "x@example.com", "password": "a long password", "username": "y@example.com"}"#.utf8))
            #expect(parse.status == 400 && parse.bodyText.contains(#""code":107"#), "\(parse.bodyText)")
            let firebase = try await app.client.send(
                "POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", fields: Array(json),
                body: Array(#"{"email": "x@example.com", "password": "a long password", "email": "y@example.com"}"#.utf8))
            #expect(firebase.status == 400 && firebase.bodyText.contains("names a member twice"), "\(firebase.bodyText)")
            // Firebase reads snake_case as camelCase: two spellings of one name are a name given twice.
            let spellings = try await app.client.send(
                "POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", fields: Array(json),
                body: Array(#"{"email": "x@example.com", "password": "a long password", "return_secure_token": true, "returnSecureToken": false}"#.utf8))
            #expect(spellings.status == 400 && spellings.bodyText.contains("twice"), "\(spellings.bodyText)")
            let form = try await app.client.send(
                "POST", "/securetoken.googleapis.com/v1/token?key=k", fields: [("Content-Type", "application/x-www-form-urlencoded")],
                body: Array("grant_type=refresh_token&refresh_token=a&refresh_token=b".utf8))
            #expect(form.status == 400 && form.bodyText.contains("twice"), "\(form.bodyText)")
            #expect(try await app.totalEvents() == before)
            // The same members once each are taken.
            let once = try await app.client.send("POST", "/v1/sign-in", fields: Array(json), body: Array(#"{"provider": "anonymous"}"#.utf8))
            #expect(once.status == 201, "\(once.bodyText)")
        }
    }
}
