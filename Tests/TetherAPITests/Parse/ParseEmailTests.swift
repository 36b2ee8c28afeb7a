import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

/// Parse's `requestPasswordReset` and `verificationEmailRequest` (WIRE-FACTS §3d), end to end through the dev outbox.
@Suite("Parse surface: password reset and email verification")
struct ParseEmailTests {
    private func adminKey(_ parse: ParseApp) async throws -> String {
        try await AdminKeyStore(database: parse.app.admin).create(
            role: .admin, name: "parse master", metadata: EventMetadata(actor: .operator("tester"), surface: "cli")).secret
    }

    /// Parse-Swift sleeps for `x-rate-limit-reset` before each of its four retries of a 429: an hour's limit on
    /// mails to one address held `requestPasswordReset` for four hours. A long wait is in `Retry-After` only.
    @Test func aLongLimitIs155WithoutAWaitForTheSDKToSleepThrough() async throws {
        try await ParseApp.run { parse in
            var limited: ParseAnswer?
            for _ in 0..<20 where limited == nil {
                let answer = try await parse.send("POST", "/requestPasswordReset", json: .object(["email": "often@example.com"]))
                if answer.status == 429 { limited = answer } else { #expect(answer.status == 200, "\(answer.text)") }
            }
            let refused = try #require(limited, "twenty mails an hour to one address are limited")
            #expect(refused.code == 155, "\(refused.text)")
            #expect(Int(refused.header("Retry-After") ?? "") ?? 0 > 60, "\(refused.response.headers)")
            #expect(refused.header("x-rate-limit-reset") == nil, "\(refused.response.headers)")
        }
    }

    @Test func aResetThroughParsesLinkEndsTheParseSessionAndTheNewPasswordLogsIn() async throws {
        try await ParseApp.run(settings: ["TETHER_PUBLIC_URL": "https://auth.example.com"]) { parse in
            let signUp = try await parse.send("POST", "/users", json: .object(["username": "ada@example.com", "password": "analytical engine"]))
            #expect(signUp.status == 201)
            let token = try #require(signUp.string("sessionToken"))
            #expect(try await parse.send("GET", "/users/me", .init(session: token)).body["emailVerified"] == .bool(false))

            let unknown = try await parse.send("POST", "/requestPasswordReset", json: .object(["email": "nobody@example.com"]))
            let known = try await parse.send("POST", "/requestPasswordReset", json: .object(["email": "ada@example.com"]))
            #expect(known.status == 200)
            #expect(known.text == "{}")
            #expect(unknown.text == known.text)
            let mail = try await parse.app.lastMail(to: "ada@example.com")
            #expect(mail.link == "https://auth.example.com/parse/apps/\(ParseApp.appID)/request_password_reset?token=\(mail.code)&username=ada%40example.com")

            let redirect = try await parse.app.client.get(String(mail.link.dropFirst("https://auth.example.com".count)))
            #expect(redirect.status == 302)
            #expect(redirect.headers["location"] == "/actions/reset-password?code=\(mail.code)")
            #expect(try await parse.app.client.get("/parse/apps/another-app/request_password_reset?token=\(mail.code)").status == 404)

            let reset = try await parse.app.client.post(
                "/actions/reset-password", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Array("code=\(mail.code)&newPassword=difference+engine&confirmPassword=difference+engine".utf8))
            #expect(reset.status == 200)
            #expect(try await parse.send("GET", "/users/me", .init(session: token)).code == 209, "the reset ended the Parse session")
            let logIn = try await parse.send("POST", "/login", json: .object(["username": "ada@example.com", "password": "difference engine"]))
            #expect(logIn.status == 200)
            #expect(logIn.body["emailVerified"] == .bool(true))
        }
    }

    @Test func theEmailRoutesAnswerParsesErrorsAndTellOnlyTheMasterKeyAboutAccounts() async throws {
        try await ParseApp.run { parse in
            for route in ["/requestPasswordReset", "/verificationEmailRequest"] {
                let missing = try await parse.send("POST", route, json: .object([:]))
                #expect(missing.status == 400)
                #expect(missing.text == #"{"code":204,"error":"you must provide an email"}"#)
                let empty = try await parse.send("POST", route, json: .object(["email": ""]))
                #expect(empty.status == 400 && empty.text == missing.text, "Parse Server's `!email`: \(empty.text)")
                let notString = try await parse.send("POST", route, json: .object(["email": .int(5)]))
                #expect(notString.text == #"{"code":125,"error":"you must provide a valid email string"}"#)
            }
            _ = try await parse.send("POST", "/users", json: .object(["username": "bob@example.com", "password": "analytical engine"]))
            let stranger = try await parse.send("POST", "/verificationEmailRequest", json: .object(["email": "nobody@example.com"]))
            #expect(stranger.status == 200)
            #expect(stranger.text == "{}")
            let master = try await adminKey(parse)
            let unknown = try await parse.send("POST", "/verificationEmailRequest", .init(master: master), json: .object(["email": "nobody@example.com"]))
            #expect(unknown.text == #"{"code":205,"error":"No user found with email nobody@example.com"}"#)

            let sent = try await parse.send("POST", "/verificationEmailRequest", json: .object(["email": "bob@example.com"]))
            #expect(sent.text == "{}")
            let mail = try await parse.app.lastMail(to: "bob@example.com")
            #expect(mail.template == "verify_email")
            #expect(mail.link.contains("/parse/apps/\(ParseApp.appID)/verify_email?token=\(mail.code)&username=bob%40example.com"))
            let redirect = try await parse.app.client.get(String(mail.link.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" }))
            #expect(redirect.headers["location"] == "/actions/verify-email?code=\(mail.code)")
            let confirmed = try await parse.app.client.post("/v1/email-verification/confirm", json: ["code": mail.code])
            #expect(confirmed.status == 200)

            let already = try await parse.send("POST", "/verificationEmailRequest", .init(master: master), json: .object(["email": "bob@example.com"]))
            #expect(already.text == #"{"code":-1,"error":"Email bob@example.com is already verified."}"#)
            #expect(try await parse.send("POST", "/verificationEmailRequest", json: .object(["email": "bob@example.com"])).text == "{}")
            #expect(try await parse.app.mails(to: "bob@example.com").count == 1, "a verified address gets no second mail")
        }
    }

    @Test func clientsMayNotSetEmailVerification() async throws {
        try await ParseApp.run { parse in
            let signUp = try await parse.send("POST", "/users", json: .object(["username": "eve@example.com", "password": "analytical engine"]))
            let id = try #require(signUp.string("objectId"))
            let forged = try await parse.send(
                "PUT", "/users/\(id)", .init(session: signUp.string("sessionToken")), json: .object(["emailVerified": .bool(true)]))
            #expect(forged.text == #"{"code":119,"error":"Clients aren't allowed to manually update email verification."}"#)
            // Nor at sign-up, where it was dropped with a 201 (Parse Server refuses it there too).
            let events = try await parse.accountEvents()
            for body: JSONValue in [
                .object(["username": "mallory@example.com", "password": "analytical engine", "emailVerified": true]),
                .object(["authData": .object(["anonymous": .object(["id": .string(UUID().uuidString)])]), "emailVerified": true]),
            ] {
                let signUpVerified = try await parse.send("POST", "/users", json: body)
                #expect(signUpVerified.code == 119, "\(signUpVerified.text)")
            }
            #expect(try await parse.accountEvents() == events)
            #expect(try await parse.app.eventCount("EmailVerified") == 0)
        }
    }

    /// A master-key PUT of `emailVerified` answered 200 and changed nothing, whatever its type. Parse lets the
    /// master key set it (only clients are refused, 119); anything but a Boolean is refused and changes nothing.
    @Test func theMasterKeySetsEmailVerificationWithABooleanOnly() async throws {
        try await ParseApp.run { parse in
            let signUp = try await parse.send("POST", "/users", json: .object(["username": "ver@example.com", "password": "analytical engine"]))
            let id = try #require(signUp.string("objectId"))
            let master = try await adminKey(parse)
            func isVerified() async throws -> JSONValue? {
                try await parse.send("GET", "/users/\(id)", .init(master: master)).body["emailVerified"]
            }
            #expect(try await isVerified() == .bool(false))
            let set = try await parse.send("PUT", "/users/\(id)", .init(master: master), json: .object(["emailVerified": .bool(true)]))
            #expect(set.status == 200, "\(set.text)")
            #expect(try await isVerified() == .bool(true))
            let events = try await parse.accountEvents()
            let wrongType = try await parse.send("PUT", "/users/\(id)", .init(master: master), json: .object(["emailVerified": "not-a-bool"]))
            #expect(wrongType.code == 107, "\(wrongType.text)")
            #expect(try await parse.accountEvents() == events)
            let unset = try await parse.send("PUT", "/users/\(id)", .init(master: master), json: .object(["emailVerified": .bool(false)]))
            #expect(unset.status == 200, "\(unset.text)")
            #expect(try await isVerified() == .bool(false))
            // The change commits before the master key's record of it: a record that then fails does not make
            // the answer an error for a change that was made.
            try await parse.app.admin.refuseEvents(ofTypes: ["AdminActionRequested"])
            let unrecorded = try await parse.send("PUT", "/users/\(id)", .init(master: master), json: .object(["emailVerified": .bool(true)]))
            #expect(unrecorded.status == 200, "\(unrecorded.text)")
        }
    }
}
