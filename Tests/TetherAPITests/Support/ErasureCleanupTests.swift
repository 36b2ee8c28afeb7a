import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherTesting

@Suite("Erasure takes the operational traces with it")
struct ErasureCleanupTests {
    /// An admin key's secret.
    private func adminKey(_ service: DevService) async throws -> String {
        try await AdminKeyStore(database: service.admin).create(
            role: .admin, name: "erase", metadata: EventMetadata(actor: .operator("t"), surface: "cli")).secret
    }

    /// A password user signed up through `/v1`.
    private func signUp(_ service: DevService, _ email: String) async throws -> SignedIn {
        try await service.client.post("/v1/sign-up", json: ["email": email, "password": "a long password"]).decodeJSON(SignedIn.self)
    }

    /// Erases `userId` through the admin API with `admin`'s key.
    private func erase(_ userId: String, in service: DevService, with admin: String) async throws {
        let erased = try await service.client.send(
            "DELETE", "/v1/admin/users/\(userId)", fields: [("Authorization", "Bearer \(admin)"), ("Content-Type", "application/json")],
            body: Array(#"{"reason": "forget me"}"#.utf8))
        #expect(erased.status == 200, "\(erased.bodyText)")
    }

    @Test func keptAnswersAndSendCountsOfTheUserGoWithTheErasure() async throws {
        try await DevService.run { service in
            let admin = try await adminKey(service)
            let ada = try await signUp(service, "ada@example.com")
            let bearer = "Bearer \(ada.session.accessToken)"
            // A mailed code counts against the user's sends.
            #expect(try await service.client.post("/v1/users/me/email-verification", headers: ["Authorization": bearer], body: []).status == 202)
            let sends: Int = try await service.admin.query("SELECT count(*)::int AS n FROM code_sends WHERE user_id = \(ada.user.id)::uuid")[0].decode("n")
            #expect(sends == 1)
            let linked = try await service.client.post(
                "/v1/users/me/identities", headers: ["Authorization": bearer, "Idempotency-Key": "link-1"],
                json: try await service.apple("apple-ada", email: "ada@example.com"))
            #expect(linked.status == 200)
            // A sign-in's answer, made before anyone was signed in, shows the user: it names them too.
            let signIn = try await service.client.post(
                "/v1/sign-in", headers: ["Idempotency-Key": "sign-in-1"],
                json: ["provider": JSONValue.string("password"), "credential": ["email": "ada@example.com", "password": "a long password"]])
            #expect(signIn.status == 200, "\(signIn.bodyText)")
            let kept: Int = try await service.admin.query(
                "SELECT count(*)::int AS n FROM idempotent_responses WHERE user_id = \(ada.user.id)::uuid")[0].decode("n")
            #expect(kept == 2, "the signed-in request's answer and the sign-in's name their user")
            // An admin's action on the user, retried with its key: its answer shows the user, so it is theirs too.
            let actionHeaders: [(key: String, value: String)] = [
                ("Authorization", "Bearer \(admin)"), ("Content-Type", "application/json"), ("Idempotency-Key", "revoke-ada-1"),
            ]
            let revoke = { try await service.client.send(
                "POST", "/v1/admin/users/\(ada.user.id)/revoke-sessions", fields: actionHeaders, body: Array(#"{"reason": "lost phone"}"#.utf8)) }
            let revoked = try await revoke()
            #expect(revoked.status == 200 && revoked.bodyText.contains("ada@example.com"), "\(revoked.bodyText)")

            try await erase(ada.user.id, in: service, with: admin)
            for table in ["idempotent_responses", "code_sends"] {
                let left: Int = try await service.admin.query(
                    "SELECT count(*)::int AS n FROM \(unsafeSQL: table) WHERE user_id = \(ada.user.id)::uuid")[0].decode("n")
                #expect(left == 0, "\(table)")
            }
            // The action's retry after the erasure shows nothing of who the user was.
            let retried = try await revoke()
            #expect(!retried.bodyText.contains("ada@example.com"), "\(retried.status) \(retried.bodyText)")
            #expect(retried.headers.values(for: "Idempotent-Replayed").isEmpty)
        }
    }

    /// Erasing one's own account dropped the counts of the mails its address had been sent, so sign-up, five mails,
    /// erasure, again, sent one inbox a mail every few seconds. The counts stay, without the user's name, until they
    /// leave the window.
    @Test func erasingOneselfDoesNotStartAnAddressesMailAllowanceAgain() async throws {
        try await DevService.run { service in
            let first = try await signUp(service, "inbox@example.com")
            let bearer: KeyValuePairs<String, String> = ["Authorization": "Bearer \(first.session.accessToken)"]
            var answers: [Int] = []
            for _ in 0..<6 { answers.append(try await service.client.post("/v1/users/me/email-verification", headers: bearer, body: []).status) }
            #expect(answers == [202, 202, 202, 202, 202, 429])
            #expect(try await service.client.delete("/v1/users/me", headers: bearer).status == 204)
            let named: Int = try await service.admin.query(
                "SELECT count(*)::int AS n FROM code_sends WHERE user_id = \(first.user.id)::uuid")[0].decode("n")
            #expect(named == 0, "the erased user is named nowhere")

            let again = try await signUp(service, "inbox@example.com")
            let asked = try await service.client.post(
                "/v1/users/me/email-verification", headers: ["Authorization": "Bearer \(again.session.accessToken)"], body: [])
            #expect(asked.status == 429, "\(asked.bodyText)")
            #expect(try await service.client.post("/v1/password-reset", json: ["email": "inbox@example.com"]).status == 429)
            #expect(try await service.mails(to: "inbox@example.com").count == 5)
        }
    }

    /// A sign-in answered `account_exists_with_different_credential` names an account's address and sign-in methods:
    /// its kept copy outlived the account's erasure, and its retry said for a day that the account had existed.
    @Test func aKeptAccountExistsAnswerGoesWithTheErasure() async throws {
        try await DevService.run { service in
            let admin = try await adminKey(service)
            let kim = try await signUp(service, "kim@example.com")
            let apple = try await service.apple("apple-kim", email: "kim@example.com")
            let signIn = { try await service.client.post("/v1/sign-in", headers: ["Idempotency-Key": "acc-exists-1"], json: apple) }
            let refused = try await signIn()
            #expect(refused.status == 409 && refused.bodyText.contains("kim@example.com"), "\(refused.bodyText)")
            let kept: Int = try await service.admin.query(
                "SELECT count(*)::int AS n FROM idempotent_responses WHERE user_id = \(kim.user.id)::uuid")[0].decode("n")
            #expect(kept == 1, "the answer names the account that holds the address")
            try await erase(kim.user.id, in: service, with: admin)
            // The retry runs again: the address is nobody's now, and the Apple ID makes a new user of it.
            let retried = try await signIn()
            #expect(retried.headers.values(for: "Idempotent-Replayed").isEmpty)
            #expect(retried.status == 201 && !retried.bodyText.contains("account_exists"), "\(retried.status) \(retried.bodyText)")
        }
    }

    /// A sign-in answered `mfa_required` shows the user's factors (names, phone hints) without a `user` member: its kept
    /// copy outlived the erasure, and its retry showed them for a day.
    @Test func aKeptSecondFactorChallengeGoesWithTheErasure() async throws {
        try await DevService.run { service in
            let admin = try await adminKey(service)
            let bob = try await signUp(service, "bob@example.com")
            try await service.verifyEmail("bob@example.com", accessToken: bob.session.accessToken)
            _ = try await service.enrolTOTP(accessToken: bob.session.accessToken)
            let signIn = {
                try await service.client.post(
                    "/v1/sign-in", headers: ["Idempotency-Key": "mfa-sign-in-1"],
                    json: ["provider": JSONValue.string("password"), "credential": ["email": "bob@example.com", "password": "a long password"]])
            }
            let challenged = try await signIn()
            #expect(challenged.status == 401 && challenged.bodyText.contains("mfa_required"), "\(challenged.bodyText)")
            let kept: Int = try await service.admin.query(
                "SELECT count(*)::int AS n FROM idempotent_responses WHERE user_id = \(bob.user.id)::uuid")[0].decode("n")
            #expect(kept == 1, "the challenge names its user")
            #expect(try await signIn().headers.values(for: "Idempotent-Replayed") == ["true"])

            try await erase(bob.user.id, in: service, with: admin)
            let retried = try await signIn()
            #expect(retried.headers.values(for: "Idempotent-Replayed").isEmpty)
            #expect(!retried.bodyText.contains("factors"), "\(retried.status) \(retried.bodyText)")

            // The detail says so (it showed an ordinary disabled user, whose actions then said "No such user"), and no
            // cache keeps what the admin API answers.
            let detail = try await service.client.get("/v1/admin/users/\(bob.user.id)", headers: ["Authorization": "Bearer \(admin)"])
            #expect(detail.status == 200)
            guard case .object(let members) = try detail.decodeJSON(JSONValue.self), case .string? = members["erasedAt"] else {
                Issue.record("no erasedAt in \(detail.bodyText)")
                return
            }
            #expect(detail.headers.values(for: "Cache-Control") == ["no-store"])
        }
    }
}
