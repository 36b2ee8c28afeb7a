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
            // The nonce went to the pending token: the token posted again with it takes nothing (a review took the
            // credential twice, once directly and once with the pending token, after the nonce's record expired).
            let withNonce = try await link("providerId=apple.com&id_token=\(apple)&nonce=nonce-ann", pendingToken: nil)
            #expect(withNonce.errorMessage == "MISSING_OR_INVALID_NONCE : the nonce was used already: sign in again with a new one", "\(withNonce.text)")
            let kept: Date = try await firebase.app.admin.query(
                "SELECT max(expires_at) AS until FROM used_nonces WHERE scope = 'apple'")[0].decode("until")
            #expect(kept.timeIntervalSinceNow > 3500, "kept as long as the pending token lives: \(kept)")

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
            // It stood for the credential once: the nonce is spent again, for good.
            let again = try await link("providerId=apple.com&id_token=\(apple)", pendingToken: pending)
            #expect(again.errorMessage == "INVALID_PENDING_TOKEN : The pending token was used already: sign in with the provider again.", "\(again.text)")
            let direct = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(apple)&nonce=nonce-ann")
            #expect(direct.errorMessage?.hasPrefix("MISSING_OR_INVALID_NONCE") == true, "\(direct.text)")
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

            // A token without a nonce gets one too (Apple's expire in ten minutes), taken once all the same.
            let plain = try await firebase.signInWithIdp(
                "providerId=apple.com&id_token=\(try await firebase.appleToken("apple-js"))", idToken: guest)
            #expect(plain.string("errorMessage") == "FEDERATED_USER_ID_ALREADY_LINKED", "\(plain.text)")
            let plainPending = try #require(plain.string("pendingToken"), "\(plain.text)")
            func redeem() async throws -> FirebaseAnswer {
                try await firebase.call("accounts:signInWithIdp", .object(["pendingToken": .string(plainPending), "requestUri": "http://localhost"]))
            }
            #expect(try await redeem().string("localId") == holder)
            #expect(try await redeem().errorMessage?.hasPrefix("INVALID_PENDING_TOKEN") == true)
        }
    }

    /// What the SDKs cannot post again stays with the pending token: Apple's authorization code (redeemed when the
    /// token was refused: its grant is stored with the link, and revoked when the user goes) and the name Apple gives
    /// the app once; and the token may have expired since, as Apple's do ten minutes after they were issued.
    @Test func aPendingTokenKeepsTheGrantAndNameAndOutlivesItsIdPToken() async throws {
        try await FirebaseApp.run { firebase in
            let owner = try await firebase.call("accounts:signUp", .object(["email": "cy@example.com", "password": "cy's password"]))
            let ownerId = try #require(owner.string("localId"))
            let code = try #require(try await firebase.app.idp.post("/dev-idp/apple/authorization-code", json: ["sub": "apple-cy"])
                .decodeJSON([String: String].self)["authorizationCode"])
            // Issued 655 s ago: Apple's are taken up to 600 s old, with a minute's leeway.
            let issued = Date().timeIntervalSince1970 - 655
            let apple = try firebase.app.token("identityToken", of: try await firebase.app.apple("apple-cy", email: "cy@example.com", extra: [
                "rawNonce": "nonce-cy", "iat": .double(issued.rounded(.down)), "exp": .double(issued + 900),
            ]))
            let name = #"{"name":{"firstName":"Cy","lastName":"Young"}}"#
            let refused = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(apple)&nonce=nonce-cy&code=\(code)&user=\(name)")
            #expect(refused.body["needConfirmation"] == .bool(true) && refused.string("displayName") == "Cy Young", "\(refused.text)")
            let pending = try #require(refused.string("pendingToken"), "\(refused.text)")
            try await Task.sleep(for: .seconds(6))
            let tooOld = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(apple)&nonce=nonce-cy")
            #expect(tooOld.errorMessage?.hasPrefix("INVALID_IDP_RESPONSE") == true, "the token itself is too old now: \(tooOld.text)")

            let password = try await firebase.call("accounts:signInWithPassword", .object([
                "email": "cy@example.com", "password": "cy's password", "returnSecureToken": true,
            ]))
            let linked = try await firebase.call("accounts:signInWithIdp", .object([
                "postBody": .string("providerId=apple.com&id_token=\(apple)"), "pendingToken": .string(pending), "requestUri": "http://localhost",
                "returnSecureToken": true, "returnIdpCredential": true, "idToken": .string(try #require(password.string("idToken"))),
            ]))
            #expect(linked.status == 200 && linked.string("localId") == ownerId, "\(linked.text)")
            #expect(try await firebase.app.eventCount("ProviderTokenStored", userId: ownerId) == 1, "the code's grant is stored")
            let lookup = try await firebase.call("accounts:lookup", .object(["idToken": .string(try #require(linked.string("idToken")))]))
            guard case .array(let providers)? = lookup.users.first?["providerUserInfo"] else { Issue.record("no providers: \(lookup.text)"); return }
            #expect(providers.contains { $0 == .object([
                "providerId": "apple.com", "rawId": "apple-cy", "federatedId": "apple-cy", "email": "cy@example.com", "displayName": "Cy Young",
            ]) }, "\(providers)")
        }
    }

    /// A redemption skips the IdP's verification, not the limits: an address refused lately is refused as a
    /// verification would be (a review linked with a pending token from an address that was answered 429).
    @Test func aPendingTokenIsRefusedWhereItsAddressIsThrottled() async throws {
        try await FirebaseApp.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "2"]) { firebase in
            _ = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(try await firebase.appleToken("apple-t", nonce: "n-1"))&nonce=n-1")
            let guest = try #require(try await firebase.call("accounts:signUp", .object([:])).string("idToken"))
            let inUse = try await firebase.signInWithIdp(
                "providerId=apple.com&id_token=\(try await firebase.appleToken("apple-t", nonce: "n-2"))&nonce=n-2", idToken: guest)
            let pending = try #require(inUse.string("pendingToken"), "\(inUse.text)")
            var answers: [String] = []
            for _ in 0..<4 {
                let forged = try firebase.app.token("identityToken", of: try await firebase.app.apple("apple-forged", extra: ["forge": "bad-signature"]))
                answers.append(try await firebase.signInWithIdp("providerId=apple.com&id_token=\(forged)").errorMessage ?? "")
            }
            #expect(answers.last?.hasPrefix("TOO_MANY_ATTEMPTS_TRY_LATER") == true, "\(answers)")
            let redeemed = try await firebase.call("accounts:signInWithIdp", .object([
                "pendingToken": .string(pending), "requestUri": "http://localhost", "idToken": .string(guest),
            ]))
            #expect(redeemed.errorMessage?.hasPrefix("TOO_MANY_ATTEMPTS_TRY_LATER") == true, "\(redeemed.text)")
        }
    }

    /// A pending token stands for its credential for an hour, under the key it was sealed with.
    @Test func aPendingTokenExpiresAndOpensOnlyUnderItsKey() throws {
        let key = SecureRandom.bytes(count: 32), now = Date(timeIntervalSince1970: 1_796_000_000)
        var identity = ExternalIdentity(provider: "apple", uid: "apple-1", email: "a@example.com", isEmailVerified: true, displayName: "A")
        identity.spentNonce = UsedNonce(scope: "apple", hash: "ab", expiresAt: now.addingTimeInterval(600))
        identity.providerGrant = ProviderGrant(kind: "refresh_token", token: "r.1", clientId: "app")
        let pending = FirebasePendingTokens.Pending(
            providerId: "apple.com", echoed: ["oauthIdToken": "a.b.c"], identity: identity, expires: Int(now.timeIntervalSince1970) + 3600)
        let token = try FirebasePendingTokens.seal(pending, key: key)
        #expect(try FirebasePendingTokens.open(token, now: now.addingTimeInterval(3599), key: key) == pending)
        #expect(!token.contains("r.1") && !token.contains("apple-1"))
        #expect(throws: FirebasePendingTokens.invalid) { try FirebasePendingTokens.open(token, now: now.addingTimeInterval(3600), key: key) }
        #expect(throws: FirebasePendingTokens.invalid) { try FirebasePendingTokens.open(token, now: now, key: SecureRandom.bytes(count: 32)) }
        // Its single use: an id of the credential, the same for every pending token of it, kept as long as it lives.
        let use = FirebasePendingTokens.singleUse(of: pending)
        #expect(use.scope == "firebase-pending-token" && use.expiresAt == now.addingTimeInterval(3600))
        var reissued = pending
        reissued.echoed["oauthAccessToken"] = "another"
        #expect(FirebasePendingTokens.singleUse(of: reissued).hash == use.hash)
        var other = pending
        other.identity.spentNonce?.hash = "cd"
        #expect(FirebasePendingTokens.singleUse(of: other).hash != use.hash)
    }
}
