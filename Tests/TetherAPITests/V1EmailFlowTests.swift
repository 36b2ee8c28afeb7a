import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherTesting

@Suite("/v1 email flows: password reset, verification and email change through the dev outbox")
struct V1EmailFlowTests {
    private func signUp(_ service: DevService, _ email: String, password: String = "first password") async throws -> SignedIn {
        let response = try await service.client.post("/v1/sign-up", json: ["email": email, "password": password])
        guard response.status == 201 else { throw HarnessError("sign-up answered \(response.status): \(response.bodyText)") }
        return try response.decodeJSON(SignedIn.self)
    }

    private func bearer(_ signedIn: SignedIn) -> KeyValuePairs<String, String> {
        ["Authorization": "Bearer \(signedIn.session.accessToken)"]
    }

    @Test func aResetCodeWorksOnceEndsEverySessionAndProvesTheAddress() async throws {
        try await DevService.run { service in
            let ada = try await signUp(service, "Ada@Example.com")
            let asked = try await service.client.post("/v1/password-reset", headers: ["Accept-Language": "fr-CH, fr;q=0.9"], json: ["email": "ada@example.com"])
            #expect(asked.status == 202)
            let mail = try await service.lastMail(to: "Ada@Example.com")
            #expect(mail.template == "password_reset")
            #expect(mail.locale == "fr-CH")
            #expect(mail.mailed)
            #expect(mail.code.count == 54)
            #expect(mail.link.hasSuffix("/actions/reset-password?code=\(mail.code)"))
            #expect(ISO8601Milliseconds.parse(mail.expiresAt)!.timeIntervalSinceNow > 3500)

            let weak = try await service.client.post("/v1/password-reset/confirm", json: ["code": mail.code, "newPassword": "short"])
            #expect(weak.status == 400)
            #expect(try await service.eventCount("EmailCodeUsed") == 0, "a weak password spends nothing")

            let reset = try await service.client.post("/v1/password-reset/confirm", json: ["code": mail.code, "newPassword": "a new password"])
            #expect(reset.status == 200)
            let user = try reset.decodeJSON([String: SignedIn.User].self)["user"]
            #expect(user?.emailVerified == true)
            #expect(try await service.me(ada.session.accessToken).status == 401, "the reset ended the old session")

            let again = try await service.client.post("/v1/password-reset/confirm", json: ["code": mail.code, "newPassword": "a third password"])
            #expect(again.status == 401)
            #expect(again.bodyText.contains("invalid_code"))
            #expect(again.bodyText.contains("already used"))
            #expect(try await service.signIn(service.password("ada@example.com", "a third password")).status == 401)
            #expect(try await service.signIn(service.password("ada@example.com", "first password")).status == 401)
            #expect(try await service.signIn(service.password("ada@example.com", "a new password")).status == 200)
            #expect(try await service.eventCount("EmailCodeRefused", userId: ada.user.id) == 1)
        }
    }

    @Test func knownAndUnknownAddressesGetTheSameAnswer() async throws {
        try await DevService.run { service in
            _ = try await signUp(service, "known@example.com")
            let known = try await service.client.post("/v1/password-reset", json: ["email": "known@example.com"])
            let unknown = try await service.client.post("/v1/password-reset", json: ["email": "unknown@example.com"])
            #expect(known.status == 202)
            #expect(unknown.status == known.status)
            #expect(unknown.bodyText == known.bodyText)
            #expect(unknown.headers["content-type"] == known.headers["content-type"])
            #expect(try await service.mails(to: "known@example.com").count == 1)
            #expect(try await service.mails(to: "unknown@example.com").isEmpty)
            // The limit counts an address whether or not anyone uses it: the sixth request of each is refused alike.
            for _ in 1..<EmailFlows.mailsPerAddress {
                #expect(try await service.client.post("/v1/password-reset", json: ["email": "known@example.com"]).status == 202)
                #expect(try await service.client.post("/v1/password-reset", json: ["email": "unknown@example.com"]).status == 202)
            }
            let knownLimited = try await service.client.post("/v1/password-reset", json: ["email": "known@example.com"])
            let unknownLimited = try await service.client.post("/v1/password-reset", json: ["email": "unknown@example.com"])
            #expect(knownLimited.status == 429)
            #expect(unknownLimited.status == 429)
            #expect(knownLimited.bodyText == unknownLimited.bodyText)
            #expect(knownLimited.headers["retry-after"] != nil)
            #expect(try await service.mails(to: "known@example.com").count == EmailFlows.mailsPerAddress)
        }
    }

    @Test func anExpiredCodeAndACodeOfAnotherPurposeAreRefused() async throws {
        try await DevService.run(settings: ["TETHER_PASSWORD_RESET_CODE_TTL": "2s"]) { service in
            let ada = try await signUp(service, "ada@example.com")
            #expect(try await service.client.post("/v1/users/me/email-verification", headers: bearer(ada), body: []).status == 202)
            let verify = try await service.lastMail(to: "ada@example.com")
            #expect(verify.template == "verify_email")
            #expect(verify.link.contains("/actions/verify-email?code="))
            let wrongPurpose = try await service.client.post("/v1/password-reset/confirm", json: ["code": verify.code, "newPassword": "a new password"])
            #expect(wrongPurpose.status == 401)
            #expect(wrongPurpose.bodyText.contains("not for this"))

            _ = try await service.client.post("/v1/password-reset", json: ["email": "ada@example.com"])
            let reset = try await service.lastMail(to: "ada@example.com")
            let resetAtVerify = try await service.client.post("/v1/email-verification/confirm", json: ["code": reset.code])
            #expect(resetAtVerify.status == 401)
            try await Task.sleep(for: .milliseconds(2200))
            for _ in 0..<2 {
                let expired = try await service.client.post("/v1/password-reset/confirm", json: ["code": reset.code, "newPassword": "a new password"])
                #expect(expired.status == 401)
                #expect(expired.bodyText.contains("expired"))
            }
            #expect(try await service.eventCount("EmailCodeExpired", userId: ada.user.id) == 1, "the expiry is recorded once")
            #expect(try await service.signIn(service.password("ada@example.com", "first password")).status == 200)

            let verified = try await service.client.post("/v1/email-verification/confirm", json: ["code": verify.code])
            #expect(verified.status == 200)
            #expect(try verified.decodeJSON([String: SignedIn.User].self)["user"]?.emailVerified == true)
            let already = try await service.client.post("/v1/users/me/email-verification", headers: bearer(ada), body: [])
            #expect(already.status == 409)
            #expect(already.bodyText.contains("email_already_verified"))
        }
    }
}
