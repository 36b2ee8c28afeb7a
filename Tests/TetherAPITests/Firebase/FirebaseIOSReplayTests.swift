import Foundation
import Testing
import TetherCore
import TetherTesting

/// The Firebase iOS SDK's own requests, in the order an app makes them (WIRE-FACTS §6): v3 names, JSON
/// bodies with the keys it sends, and each answer read with the keys it requires.
@Suite("Firebase surface: the iOS SDK's requests replayed")
struct FirebaseIOSReplayTests {
    private func v3(_ firebase: FirebaseApp, _ method: String, _ body: JSONValue) async throws -> FirebaseAnswer {
        FirebaseAnswer(try await firebase.app.client.send(
            "POST", "/www.googleapis.com/identitytoolkit/v3/relyingparty/\(method)?key=AIzaFakeKey",
            fields: [("Content-Type", "application/json"), ("X-Client-Version", "iOS/FirebaseSDK/12.19.0/FirebaseCore-iOS")],
            body: Array(try JSONEncoder().encode(body))))
    }

    /// What `retrieveUser` needs of every sign-in: both tokens and a string `expiresIn`.
    private func expectSignedIn(_ answer: FirebaseAnswer, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(answer.status == 200, "\(answer.text)", sourceLocation: sourceLocation)
        #expect(answer.string("idToken") != nil && answer.string("refreshToken") != nil, "\(answer.text)", sourceLocation: sourceLocation)
        #expect(answer.body["expiresIn"] == "3600", sourceLocation: sourceLocation)
    }

    @Test func anAppsWholeSessionAsTheIOSSDKSendsIt() async throws {
        try await FirebaseApp.run { firebase in
            // 1. signupNewUser, anonymous.
            let anonymous = try await v3(firebase, "signupNewUser", .object(["clientType": "CLIENT_TYPE_IOS", "returnSecureToken": true]))
            expectSignedIn(anonymous)
            var idToken = try #require(anonymous.string("idToken"))

            // 2. verifyAssertion linking Apple to it (idToken present, autoCreate true).
            let apple = try await firebase.appleToken("ios-apple", email: "ios@privaterelay.appleid.com", nonce: "n-1")
            let linked = try await v3(firebase, "verifyAssertion", .object([
                "requestUri": "http://localhost", "postBody": .string("providerId=apple.com&id_token=\(apple)&nonce=n-1"),
                "returnSecureToken": true, "returnIdpCredential": true, "autoCreate": true, "idToken": .string(idToken),
            ]))
            expectSignedIn(linked)
            #expect(linked.string("providerId") == "apple.com")
            idToken = try #require(linked.string("idToken"))

            // 3. verifyAssertion signing in with Facebook Limited Login and a raw nonce: a new user.
            let limited = try await firebase.app.idp.post(
                "/dev-idp/facebook/limited-token", json: JSONValue.object(["sub": "ios-fb", "rawNonce": "n-2"]))
            let limitedToken = try #require(try limited.decodeJSON([String: String].self)["authenticationToken"])
            let facebook = try await v3(firebase, "verifyAssertion", .object([
                "requestUri": "http://localhost", "postBody": .string("providerId=facebook.com&id_token=\(limitedToken)&nonce=n-2"),
                "returnSecureToken": true, "returnIdpCredential": true, "autoCreate": true,
            ]))
            expectSignedIn(facebook)
            #expect(facebook.body["isNewUser"] == .bool(true))

            // 4. getAccountInfo of the first user: exactly one user, createdAt in ms as a string, providers with providerId.
            let info = try await v3(firebase, "getAccountInfo", .object(["idToken": .string(idToken)]))
            #expect(info.users.count == 1)
            let user = try #require(info.users.first)
            #expect(user["localId"] == anonymous.body["localId"])
            guard case .string(let createdAt)? = user["createdAt"], case .array(let providers)? = user["providerUserInfo"] else {
                Issue.record("\(info.text)"); return
            }
            #expect(Int64(createdAt) != nil)
            #expect(providers.count == 1)

            // 5. setAccountInfo with deleteProvider, then an email/password link through signupNewUser with the idToken.
            let upgraded = try await v3(firebase, "signupNewUser", .object([
                "email": "ios@example.com", "password": "ios password 1", "idToken": .string(idToken), "clientType": "CLIENT_TYPE_IOS",
                "returnSecureToken": true,
            ]))
            expectSignedIn(upgraded)
            #expect(upgraded.string("localId") == anonymous.string("localId"))
            idToken = try #require(upgraded.string("idToken"))
            let unlinked = try await v3(firebase, "setAccountInfo", .object([
                "idToken": .string(idToken), "deleteProvider": ["apple.com"], "returnSecureToken": true,
            ]))
            #expect(unlinked.status == 200, "\(unlinked.text)")
            #expect(unlinked.body["providerUserInfo"] == .array([.object([
                "providerId": "password", "rawId": "ios@example.com", "federatedId": "ios@example.com", "email": "ios@example.com",
            ])]))
            #expect(unlinked.string("passwordHash") != nil, "the SDK reads a non-empty passwordHash as 'has a password'")

            // 6. secureToken refresh: a JSON body with camelCase keys; snake_case answers, access_token required.
            let refreshed = FirebaseAnswer(try await firebase.app.client.post(
                "/securetoken.googleapis.com/v1/token?key=AIzaFakeKey",
                json: ["grantType": "refresh_token", "refreshToken": try #require(upgraded.string("refreshToken"))]))
            #expect(refreshed.status == 200)
            #expect(refreshed.string("access_token")?.isEmpty == false && refreshed.body["expires_in"] == "3600")

            // 7. verifyAssertion of an identity linked elsewhere (the Facebook user's), with and without returnIdpCredential.
            let again = try await firebase.app.idp.post(
                "/dev-idp/facebook/limited-token", json: JSONValue.object(["sub": "ios-fb", "rawNonce": "n-3"]))
            let againToken = try #require(try again.decodeJSON([String: String].self)["authenticationToken"])
            let soft = try await v3(firebase, "verifyAssertion", .object([
                "requestUri": "http://localhost", "postBody": .string("providerId=facebook.com&id_token=\(againToken)&nonce=n-3"),
                "returnSecureToken": true, "returnIdpCredential": true, "autoCreate": true, "idToken": .string(refreshed.string("access_token")!),
            ]))
            #expect(soft.status == 200)
            #expect(soft.string("errorMessage") == "FEDERATED_USER_ID_ALREADY_LINKED")
            #expect(soft.string("oauthIdToken") == againToken, "the SDK builds the updated credential from it")
            let third = try await firebase.app.idp.post(
                "/dev-idp/facebook/limited-token", json: JSONValue.object(["sub": "ios-fb", "rawNonce": "n-4"]))
            let thirdToken = try #require(try third.decodeJSON([String: String].self)["authenticationToken"])
            let hard = try await v3(firebase, "verifyAssertion", .object([
                "requestUri": "http://localhost", "postBody": .string("providerId=facebook.com&id_token=\(thirdToken)&nonce=n-4"),
                "returnSecureToken": true, "autoCreate": true, "idToken": .string(refreshed.string("access_token")!),
            ]))
            #expect(hard.status == 400)
            #expect(hard.errorMessage == "FEDERATED_USER_ID_ALREADY_LINKED")
        }
    }
}
