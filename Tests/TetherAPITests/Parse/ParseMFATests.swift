import Foundation
import Testing
@testable import TetherAPI
import TetherCore
import TetherCrypto
import TetherProviders
import TetherTesting

/// Parse's `mfa` adapter on the wire: enrolment through `PUT` with `authData.mfa`, log-in with `authData.mfa.token`.
@Suite("Parse surface: second factors")
struct ParseMFATests {
    private func appleUser(_ parse: ParseApp, _ sub: String) async throws -> (objectId: String, token: String) {
        let answer = try await parse.logIn("apple", ["id": sub, "token": try await parse.appleToken(sub)])
        return (try #require(answer.string("objectId")), try #require(answer.string("sessionToken")))
    }

    /// Enrols a TOTP factor with the user's own PUT (`authData.mfa` with a secret and its current code); answers
    /// the factor's code generator.
    @discardableResult
    private func enrolTOTP(_ parse: ParseApp, objectId: String, session: String) async throws -> TOTP {
        let secret = Base32.encode(TOTP.generateSecret())
        let totp = try TOTP(secret: try Base32.decode(secret))
        #expect(try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
            "authData": .object(["mfa": ParseApp.strings(["secret": secret, "token": totp.code(at: Date())])]),
        ])).status == 200)
        return totp
    }

    private func appleLogIn(_ parse: ParseApp, _ sub: String, mfa: [String: String]?) async throws -> ParseAnswer {
        var authData: [String: JSONValue] = ["apple": ParseApp.strings(["id": sub, "token": try await parse.appleToken(sub)])]
        if let mfa { authData["mfa"] = ParseApp.strings(mfa) }
        return try await parse.send("POST", "/users", json: .object(["authData": .object(authData)]))
    }

    /// An enrolment's answer (its recovery codes), kept for its request id, was replayed to the same request from its
    /// session after the session was logged out: a captured request with its id is no credential.
    @Test func anEnrolmentsRecoveryCodesAreNotReplayedToAnEndedSession() async throws {
        try await ParseApp.run { parse in
            let (objectId, session) = try await appleUser(parse, "apple-replayed")
            let secret = Base32.encode(TOTP.generateSecret())
            let body: JSONValue = .object([
                "authData": .object(["mfa": ParseApp.strings(["secret": secret, "token": try TOTP(secret: try Base32.decode(secret)).code(at: Date())])]),
            ])
            let requestId = UUID().uuidString.lowercased()
            let enrolled = try await parse.send("PUT", "/users/\(objectId)", .init(session: session, requestId: requestId), json: body)
            #expect(enrolled.text.contains("recovery"), "\(enrolled.text)")
            #expect(try await parse.send("POST", "/logout", .init(session: session)).status == 200)
            let retried = try await parse.send("PUT", "/users/\(objectId)", .init(session: session, requestId: requestId), json: body)
            #expect(retried.code == 209 && !retried.text.contains("recovery"), "\(retried.text)")
        }
    }

    @Test func totpEnrolmentAnswersRecoveryCodesOnceAndLogInNeedsTheToken() async throws {
        try await ParseApp.run { parse in
            let (objectId, session) = try await appleUser(parse, "apple-totp")
            let secret = Base32.encode(TOTP.generateSecret())
            let totp = try TOTP(secret: try Base32.decode(secret))
            let wrong = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "authData": .object(["mfa": ParseApp.strings(["secret": secret, "token": "000000" == totp.code(at: Date()) ? "111111" : "000000"])]),
            ]))
            #expect(wrong.text == #"{"code":141,"error":"Invalid MFA token"}"#)
            // A secret that is no base32 (lower case) and one too short are each told apart.
            for (given, told, notTold) in [
                (secret.lowercased(), "is base32", "at least 20"), (String(secret.prefix(16)), "at least 20 bytes", "upper-case"),
            ] {
                let refused = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                    "authData": .object(["mfa": ParseApp.strings(["secret": given, "token": totp.code(at: Date())])]),
                ]))
                #expect(refused.body["code"] == 142 && refused.text.contains(told) && !refused.text.contains(notTold), "\(refused.text)")
            }
            let enrolled = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "authData": .object(["mfa": ParseApp.strings(["secret": secret, "token": totp.code(at: Date())])]),
            ]))
            #expect(enrolled.status == 200, "\(enrolled.text)")
            guard case .object(let response)? = enrolled.body["authDataResponse"], case .object(let mfa)? = response["mfa"],
                  case .string(let recovery)? = mfa["recovery"] else {
                Issue.record("no recovery codes: \(enrolled.text)"); return
            }
            let codes = recovery.split(separator: ",").map(String.init)
            #expect(codes.count == 10)
            let me = try await parse.send("GET", "/users/me", .init(session: session))
            #expect(me.authData["mfa"] == ["status": "enabled"])
            #expect(!me.text.contains(secret))

            let missing = try await appleLogIn(parse, "apple-totp", mfa: nil)
            #expect(missing.status == 400)
            #expect(missing.text == #"{"code":-1,"error":"Missing additional authData mfa"}"#)
            let bad = try await appleLogIn(parse, "apple-totp", mfa: ["token": "12345x"])
            #expect(bad.text == #"{"code":141,"error":"Invalid MFA token"}"#)
            let next = totp.code(at: Date().addingTimeInterval(30))
            let good = try await appleLogIn(parse, "apple-totp", mfa: ["token": next])
            #expect(good.status == 200, "\(good.text)")
            #expect(ParseWire.isSessionToken(good.string("sessionToken")))
            let session2 = try #require(good.string("sessionToken"))
            let amr = try await parse.app.admin.query("""
                SELECT amr FROM sessions WHERE secret_kind = 'parse_session_token' ORDER BY started_at DESC LIMIT 1
                """)[0].decode("amr", as: String.self)
            #expect(amr.contains("mfa"))
            #expect(try await parse.send("GET", "/users/me", .init(session: session2)).status == 200)
            // A recovery code works once.
            #expect(try await appleLogIn(parse, "apple-totp", mfa: ["token": codes[0]]).status == 200)
            #expect(try await appleLogIn(parse, "apple-totp", mfa: ["token": codes[0]]).code == 141)

            // A second secret enrolled the same way signs in with its own codes too.
            let newSecret = Base32.encode(TOTP.generateSecret())
            let newTOTP = try TOTP(secret: try Base32.decode(newSecret))
            let reenrolled = try await parse.send("PUT", "/users/\(objectId)", .init(session: session2), json: .object([
                "authData": .object(["mfa": ParseApp.strings(["secret": newSecret, "token": newTOTP.code(at: Date())])]),
            ]))
            #expect(reenrolled.status == 200, "\(reenrolled.text)")
            let withNew = try await appleLogIn(parse, "apple-totp", mfa: ["token": newTOTP.code(at: Date().addingTimeInterval(30))])
            #expect(withNew.status == 200, "\(withNew.text)")
        }
    }

    /// Parse's clients finish a two-factor log-in by sending the same `authData` again with `mfa.token`. A token with
    /// a nonce had its nonce spent by the first attempt, so the second was refused (101) and the person had to sign
    /// in with Apple again. The nonce now goes back while the second factor is missing or wrong, and is spent by
    /// the log-in that proves it.
    @Test func aLogInWithANonceIsFinishedByTheSameTokenAndItsSecondFactor() async throws {
        try await ParseApp.run { parse in
            let (objectId, session) = try await appleUser(parse, "apple-nonce-mfa")
            let totp = try await enrolTOTP(parse, objectId: objectId, session: session)
            let credential = try await parse.app.appleWithNonce("apple-nonce-mfa")
            guard case .string(let token)? = credential.credential["identityToken"], case .string(let nonce)? = credential.credential["rawNonce"] else {
                Issue.record("no token and nonce: \(credential)"); return
            }
            func logIn(_ mfa: [String: String]?) async throws -> ParseAnswer {
                var authData: [String: JSONValue] = ["apple": ParseApp.strings(["id": "apple-nonce-mfa", "token": token, "nonce": nonce])]
                if let mfa { authData["mfa"] = ParseApp.strings(mfa) }
                return try await parse.send("POST", "/users", json: .object(["authData": .object(authData)]))
            }
            let missing = try await logIn(nil)
            #expect(missing.code == -1, "\(missing.text)")
            let wrong = try await logIn(["token": "000000" == totp.code(at: Date()) ? "111111" : "000000"])
            #expect(wrong.code == 141, "\(wrong.text)")
            let code = totp.code(at: Date().addingTimeInterval(30))
            let done = try await logIn(["token": code])
            #expect(done.status == 200 && done.string("objectId") == objectId, "\(done.text)")
            let replayed = try await logIn(["token": totp.code(at: Date().addingTimeInterval(60))])
            #expect(replayed.code == 101, "the log-in spent the nonce: \(replayed.text)")
        }
    }

    /// An enrolment is a command of its own: sent beside a password change it is refused before anything is
    /// written (the password, and the sessions it would end, stay as they were); beside an unlink of a provider
    /// the user does not have (Parse-Swift's `"anonymous": null`), nothing else changes and it is enrolled.
    @Test func anEnrolmentBesideOtherChangesIsRefusedWhole() async throws {
        try await ParseApp.run { parse in
            let signedUp = try await parse.send("POST", "/users", json: .object(["username": "mfa-alone@example.com", "password": "first password 1"]))
            let objectId = try #require(signedUp.string("objectId"))
            try await parse.proveEmail(objectId: objectId)
            let session = try #require(signedUp.string("sessionToken"))
            let secret = Base32.encode(TOTP.generateSecret())
            let totp = try TOTP(secret: try Base32.decode(secret))
            let before = try await parse.accountEvents()
            let refused = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "password": "second password 2",
                "authData": .object(["mfa": ParseApp.strings(["secret": secret, "token": totp.code(at: Date())])]),
            ]))
            #expect(refused.code == 142, "\(refused.text)")
            #expect(try await parse.accountEvents() == before, "nothing written")
            #expect(try await parse.send("GET", "/users/me", .init(session: session)).status == 200, "the session lives")
            let logIn = try await parse.send("POST", "/login", json: .object(["username": "mfa-alone@example.com", "password": "first password 1"]))
            #expect(logIn.status == 200, "the password is the first: \(logIn.text)")

            let enrolled = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "authData": .object(["anonymous": .null, "mfa": ParseApp.strings(["secret": secret, "token": totp.code(at: Date())])]),
            ]))
            #expect(enrolled.status == 200, "\(enrolled.text)")
        }
    }

    /// A password set with a session proves no more than the session did: the session it answers keeps that
    /// session's sign-in time, so a stolen token ten minutes old cannot set a password and then, with the new
    /// session, remove the second factors a recent log-in is needed for.
    @Test func aPasswordChangedWithAStaleSessionDoesNotMakeARecentLogIn() async throws {
        try await ParseApp.run { parse in
            let signedUp = try await parse.send("POST", "/users", json: .object(["username": "stale@example.com", "password": "first password 1"]))
            let objectId = try #require(signedUp.string("objectId"))
            try await parse.proveEmail(objectId: objectId)
            let fresh = try #require(signedUp.string("sessionToken"))
            // A session of the same user whose log-in was ten minutes ago.
            var (old, staleToken) = ParseSessionTokenFormat().newSession(provider: "password", installationId: nil, now: Date())
            old.authTime = Date().addingTimeInterval(-600)
            _ = try await parse.app.service.commands.signIn(SignInCommand(
                credential: .password(email: "stale@example.com", password: "first password 1"), session: old, context: CommandContext()))
            try await enrolTOTP(parse, objectId: objectId, session: fresh)
            let removeFactors: JSONValue = .object(["authData": .object(["mfa": .null])])
            #expect(try await parse.send("PUT", "/users/\(objectId)", .init(session: staleToken), json: removeFactors).code == 119)
            let changed = try await parse.send("PUT", "/users/\(objectId)", .init(session: staleToken), json: .object(["password": "taken over 1"]))
            #expect(changed.status == 200, "\(changed.text)")
            let next = try #require(changed.string("sessionToken"))
            let removed = try await parse.send("PUT", "/users/\(objectId)", .init(session: next), json: removeFactors)
            #expect(removed.code == 119, "the new session is as old as the one that set the password: \(removed.text)")
        }
    }

    /// A second factor guards a proved address (Parse Server asks none; Tether's directory does on every surface):
    /// a password user whose email nobody proved gets 119 and enrols nothing, until the address is proved.
    @Test func anEnrolmentNeedsAProvedEmail() async throws {
        try await ParseApp.run { parse in
            let signedUp = try await parse.send("POST", "/users", json: .object(["username": "unproved@example.com", "password": "first password 1"]))
            let objectId = try #require(signedUp.string("objectId"))
            let session = try #require(signedUp.string("sessionToken"))
            let secret = Base32.encode(TOTP.generateSecret())
            let totp = try TOTP(secret: try Base32.decode(secret))
            let enrol: JSONValue = .object(["authData": .object(["mfa": ParseApp.strings(["secret": secret, "token": totp.code(at: Date())])])])
            let before = try await parse.accountEvents()
            let refused = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: enrol)
            #expect(refused.code == 119 && refused.string("error")?.contains("proved email") == true, "\(refused.text)")
            let sms = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "authData": .object(["mfa": ParseApp.strings(["mobile": "+15555550177"])]),
            ]))
            #expect(sms.code == 119, "\(sms.text)")
            #expect(try await parse.accountEvents() == before, "nothing written")
            try await parse.proveEmail(objectId: objectId)
            let enrolled = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: enrol)
            #expect(enrolled.status == 200, "\(enrolled.text)")
            // The master key may not mark the address unproved under the factor, but may beside its removal.
            let master = try await parse.app.adminKey(.admin).secret
            let unproved = try await parse.send("PUT", "/users/\(objectId)", .init(master: master), json: .object(["emailVerified": .bool(false)]))
            #expect(unproved.code == 119, "\(unproved.text)")
            let reset = try await parse.send("PUT", "/users/\(objectId)", .init(master: master), json: .object([
                "emailVerified": .bool(false), "authData": .object(["mfa": .null]),
            ]))
            #expect(reset.status == 200, "\(reset.text)")
        }
    }

    /// A log-in of an account with a factor and no address, with another identity whose address its provider did not
    /// verify, would give the account that unproved address: it is refused before the sign-in, so no session opens
    /// and the code is not spent.
    @Test func aLogInThatWouldGiveAFactorsAccountAnUnprovedAddressOpensNoSession() async throws {
        try await ParseApp.run { parse in
            let (objectId, session) = try await appleUser(parse, "apple-no-address-mfa")
            let totp = try await enrolTOTP(parse, objectId: objectId, session: session)
            let events = try await parse.accountEvents()
            let refused = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-no-address-mfa", "token": try await parse.appleToken("apple-no-address-mfa")]),
                "mfa": ParseApp.strings(["token": totp.code(at: Date().addingTimeInterval(30))]),
                "facebook": ParseApp.strings([
                    "id": "fb-someone", "access_token": try await parse.facebookToken("fb-someone", email: "someone@gmail.com"),
                ]),
            ])]))
            #expect(refused.code == 119, "\(refused.text)")
            #expect(try await parse.accountEvents() == events, "no sign-in, session or spent code")
        }
    }

    /// A sign-up or log-in carrying an enrolment (`mfa.secret`, `mfa.mobile`) enrolled nothing and answered 201:
    /// it is refused before anything is written, as the factor is enrolled with the user's own PUT.
    @Test func anEnrolmentInASignUpIsRefused() async throws {
        try await ParseApp.run { parse in
            let before = try await parse.accountEvents()
            for mfa in [["secret": Base32.encode(TOTP.generateSecret()), "token": "000000"], ["mobile": "+15555550177"]] {
                let answer = try await parse.send("POST", "/users", json: .object(["authData": .object([
                    "anonymous": .object(["id": .string(UUID().uuidString)]), "mfa": ParseApp.strings(mfa),
                ])]))
                #expect(answer.code == 142, "\(answer.text)")
            }
            #expect(try await parse.accountEvents() == before)
        }
    }

    /// An SMS enrolment asked for three times (a user who did not get the first text asks again) is confirmed by the
    /// newest code, and an older one is refused. Three users: a lookup that took any of the three enrolments passed
    /// for one user in three.
    @Test func anSMSEnrolmentSentAgainIsConfirmedByItsNewestCode() async throws {
        try await ParseApp.run { parse in
            for index in 0..<3 {
                let (objectId, session) = try await appleUser(parse, "apple-resend-\(index)")
                let phone = "+1555555016\(index)"
                var codes: [String] = []
                for _ in 0..<3 {
                    let sent = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                        "authData": .object(["mfa": ParseApp.strings(["mobile": phone])]),
                    ]))
                    #expect(sent.status == 200, "\(sent.text)")
                    codes.append(try await parse.app.smsCode(to: phone))
                }
                func confirm(_ code: String) async throws -> ParseAnswer {
                    try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                        "authData": .object(["mfa": ParseApp.strings(["mobile": phone, "token": code])]),
                    ]))
                }
                if codes[0] != codes[2] { #expect(try await confirm(codes[0]).body["code"] == 141, "user \(index)") }
                let confirmed = try await confirm(codes[2])
                #expect(confirmed.status == 200, "user \(index): \(confirmed.text)")
            }
        }
    }

    /// A text that cannot be sent is a retryable 503 whose message names neither the webhook nor how it failed.
    @Test func anSMSThatCannotBeSentIsA503ThatNamesNoWebhook() async throws {
        let receiver = try WebhookReceiver()
        receiver.isUp = false
        let sender = WebhookSMSSender(configuration: .init(url: receiver.url, secret: "a webhook secret of some length"))
        try await ParseApp.run(sms: sender) { parse in
            let (objectId, session) = try await appleUser(parse, "apple-sms-down")
            let refused = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "authData": .object(["mfa": ParseApp.strings(["mobile": "+15555550143"])]),
            ]))
            #expect(refused.status == 503, "\(refused.text)")
            #expect(refused.text == #"{"code":1,"error":"The text message could not be sent; try again shortly."}"#)
        }
        await receiver.stop()
    }

    @Test func smsEnrolmentAndTheRequestedTokenOfALogIn() async throws {
        try await ParseApp.run { parse in
            let (objectId, session) = try await appleUser(parse, "apple-sms")
            let phone = "+15555550142"
            let started = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "authData": .object(["mfa": ParseApp.strings(["mobile": phone])]),
            ]))
            #expect(started.status == 200, "\(started.text)")
            #expect(started.body["authDataResponse"] == nil)
            let confirmed = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "authData": .object(["mfa": ParseApp.strings(["mobile": phone, "token": try await parse.app.smsCode(to: phone)])]),
            ]))
            #expect(confirmed.status == 200, "\(confirmed.text)")
            #expect(confirmed.body["authDataResponse"] != nil)

            let requested = try await appleLogIn(parse, "apple-sms", mfa: ["token": "request"])
            #expect(requested.text == #"{"code":141,"error":"Please enter the token"}"#)
            let code = try await parse.app.smsCode(to: phone)
            let loggedIn = try await appleLogIn(parse, "apple-sms", mfa: ["token": code])
            #expect(loggedIn.status == 200, "\(loggedIn.text)")
            #expect(loggedIn.string("objectId") == objectId)
            // The texted code was for one log-in only.
            #expect(try await appleLogIn(parse, "apple-sms", mfa: ["token": code]).code == 141)
        }
    }

    /// `{"authData": {"mfa": null}}` answered 200 and left MFA on. It removes the factors, with the recent
    /// log-in the domain asks of any factor removal: an old session is refused (119) and changes nothing.
    @Test func mfaNullRemovesTheFactorsAfterARecentLogIn() async throws {
        try await ParseApp.run { parse in
            let (objectId, session) = try await appleUser(parse, "apple-off")
            let totp = try await enrolTOTP(parse, objectId: objectId, session: session)
            let off: JSONValue = .object(["authData": .object(["mfa": .null])])
            _ = try await parse.app.admin.query("UPDATE sessions SET auth_time = auth_time - interval '1 day'")
            let events = try await parse.accountEvents()
            let stale = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: off)
            #expect(stale.code == 119, "\(stale.text)")
            #expect(try await parse.accountEvents() == events)
            #expect(try await parse.send("GET", "/users/me", .init(session: session)).authData["mfa"] == ["status": "enabled"])

            let fresh = try #require(try await appleLogIn(parse, "apple-off", mfa: ["token": totp.code(at: Date().addingTimeInterval(30))])
                .string("sessionToken"))
            let removed = try await parse.send("PUT", "/users/\(objectId)", .init(session: fresh), json: off)
            #expect(removed.status == 200, "\(removed.text)")
            #expect(try await parse.send("GET", "/users/me", .init(session: fresh)).authData["mfa"] == nil)
            #expect(try await appleLogIn(parse, "apple-off", mfa: nil).status == 200, "no second factor is asked for")
        }
    }
}
