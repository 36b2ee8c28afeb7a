import Foundation
import Testing
@testable import TetherAPI
import TetherCore
import TetherTesting

/// The tokens a Firebase link answers with continue the caller's sign-in. They started a new one: an ID token too
/// old to withdraw a second factor linked the thief's own Facebook, and the tokens that came back were a fresh
/// sign-in without the factor, which then withdrew it and unlinked the owner's way in.
@Suite("Firebase surface: a link continues the caller's sign-in")
struct FirebaseLinkReissueTests {
    /// A session of `userId` signed in ten minutes ago with `provider` (and `factor` as its second factor), opened
    /// as the Firebase surface opens one, and an ID token of it: what a thief holding that token has.
    private func oldSession(
        _ firebase: FirebaseApp, of userId: UUID, provider: String, signInProvider: String, factor: UUID?, secondsAgo: TimeInterval = 600
    ) async throws -> (idToken: String, authTime: Date) {
        let signedInAt = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down) - secondsAgo)
        let methods = AccountCommands.authenticationMethods(provider: provider) + (factor == nil ? [] : [MFAMethod.totp.amr, "mfa"])
        var (session, _) = FirebaseTokenFormat().newSession(amr: methods, jkt: nil)
        session.authTime = signedInAt
        session.secondFactorId = factor
        let opened = session
        let account = try await firebase.app.service.accounts.change(userId, CommandContext()) { state in
            try state.reissue(opened, provider: provider, now: Date())
        }
        let tokens = try #require(firebase.app.service.firebaseIDTokens)
        let idToken = try await tokens.issue(
            account, localId: userId.uuidString.lowercased(), sessionId: session.id, authTime: signedInAt, signInProvider: signInProvider,
            secondFactor: factor == nil ? nil : "totp", secondFactorId: factor)
        return (idToken, signedInAt)
    }

    @Test func aLinkWithAnOldTokenIsNoFreshSignInAndKeepsTheSecondFactor() async throws {
        try await FirebaseApp.run { firebase in
            let owner = try await firebase.app.signedIn(try await firebase.app.apple("apple-link-thief-victim", email: "victim@privaterelay.appleid.com"))
            let (factorId, _) = try await firebase.app.enrolTOTP(accessToken: owner.session.accessToken)
            let userId = try #require(UUID(uuidString: owner.user.id))
            let stolen = try await oldSession(firebase, of: userId, provider: "apple", signInProvider: "apple.com", factor: UUID(uuidString: factorId))

            let linked = try await firebase.signInWithIdp(
                "providerId=facebook.com&access_token=\(try await firebase.facebookToken("fb-thief"))", idToken: stolen.idToken)
            #expect(linked.status == 200, "\(linked.text)")
            #expect(linked.idTokenClaims["auth_time"] == .int(Int(stolen.authTime.timeIntervalSince1970)), "\(linked.idTokenClaims)")
            guard case .object(let firebaseClaims)? = linked.idTokenClaims["firebase"] else { Issue.record("no firebase claim"); return }
            #expect(firebaseClaims["sign_in_second_factor"] == "totp", "\(firebaseClaims)")
            #expect(Self.signInProvider(linked) == "facebook.com")
            let refreshed = try await firebase.refresh(try #require(linked.string("refreshToken")))
            guard case .object(let refreshedClaims)? = refreshed.idTokenClaims["firebase"] else { Issue.record("no firebase claim"); return }
            #expect(refreshedClaims["sign_in_provider"] == "facebook.com" && refreshedClaims["sign_in_second_factor"] == "totp", "\(refreshedClaims)")

            // The new tokens are as old as the stolen one: they neither withdraw the factor nor remove a way in.
            let idToken = try #require(linked.string("idToken"))
            let withdraw = FirebaseAnswer(try await firebase.app.client.post(
                "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:withdraw?key=k",
                json: ["idToken": idToken, "mfaEnrollmentId": factorId]))
            #expect(withdraw.errorMessage == "CREDENTIAL_TOO_OLD_LOGIN_AGAIN", "\(withdraw.text)")
            let unlink = try await firebase.call("accounts:update", .object(["idToken": .string(idToken), "deleteProvider": ["apple.com"]]))
            #expect(unlink.errorMessage == "CREDENTIAL_TOO_OLD_LOGIN_AGAIN", "\(unlink.text)")
            let account = try await firebase.app.service.accounts.read(userId)
            #expect(account.mfa.confirmedFactors.count == 1 && account.identities["apple"] != nil)
        }
    }

    /// The same for a password an anonymous user adds with `accounts:signUp` and its ID token.
    @Test func aPasswordLinkedBySignUpContinuesTheAnonymousSignIn() async throws {
        try await FirebaseApp.run { firebase in
            let anonymous = try await firebase.call("accounts:signUp", .object(["returnSecureToken": true]))
            let localId = try #require(anonymous.string("localId"))
            let userId = try #require(UUID(uuidString: localId))
            let old = try await oldSession(firebase, of: userId, provider: "anonymous", signInProvider: "anonymous", factor: nil)
            let upgraded = try await firebase.call("accounts:signUp", .object([
                "idToken": .string(old.idToken), "email": "upgraded@example.com", "password": "upgraded password 1",
            ]))
            #expect(upgraded.status == 200, "\(upgraded.text)")
            #expect(upgraded.idTokenClaims["auth_time"] == .int(Int(old.authTime.timeIntervalSince1970)), "\(upgraded.idTokenClaims)")
            // Its refreshes name the password too: the upgraded user is no longer anonymous to rules and backends.
            let refreshed = try await firebase.refresh(try #require(upgraded.string("refreshToken")))
            #expect(Self.signInProvider(refreshed) == "password", "\(refreshed.idTokenClaims)")
        }
    }

    /// A client's password change answers tokens of a new session (it ends every other): they continue the caller's
    /// sign-in, its second factor included, as a link's do (they named a password sign-in without the factor).
    @Test func aPasswordChangesTokensKeepTheSecondFactor() async throws {
        try await FirebaseApp.run { firebase in
            let signedUp = try await firebase.app.client.post("/v1/sign-up", json: ["email": "mfa.change@example.com", "password": "first password 1"])
            let user = try signedUp.decodeJSON(SignedIn.self)
            try await firebase.app.verifyEmail("mfa.change@example.com", accessToken: user.session.accessToken)
            let (factorId, _) = try await firebase.app.enrolTOTP(accessToken: user.session.accessToken)
            let userId = try #require(UUID(uuidString: user.user.id))
            let recent = try await oldSession(
                firebase, of: userId, provider: "password", signInProvider: "password", factor: UUID(uuidString: factorId), secondsAgo: 30)
            let changed = try await firebase.call("accounts:update", .object(["idToken": .string(recent.idToken), "password": "second password 2"]))
            #expect(changed.status == 200, "\(changed.text)")
            #expect(changed.idTokenClaims["auth_time"] == .int(Int(recent.authTime.timeIntervalSince1970)))
            guard case .object(let claims)? = changed.idTokenClaims["firebase"] else { Issue.record("no firebase claim: \(changed.text)"); return }
            #expect(claims["sign_in_provider"] == "password" && claims["sign_in_second_factor"] == "totp", "\(claims)")
        }
    }

    /// `firebase.sign_in_provider` of an answer's ID token.
    private static func signInProvider(_ answer: FirebaseAnswer) -> String? {
        guard case .object(let claims)? = answer.idTokenClaims["firebase"], case .string(let provider)? = claims["sign_in_provider"] else { return nil }
        return provider
    }

    /// An anonymous user who links Google is a Google user from the link on, its refreshes included (they named the
    /// anonymous sign-in the session continued, and rules that keep anonymous users out let it in only for an hour).
    @Test func aLinkedProviderIsTheSessionsSignInMethodFromTheLinkOn() async throws {
        try await FirebaseApp.run { firebase in
            let anonymous = try await firebase.call("accounts:signUp", .object(["returnSecureToken": true]))
            let idToken = try #require(anonymous.string("idToken"))
            let linked = try await firebase.signInWithIdp(
                "providerId=google.com&id_token=\(try firebase.app.token("idToken", of: try await firebase.app.google("google-upgrade", email: "up@gmail.com")))",
                idToken: idToken)
            #expect(linked.status == 200 && Self.signInProvider(linked) == "google.com", "\(linked.text)")
            let refreshed = try await firebase.refresh(try #require(linked.string("refreshToken")))
            #expect(Self.signInProvider(refreshed) == "google.com", "\(refreshed.idTokenClaims)")
            #expect(refreshed.idTokenClaims["provider_id"] == nil, "no longer anonymous: \(refreshed.idTokenClaims)")
        }
    }
}
