import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherTesting

/// A token with a nonce is spent when it is verified. A request refused after that wrote nothing with it, and its
/// answer often tells the client to present the same token again (link it once signed in, send it alone): the
/// nonce is given back, or that retry is refused as a replay.
@Suite("Nonces of refused requests are given back")
struct NonceGiveBackTests {
    private static let surfaces = ["TETHER_PARSE_APP_ID": ParseApp.appID, "TETHER_FIREBASE_PROJECT_ID": FirebaseApp.projectID]

    private func fields(_ credential: Credential) throws -> (token: String, rawNonce: String) {
        guard case .object(let members) = credential.credential, case .string(let token)? = members["identityToken"],
              case .string(let rawNonce)? = members["rawNonce"] else { throw HarnessError("not an Apple credential with a nonce") }
        return (token, rawNonce)
    }

    @Test func v1AccountExistsThenLinkTheSameToken() async throws {
        try await DevService.run { app in
            let owner = try await app.signedIn(try await app.google("google-katherine", email: "katherine@example.com"))
            let apple = try await app.appleWithNonce("apple-katherine", email: "katherine@example.com")
            let refused = try await app.signIn(apple)
            #expect(refused.status == 409 && refused.bodyText.contains("account_exists_with_different_credential"))
            // What the answer says: sign in with the account's method, then link this credential.
            let linked = try await app.link(apple, to: owner.session.accessToken)
            #expect(linked.status == 200, "\(linked.bodyText)")
            #expect(try await app.link(apple, to: owner.session.accessToken).status == 401, "spent once it was used")
        }
    }

    @Test func parseARequestRefusedForAnotherEntryOrAWrongIdLeavesTheTokenUsable() async throws {
        try await ParseApp.run(settings: Self.surfaces) { parse in
            let apple = try fields(try await parse.app.appleWithNonce("apple-parse-nonce"))
            let appleEntry = ParseApp.strings(["id": "apple-parse-nonce", "token": apple.token, "nonce": apple.rawNonce])
            let withBadGoogle = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "apple": appleEntry, "google": ParseApp.strings(["id": "x", "id_token": "bad"]),
            ])]))
            #expect(withBadGoogle.status == 404 && withBadGoogle.text.contains("101"), "\(withBadGoogle.text)")
            let wrongId = try await parse.logIn("apple", ["id": "someone-else", "token": apple.token, "nonce": apple.rawNonce])
            #expect(wrongId.status == 404, "\(wrongId.text)")
            let alone = try await parse.send("POST", "/users", json: .object(["authData": .object(["apple": appleEntry])]))
            #expect(alone.status == 201, "\(alone.text)")
        }
    }

    /// The sign-in of a log-in's first identity gives back only its own nonce when it is refused: the other entries,
    /// which no command took yet, are given back by the surface.
    @Test func parseALogInRefusedAtItsSignInLeavesItsOtherTokensUsable() async throws {
        try await ParseApp.run(settings: Self.surfaces) { parse in
            _ = try await parse.app.signedIn(try await parse.app.apple("apple-holder", email: "held@example.com"))
            let rawNonce = UUID().uuidString
            let minted = try await parse.app.idp.post("/dev-idp/facebook/limited-token", json: ["sub": "fb-ll-extra", "rawNonce": rawNonce])
            let limited = try #require(try minted.decodeJSON([String: String].self)["authenticationToken"])
            let facebookEntry = ParseApp.strings(["id": "fb-ll-extra", "token": limited, "nonce": rawNonce])
            let refused = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-newcomer", "token": try await parse.appleToken("apple-newcomer", email: "held@example.com")]),
                "facebook": facebookEntry,
            ])]))
            #expect(refused.status == 400 && refused.text.contains("203"), "\(refused.text)")
            let alone = try await parse.send("POST", "/users", json: .object(["authData": .object(["facebook": facebookEntry])]))
            #expect(alone.status == 201, "\(alone.text)")
        }
    }

    /// A password beside authData takes a sign-up place before anything is written: refused, it leaves no new user.
    @Test func parseAPasswordRefusedByTheLimitsLeavesNoUserBehind() async throws {
        try await ParseApp.run(settings: Self.surfaces.merging(["TETHER_SIGN_IN_FAILURE_LIMIT": "1"]) { $1 }) { parse in
            #expect(try await parse.app.client.post("/v1/sign-up", json: ["email": "first@example.com", "password": "a long password"]).status == 201)
            let before = try await parse.accountEvents()
            let apple = try fields(try await parse.app.appleWithNonce("apple-with-password"))
            let appleEntry = ParseApp.strings(["id": "apple-with-password", "token": apple.token, "nonce": apple.rawNonce])
            let refused = try await parse.send("POST", "/users", json: .object([
                "authData": .object(["apple": appleEntry]), "username": "second@example.com", "password": "a long password",
            ]))
            #expect(refused.status == 429, "\(refused.text)")
            #expect(try await parse.accountEvents() == before, "no user, no session")
            let alone = try await parse.send("POST", "/users", json: .object(["authData": .object(["apple": appleEntry])]))
            #expect(alone.status == 201, "the token is still good: \(alone.text)")
        }
    }

    @Test func firebaseABadIdTokenIsRefusedBeforeTheCredentialIsSpent() async throws {
        try await FirebaseApp.run(settings: Self.surfaces) { firebase in
            let apple = try fields(try await firebase.app.appleWithNonce("apple-firebase-nonce"))
            let postBody = "providerId=apple.com&id_token=\(apple.token)&nonce=\(apple.rawNonce)"
            func signInWithIdp(idToken: String) async throws -> FirebaseAnswer {
                try await firebase.call("accounts:signInWithIdp", .object([
                    "postBody": .string(postBody), "requestUri": "http://localhost", "returnSecureToken": true, "idToken": .string(idToken),
                ]))
            }
            let garbage = try await signInWithIdp(idToken: "garbage")
            #expect(garbage.status == 400 && garbage.text.contains("INVALID_ID_TOKEN"), "\(garbage.text)")
            let guest = try #require(try await firebase.call("accounts:signUp", .object([:])).string("idToken"))
            let linked = try await signInWithIdp(idToken: guest)
            #expect(linked.status == 200 && linked.string("federatedId") == "apple-firebase-nonce", "\(linked.text)")
        }
    }
}
