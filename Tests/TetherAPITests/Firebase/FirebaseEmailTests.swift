import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherJOSE
import TetherHTTP
import TetherTesting

/// The Identity Toolkit's email actions (WIRE-FACTS §3a–c) end to end through the dev outbox.
@Suite("Firebase surface: sendOobCode, resetPassword and accounts:update with a code")
struct FirebaseEmailTests {
    /// A server with no mail or SMS sender says so, on every surface, without naming its settings (those are for
    /// the operator, in the log at start): a Firebase client was told `TETHER_MAIL_WEBHOOK_URL is not set`.
    @Test func aServerWithoutSendersDoesNotNameItsSettings() async throws {
        let database = try await TestDatabase.make()
        try await withService(databaseURL: database.url, values: ["TETHER_FIREBASE_PROJECT_ID": FirebaseApp.projectID]) { _, client in
            let reset = try await client.post(
                "\(FirebaseApp.v1)/accounts:sendOobCode?key=k", json: ["requestType": "PASSWORD_RESET", "email": "a@example.com"])
            #expect(FirebaseAnswer(reset).errorMessage == "OPERATION_NOT_ALLOWED : This server sends no mail.", "\(reset.bodyText)")
            let signUp = try await client.post("/v1/sign-up", json: ["email": "b@example.com", "password": "a long password"])
            let token = try #require(try signUp.decodeJSON([String: JSONValue].self)["session"]?["accessToken"]?.string, "\(signUp.bodyText)")
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(token)"]
            let mail = try await client.post("/v1/users/me/email-verification", headers: auth, body: [])
            let sms = try await client.post("/v1/users/me/mfa/phone", headers: auth, json: ["phoneNumber": "+15555550100"])
            for (answer, code) in [(mail, "mail_unavailable"), (sms, "sms_unavailable")] {
                #expect(answer.status == 503 && answer.bodyText.contains(code), "\(answer.bodyText)")
                #expect(!answer.bodyText.contains("TETHER_"), "\(answer.bodyText)")
            }
        }
    }

    private func signUp(_ firebase: FirebaseApp, _ email: String) async throws -> FirebaseAnswer {
        let answer = try await firebase.call("accounts:signUp", .object(["email": .string(email), "password": "first password", "returnSecureToken": true]))
        guard answer.status == 200 else { throw HarnessError("signUp answered \(answer.status): \(answer.text)") }
        return answer
    }

    private func signIn(_ firebase: FirebaseApp, _ email: String, _ password: String) async throws -> FirebaseAnswer {
        try await firebase.call("accounts:signInWithPassword", .object(["email": .string(email), "password": .string(password), "returnSecureToken": true]))
    }

    @Test func aClientResetChecksTheCodeWithoutSpendingItThenResetsAndEndsTheSessions() async throws {
        try await FirebaseApp.run { firebase in
            let ann = try await signUp(firebase, "ann@example.com")
            let known = try await firebase.call("accounts:sendOobCode", .object(["requestType": "PASSWORD_RESET", "email": "ann@example.com"]))
            let unknown = try await firebase.call("accounts:sendOobCode", .object(["requestType": "PASSWORD_RESET", "email": "nobody@example.com"]))
            #expect(known.status == 200)
            #expect(known.text == #"{"email":"ann@example.com","kind":"identitytoolkit#GetOobConfirmationCodeResponse"}"#)
            #expect(unknown.text == known.text.replacingOccurrences(of: "ann@", with: "nobody@"), "no answer tells the addresses apart")
            #expect(known.string("oobCode") == nil, "a client never sees the code")

            await firebase.app.service.emailFlows.finishSending()
            let listed = try await firebase.app.client.get("/emulator/v1/projects/\(FirebaseApp.projectID)/oobCodes")
            let codes = try #require(listed.decodeJSON([String: [[String: String]]].self)["oobCodes"])
            #expect(codes.count == 1)
            let entry = try #require(codes.first)
            #expect(entry["email"] == "ann@example.com")
            #expect(entry["requestType"] == "PASSWORD_RESET")
            let code = try #require(entry["oobCode"])
            #expect(entry["oobLink"]?.contains("/actions/reset-password?mode=resetPassword&oobCode=\(code)&lang=en") == true)

            for _ in 0..<2 {
                let checked = try await firebase.call("accounts:resetPassword", .object(["oobCode": .string(code)]))
                #expect(checked.text == #"{"email":"ann@example.com","kind":"identitytoolkit#ResetPasswordResponse","requestType":"PASSWORD_RESET"}"#)
            }
            let weak = try await firebase.call("accounts:resetPassword", .object(["oobCode": .string(code), "newPassword": "short"]))
            #expect(weak.errorMessage?.hasPrefix("WEAK_PASSWORD") == true)
            let reset = try await firebase.call("accounts:resetPassword", .object(["oobCode": .string(code), "newPassword": "second password"]))
            #expect(reset.status == 200)
            #expect(reset.string("requestType") == "PASSWORD_RESET")
            let refreshed = try await firebase.refresh(try #require(ann.string("refreshToken")))
            #expect(refreshed.errorMessage == "TOKEN_EXPIRED", "the reset ended the Firebase session")
            #expect(try await signIn(firebase, "ann@example.com", "second password").status == 200)
            #expect(try await signIn(firebase, "ann@example.com", "first password").errorMessage == "INVALID_LOGIN_CREDENTIALS")
            let spent = try await firebase.call("accounts:resetPassword", .object(["oobCode": .string(code), "newPassword": "third password"]))
            #expect(spent.errorMessage == "INVALID_OOB_CODE")
            // A used code leaves the emulator's listing, as the emulator deletes it.
            let afterUse = try await firebase.app.client.get("/emulator/v1/projects/\(FirebaseApp.projectID)/oobCodes")
            #expect(try afterUse.decodeJSON([String: [[String: String]]].self)["oobCodes"]?.isEmpty == true, "\(afterUse.bodyText)")
            #expect(try await firebase.call("accounts:resetPassword", .object(["oobCode": "garbage"])).errorMessage == "INVALID_OOB_CODE")
            #expect(try await firebase.call("accounts:resetPassword", .object([:])).errorMessage == "MISSING_OOB_CODE")
        }
    }

    @Test func verificationAndEmailChangeAreAppliedWithAccountsUpdate() async throws {
        try await FirebaseApp.run { firebase in
            let bea = try await signUp(firebase, "bea@example.com")
            let idToken = try #require(bea.string("idToken"))
            let sent = try await firebase.call("accounts:sendOobCode", .object(["requestType": "VERIFY_EMAIL", "idToken": .string(idToken)]))
            #expect(sent.string("email") == "bea@example.com")
            let verify = try await firebase.app.lastMail(to: "bea@example.com")
            #expect(verify.link.contains("mode=verifyEmail"))
            // A reset code at accounts:update, and the verification code at resetPassword, are refused.
            let applied = try await firebase.call("accounts:update", .object(["oobCode": .string(verify.code)]))
            #expect(applied.status == 200)
            #expect(applied.body["emailVerified"] == .bool(true))
            #expect(applied.string("idToken") == nil, "no new tokens")
            #expect(applied.string("passwordHash") != nil)
            #expect(try await firebase.call("accounts:update", .object(["oobCode": .string(verify.code)])).errorMessage == "INVALID_OOB_CODE")

            let taken = try await signUp(firebase, "taken@example.com")
            _ = taken
            let exists = try await firebase.call("accounts:sendOobCode", .object([
                "requestType": "VERIFY_AND_CHANGE_EMAIL", "idToken": .string(idToken), "newEmail": "taken@example.com",
            ]))
            #expect(exists.errorMessage == "EMAIL_EXISTS")
            // An anonymous user takes no address by a change (it would end its only session): refused before the
            // address is looked up, so it tells nothing about whether the address has an account.
            let anonymous = try #require(try await firebase.call("accounts:signUp", .object(["returnSecureToken": true])).string("idToken"))
            for address in ["taken@example.com", "anon.free@example.com"] {
                let refused = try await firebase.call("accounts:sendOobCode", .object([
                    "requestType": "VERIFY_AND_CHANGE_EMAIL", "idToken": .string(anonymous), "newEmail": .string(address),
                ]))
                #expect(refused.errorMessage?.hasPrefix("OPERATION_NOT_ALLOWED") == true, "\(address): \(refused.text)")
            }
            let change = try await firebase.call("accounts:sendOobCode", .object([
                "requestType": "VERIFY_AND_CHANGE_EMAIL", "idToken": .string(idToken), "newEmail": "bea@new.example",
            ]))
            #expect(change.string("newEmail") == "bea@new.example")
            let changeCode = try await firebase.app.lastMail(to: "bea@new.example").code
            // The dev list shows a change under the user's address, the new one beside it, as the emulator does.
            let listed = try await firebase.app.client.get("/emulator/v1/projects/\(FirebaseApp.projectID)/oobCodes")
            let listedChange = try listed.decodeJSON([String: [[String: String]]].self)["oobCodes"]?.first { $0["oobCode"] == changeCode }
            #expect(listedChange?["email"] == "bea@example.com")
            #expect(listedChange?["newEmail"] == "bea@new.example")
            #expect(listedChange?["requestType"] == "VERIFY_AND_CHANGE_EMAIL")
            let inspected = try await firebase.call("accounts:resetPassword", .object(["oobCode": .string(changeCode)]))
            #expect(inspected.string("requestType") == "VERIFY_AND_CHANGE_EMAIL")
            #expect(inspected.string("email") == "bea@example.com")
            #expect(inspected.string("newEmail") == "bea@new.example")
            let wrongUse = try await firebase.call("accounts:resetPassword", .object(["oobCode": .string(changeCode), "newPassword": "second password"]))
            #expect(wrongUse.errorMessage == "INVALID_OOB_CODE")
            let moved = try await firebase.call("accounts:update", .object(["oobCode": .string(changeCode)]))
            #expect(moved.string("email") == "bea@new.example")
            let recover = try await firebase.app.lastMail(to: "bea@example.com")
            #expect(recover.template == "email_changed")
            #expect(recover.link.contains("mode=recoverEmail"))
            let recovered = try await firebase.call("accounts:update", .object(["oobCode": .string(recover.code)]))
            #expect(recovered.string("email") == "bea@example.com")
        }
    }

    /// A confirmed `verifyBeforeUpdateEmail` voids every earlier token, as Firebase's moves `validSince`: whether
    /// the code comes back through `accounts:update` or through the link of its mail.
    /// A verification mail past the user's limit is `TOO_MANY_ATTEMPTS_TRY_LATER`, which the SDKs map (the iOS SDK's
    /// tooManyRequests); `RESET_PASSWORD_EXCEED_LIMIT` is a reset's only, and the iOS SDK would read it as internal.
    @Test func aVerificationMailPastTheLimitIsTooManyAttempts() async throws {
        try await FirebaseApp.run { firebase in
            let idToken = try #require(try await signUp(firebase, "many@example.com").string("idToken"))
            var refusal: FirebaseAnswer?
            for _ in 0..<30 {
                let sent = try await firebase.call("accounts:sendOobCode", .object(["requestType": "VERIFY_EMAIL", "idToken": .string(idToken)]))
                if sent.status != 200 { refusal = sent; break }
            }
            let refused = try #require(refusal, "no limit in 30 mails")
            #expect(refused.errorMessage?.hasPrefix("TOO_MANY_ATTEMPTS_TRY_LATER") == true, "\(refused.text)")
        }
    }

    @Test func aConfirmedEmailChangeVoidsEarlierTokens() async throws {
        try await FirebaseApp.run { firebase in
            for (index, throughTheLink) in [false, true].enumerated() {
                let address = "dee\(index)@example.com", newAddress = "dee\(index)@new.example"
                let first = try await signUp(firebase, address)
                let idToken = try #require(first.string("idToken")), refreshToken = try #require(first.string("refreshToken"))
                let other = try await signIn(firebase, address, "first password")
                let otherRefresh = try #require(other.string("refreshToken"))
                let asked = try await firebase.call("accounts:sendOobCode", .object([
                    "requestType": "VERIFY_AND_CHANGE_EMAIL", "idToken": .string(idToken), "newEmail": .string(newAddress),
                ]))
                #expect(asked.status == 200, "\(asked.text)")
                let mail = try await firebase.app.lastMail(to: newAddress)
                if throughTheLink {
                    let page = try await firebase.app.client.post(
                        "/actions/verify-email", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Array("code=\(mail.code)".utf8))
                    #expect(page.status == 200)
                } else {
                    #expect(try await firebase.call("accounts:update", .object(["oobCode": .string(mail.code)])).string("email") == newAddress)
                }
                #expect(try await firebase.call("accounts:lookup", .object(["idToken": .string(idToken)])).errorMessage == "TOKEN_EXPIRED")
                for token in [refreshToken, otherRefresh] {
                    #expect(try await firebase.refresh(token).errorMessage == "TOKEN_EXPIRED")
                }
                #expect(try await signIn(firebase, newAddress, "first password").status == 200)
            }
        }
    }

    @Test func anAdminGetsLinksAndIsToldAboutUnknownAddresses() async throws {
        try await FirebaseApp.run { firebase in
            _ = try await signUp(firebase, "cat@example.com")
            let link = try await firebase.admin("accounts:sendOobCode", .object([
                "requestType": "PASSWORD_RESET", "email": "cat@example.com", "returnOobLink": true,
            ]))
            #expect(link.status == 200)
            let code = try #require(link.string("oobCode"))
            #expect(code.count == 54)
            #expect(link.string("oobLink")?.contains("oobCode=\(code)") == true)
            #expect(try await firebase.app.mails(to: "cat@example.com").allSatisfy { !$0.mailed }, "a generated link is not mailed")
            let unknown = try await firebase.admin("accounts:sendOobCode", .object([
                "requestType": "PASSWORD_RESET", "email": "nobody@example.com", "returnOobLink": true,
            ]))
            #expect(unknown.errorMessage == "EMAIL_NOT_FOUND")
            let unknownToVerify = try await firebase.admin("accounts:sendOobCode", .object([
                "requestType": "VERIFY_EMAIL", "email": "nobody@example.com", "returnOobLink": true,
            ]))
            #expect(unknownToVerify.errorMessage == "USER_NOT_FOUND", "WIRE-FACTS §3a")
            let clientLink = try await firebase.call("accounts:sendOobCode", .object([
                "requestType": "PASSWORD_RESET", "email": "cat@example.com", "returnOobLink": true,
            ]))
            #expect(clientLink.errorMessage == "INSUFFICIENT_PERMISSION")
            #expect(try await firebase.call("accounts:sendOobCode", .object(["email": "cat@example.com"])).errorMessage == "MISSING_REQ_TYPE")
            let badContinue = try await firebase.call("accounts:sendOobCode", .object([
                "requestType": "PASSWORD_RESET", "email": "cat@example.com", "continueUrl": "not a url",
            ]))
            #expect(badContinue.errorMessage?.hasPrefix("INVALID_CONTINUE_URI") == true)
            #expect(try await firebase.call("accounts:sendOobCode", .object(["requestType": "EMAIL_SIGNIN", "email": "cat@example.com"]))
                .errorMessage?.hasPrefix("OPERATION_NOT_ALLOWED") == true)
            let reset = try await firebase.call("accounts:resetPassword", .object(["oobCode": .string(code), "newPassword": "second password"]))
            #expect(reset.status == 200)
        }
    }

    /// firebase-admin's `generate_email_verification_link` for an address already verified was refused
    /// (`INVALID_ARGUMENT`); Firebase hands the link out, and using it changes nothing.
    @Test func anAdminGetsAVerificationLinkForAnAlreadyVerifiedAddress() async throws {
        try await FirebaseApp.run { firebase in
            let created = try await firebase.admin("accounts", .object(["email": "eve@example.com", "emailVerified": true]))
            #expect(created.status == 200, "\(created.text)")
            let link = try await firebase.admin("accounts:sendOobCode", .object([
                "requestType": "VERIFY_EMAIL", "email": "eve@example.com", "returnOobLink": true,
            ]))
            #expect(link.status == 200, "\(link.text)")
            let code = try #require(link.string("oobCode"))
            #expect(link.string("oobLink")?.contains("oobCode=\(code)") == true)
            let verifiedEvents = try await firebase.app.eventCount("EmailVerified")
            let applied = try await firebase.call("accounts:update", .object(["oobCode": .string(code)]))
            #expect(applied.status == 200, "\(applied.text)")
            #expect(applied.body["emailVerified"] == .bool(true))
            #expect(try await firebase.app.eventCount("EmailVerified") == verifiedEvents, "nothing more to verify")
        }
    }

    @Test func anExpiredCodeIsExpiredOobCode() async throws {
        try await FirebaseApp.run(settings: ["TETHER_PASSWORD_RESET_CODE_TTL": "1s"]) { firebase in
            _ = try await signUp(firebase, "dan@example.com")
            let link = try await firebase.admin("accounts:sendOobCode", .object([
                "requestType": "PASSWORD_RESET", "email": "dan@example.com", "returnOobLink": true,
            ]))
            let code = try #require(link.string("oobCode"))
            try await Task.sleep(for: .milliseconds(1200))
            #expect(try await firebase.call("accounts:resetPassword", .object(["oobCode": .string(code)])).errorMessage == "EXPIRED_OOB_CODE")
            #expect(try await firebase.call("accounts:resetPassword", .object(["oobCode": .string(code), "newPassword": "second password"]))
                .errorMessage == "EXPIRED_OOB_CODE")
        }
    }
}
