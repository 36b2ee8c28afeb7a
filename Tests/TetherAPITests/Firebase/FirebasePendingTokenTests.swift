import Foundation
import Testing
@testable import TetherAPI
import TetherCore
import TetherCrypto

/// `pendingToken`: the credential an `accounts:signInWithIdp` refusal hands back for the SDKs to offer again. The
/// SDKs post an Apple (or other) ID token's retry without its raw nonce, so without one the retry was
/// MISSING_OR_INVALID_NONCE and `accountExistsWithDifferentCredential` / `credentialAlreadyInUse` led nowhere.
@Suite("Firebase surface: pending tokens")
struct FirebasePendingTokenTests {
    /// The iOS SDK: `needConfirmation` for an Apple address a password account holds; the app signs in with the
    /// password and links the updated credential (the token again, no nonce, the pending token beside it).
    @Test func theIOSSDKLinksARefusedAppleCredentialWithItsPendingToken() async throws {
        try await FirebaseApp.run { firebase in
            let owner = try await firebase.call("accounts:signUp", .object(["email": "ann@example.com", "password": "ann's password"]))
            let apple = try await firebase.appleToken("apple-ann", email: "ann@example.com", nonce: "nonce-ann")
            let refused = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(apple)&nonce=nonce-ann")
            #expect(refused.body["needConfirmation"] == .bool(true), "\(refused.text)")
            #expect(refused.string("oauthIdToken") == apple)
            let pending = try #require(refused.string("pendingToken"), "\(refused.text)")
            #expect(pending.hasPrefix("tpt1.") && !pending.contains("nonce-ann"))

            let password = try await firebase.call("accounts:signInWithPassword", .object([
                "email": "ann@example.com", "password": "ann's password", "returnSecureToken": true,
            ]))
            let idToken = try #require(password.string("idToken"))
            func link(_ postBody: String, pendingToken: String?) async throws -> FirebaseAnswer {
                var body: [String: JSONValue] = [
                    "postBody": .string(postBody), "requestUri": "http://localhost", "returnSecureToken": true,
                    "returnIdpCredential": true, "autoCreate": true, "idToken": .string(idToken),
                ]
                if let pendingToken { body["pendingToken"] = .string(pendingToken) }
                return try await firebase.call("accounts:signInWithIdp", .object(body))
            }
            // What the SDK posted before pending tokens: the token without its nonce.
            let bare = try await link("providerId=apple.com&id_token=\(apple)", pendingToken: nil)
            #expect(bare.errorMessage?.hasPrefix("MISSING_OR_INVALID_NONCE") == true, "\(bare.text)")

            // Beside a pending token, only the credential it stands for is taken; nothing is written otherwise.
            let events = try await firebase.app.totalEvents()
            let other = try await firebase.appleToken("apple-other", email: "ann@example.com", nonce: "nonce-other")
            var tampered = Array(pending.utf8)
            tampered[tampered.count / 2] = tampered[tampered.count / 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            for (postBody, token) in [
                ("providerId=apple.com&id_token=\(other)", pending),
                ("providerId=apple.com&id_token=\(other)&nonce=nonce-other", pending),
                ("providerId=apple.com&id_token=\(apple)&nonce=another-nonce", pending),
                ("providerId=google.com&id_token=\(apple)", pending),
                ("providerId=apple.com&id_token=\(apple)", String(decoding: tampered, as: UTF8.self)),
                ("providerId=apple.com&id_token=\(apple)", "tpt1.garbage"),
            ] {
                let answer = try await link(postBody, pendingToken: token)
                #expect(answer.status == 400)
                #expect(answer.errorMessage == "INVALID_PENDING_TOKEN : The pending token is not valid: sign in with the provider again.",
                        "\(postBody): \(answer.text)")
            }
            #expect(try await firebase.app.totalEvents() == events)

            let linked = try await link("providerId=apple.com&id_token=\(apple)", pendingToken: pending)
            #expect(linked.status == 200, "\(linked.text)")
            #expect(linked.string("localId") == owner.string("localId"))
            #expect(linked.string("federatedId") == "apple-ann" && linked.string("idToken") != nil)
            // The nonce is spent now: the pending token does not bring it back.
            let again = try await link("providerId=apple.com&id_token=\(apple)", pendingToken: pending)
            #expect(again.errorMessage?.hasPrefix("MISSING_OR_INVALID_NONCE") == true, "\(again.text)")
        }
    }

    /// The JS SDK: `credentialAlreadyInUse` for an Apple ID linked to someone else, then `signInWithCredential` of
    /// the updated credential, which posts the pending token alone (no `postBody`).
    @Test func theJSSDKSignsInWithAPendingTokenAlone() async throws {
        try await FirebaseApp.run { firebase in
            let first = try await firebase.signInWithIdp(
                "providerId=apple.com&id_token=\(try await firebase.appleToken("apple-js", nonce: "nonce-1"))&nonce=nonce-1")
            let holder = try #require(first.string("localId"), "\(first.text)")
            let guest = try #require(try await firebase.call("accounts:signUp", .object([:])).string("idToken"))
            let again = try await firebase.appleToken("apple-js", nonce: "nonce-2")
            let inUse = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(again)&nonce=nonce-2", idToken: guest)
            #expect(inUse.string("errorMessage") == "FEDERATED_USER_ID_ALREADY_LINKED", "\(inUse.text)")
            let pending = try #require(inUse.string("pendingToken"), "\(inUse.text)")

            let signedIn = try await firebase.call("accounts:signInWithIdp", .object([
                "pendingToken": .string(pending), "requestUri": "http://localhost", "returnSecureToken": true,
            ]))
            #expect(signedIn.status == 200, "\(signedIn.text)")
            #expect(signedIn.string("localId") == holder && signedIn.string("refreshToken") != nil)
            #expect(signedIn.string("oauthIdToken") == again)

            // A token without a nonce needs no pending token; none is given.
            let plain = try await firebase.signInWithIdp(
                "providerId=apple.com&id_token=\(try await firebase.appleToken("apple-js"))", idToken: guest)
            #expect(plain.string("errorMessage") == "FEDERATED_USER_ID_ALREADY_LINKED" && plain.body["pendingToken"] == nil, "\(plain.text)")
        }
    }

    /// A pending token stands for its credential for an hour, under the key it was sealed with.
    @Test func aPendingTokenExpiresAndOpensOnlyUnderItsKey() throws {
        let key = SecureRandom.bytes(count: 32), now = Date(timeIntervalSince1970: 1_796_000_000)
        let fields = ["providerId": "apple.com", "id_token": "a.b.c", "nonce": "raw", "user": "{}"]
        let token = try FirebasePendingTokens.seal(fields, now: now, key: key)
        #expect(try FirebasePendingTokens.open(token, now: now.addingTimeInterval(3599), key: key)
                == ["providerId": "apple.com", "id_token": "a.b.c", "nonce": "raw"])
        #expect(throws: FirebasePendingTokens.invalid) { try FirebasePendingTokens.open(token, now: now.addingTimeInterval(3600), key: key) }
        #expect(throws: FirebasePendingTokens.invalid) { try FirebasePendingTokens.open(token, now: now, key: SecureRandom.bytes(count: 32)) }
    }
}
