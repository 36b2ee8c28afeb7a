import TetherCore
import Foundation
import Testing
import TetherAPI
import TetherCrypto
import TetherHTTP
import TetherTesting

@Suite("/v1 over HTTP with password accounts")
struct V1PasswordFlowTests {
    private func withServer(_ body: (HTTPTestClient) async throws -> Void) async throws {
        try await withService(databaseURL: try await TestDatabase.make().url, body)
    }

    /// A password sign-in takes a while to verify (scrypt); the account may be erased, or its password reset,
    /// before its command runs. Replayed step by step: verified, then the change, then the command. It opens
    /// nothing and makes no user (it made a user with no password, holding the erased person's address).
    @Test func aPasswordVerifiedBeforeTheAccountWentOrItsPasswordChangedOpensNothing() async throws {
        try await DevService.run { service in
            let commands = service.service.commands
            for change in ["erased", "reset"] {
                let email = "verified-\(change)@example.com"
                let signedUp = try await service.client.post("/v1/sign-up", json: ["email": email, "password": "the first password"])
                #expect(signedUp.status == 201, "\(signedUp.bodyText)")
                let userId = try #require(UUID(uuidString: try signedUp.decodeJSON(SignedIn.self).user.id))
                let verified = try await commands.verify(.password(email: email, password: "the first password"), context: CommandContext())
                if change == "erased" {
                    try await service.service.accounts.erase(userId: userId, reason: "test", context: CommandContext())
                } else {
                    _ = try await commands.setPassword(userId: userId, password: "a second password", context: CommandContext())
                }
                let users = try await service.admin.query("SELECT count(*)::int AS n FROM users")[0].decode("n", as: Int.self)
                await #expect(throws: AccountError.invalidCredential, "\(change)") {
                    _ = try await service.service.accounts.signIn(
                        verified, session: NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: ["password"]), context: CommandContext())
                }
                #expect(try await service.admin.query("SELECT count(*)::int AS n FROM users")[0].decode("n", as: Int.self) == users)
            }
        }
    }

    @Test func signUpSignInRefreshAndSignOut() async throws {
        try await withServer { client in
            let signUp = try await client.post("/v1/sign-up", json: ["email": "Ada@Example.com", "password": "correct horse", "displayName": "Ada"])
            #expect(signUp.status == 201)
            let created = try signUp.decodeJSON(SignedIn.self)
            #expect(created.isNewUser == true)
            #expect(created.user.email == "Ada@Example.com")
            #expect(created.user.emailVerified == false)
            // White space around an address is no part of it: it was stored, shown and mailed to with it.
            let padded = try await client.post("/v1/sign-up", json: ["email": "  Spacey@Example.COM ", "password": "correct horse"])
            #expect(try padded.decodeJSON(SignedIn.self).user.email == "Spacey@Example.COM", "\(padded.bodyText)")
            #expect(created.session.tokenType == "Bearer")
            #expect(created.session.expiresIn == 900)

            let duplicate = try await client.post("/v1/sign-up", json: ["email": "ada@example.com", "password": "another one"])
            #expect(duplicate.status == 409)
            #expect(duplicate.bodyText.contains("email_already_in_use"))

            let wrong = try await client.post("/v1/sign-in", json: SignInRequest(email: "ada@example.com", password: "wrong password"))
            #expect(wrong.status == 401)
            #expect(wrong.bodyText.contains("invalid_credential"))
            let unknown = try await client.post("/v1/sign-in", json: SignInRequest(email: "nobody@example.com", password: "whatever123"))
            #expect(unknown.status == 401)
            #expect(unknown.bodyText == wrong.bodyText, "an unknown email looks exactly like a wrong password")

            let signIn = try await client.post("/v1/sign-in", json: SignInRequest(email: "ada@example.com", password: "correct horse"))
            #expect(signIn.status == 200)
            let returning = try signIn.decodeJSON(SignedIn.self)
            #expect(returning.user.id == created.user.id)

            let me = try await client.get("/v1/users/me", headers: ["Authorization": "Bearer \(returning.session.accessToken)"])
            #expect(me.status == 200)
            #expect(me.bodyText.contains(created.user.id))

            let refreshed = try await client.post("/v1/sessions/refresh", json: ["refreshToken": returning.session.refreshToken])
            #expect(refreshed.status == 200)
            let rotated = try refreshed.decodeJSON(SignedIn.self)
            #expect(rotated.session.refreshToken != returning.session.refreshToken)

            let reused = try await client.post("/v1/sessions/refresh", json: ["refreshToken": returning.session.refreshToken])
            #expect(reused.status == 401)
            #expect(reused.bodyText.contains("refresh_token_reused"))
            // Reuse ended the whole session: its access tokens stop working at once.
            let afterReuse = try await client.get("/v1/users/me", headers: ["Authorization": "Bearer \(rotated.session.accessToken)"])
            #expect(afterReuse.status == 401)

            let other = try await client.get("/v1/users/me", headers: ["Authorization": "Bearer \(created.session.accessToken)"])
            #expect(other.status == 200)
            let signOut = try await client.post("/v1/sign-out", headers: ["Authorization": "Bearer \(created.session.accessToken)"], body: [])
            #expect(signOut.status == 204)
            let afterSignOut = try await client.get("/v1/users/me", headers: ["Authorization": "Bearer \(created.session.accessToken)"])
            #expect(afterSignOut.status == 401)
            #expect(afterSignOut.headers["content-type"] == "application/problem+json")
        }
    }

    @Test func badRequestsAreClearAndChangeNothing() async throws {
        try await withServer { client in
            let malformed = try await client.post("/v1/sign-up", body: Array("{not json".utf8))
            #expect(malformed.status == 400)
            let short = try await client.post("/v1/sign-up", json: ["email": "a@example.com", "password": "short"])
            #expect(short.status == 400)
            #expect(short.bodyText.contains("8 to 128"))
            let notEmail = try await client.post("/v1/sign-up", json: ["email": "nope", "password": "long enough"])
            #expect(notEmail.status == 400)
            let noToken = try await client.get("/v1/users/me")
            #expect(noToken.status == 401)
            let forged = try await client.get("/v1/users/me", headers: ["Authorization": "Bearer eyJhbGciOiJub25lIn0.e30."])
            #expect(forged.status == 401)
            let provider = try await client.post("/v1/sign-in", json: ProviderSignIn(provider: "apple", credential: ["identityToken": "x"]))
            #expect(provider.status == 400)
            #expect(provider.bodyText.contains("unsupported_provider"))
        }
    }

    private struct SignInRequest: Encodable {
        var provider = "password"
        var credential: [String: String]

        init(email: String, password: String) {
            credential = ["email": email, "password": password]
        }
    }

    private struct ProviderSignIn: Encodable {
        var provider: String
        var credential: [String: String]
    }
}
