import Foundation
import Synchronization
import Testing
import TetherAPI
@testable import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders
import TetherTesting

/// Second factors over real HTTP: enrolment, the challenge of every sign-in, limits and recovery codes.
@Suite("/v1 multi-factor authentication over HTTP")
struct V1MFATests {
    struct Enrolment: Decodable {
        var factorId: String
        var secret: String
        var otpauthUri: String
    }

    /// A factor as the API shows it.
    struct Factor: Decodable {
        var id: String
        var type: String
        var displayName: String?
        var phoneHint: String?
    }

    struct Confirmed: Decodable {
        var factor: Factor
        var recoveryCodes: [String]?
    }

    struct MFARequired: Decodable {
        var code: String
        var mfaPendingCredential: String
        var factors: [Factor]
    }

    struct Completed: Decodable {
        var user: SignedIn.User
        var session: SignedIn.Session
    }

    // MARK: Helpers

    /// Signs in with `credential` and enrols + confirms a TOTP factor; answers the sign-in, the TOTP and the confirmation.
    private func userWithTOTP(_ app: DevService, _ credential: Credential) async throws -> (SignedIn, TOTP, Confirmed, UInt64) {
        let user = try await app.signedIn(credential)
        let enrol = try await app.client.post(
            "/v1/users/me/mfa/totp", headers: ["Authorization": "Bearer \(user.session.accessToken)"], json: ["displayName": "Phone app"])
        #expect(enrol.status == 201)
        let enrolment = try enrol.decodeJSON(Enrolment.self)
        #expect(enrolment.otpauthUri.hasPrefix("otpauth://totp/"))
        #expect(enrolment.otpauthUri.contains("secret=\(enrolment.secret)"))
        let totp = try TOTP(secret: try Base32.decode(enrolment.secret))
        let step = totp.step(at: Date())
        let confirm = try await app.client.post(
            "/v1/users/me/mfa/totp/verify", headers: ["Authorization": "Bearer \(user.session.accessToken)"],
            json: ["factorId": enrolment.factorId, "code": totp.code(forStep: step)])
        #expect(confirm.status == 200, "\(confirm.bodyText)")
        return (user, totp, try confirm.decodeJSON(Confirmed.self), step)
    }

    private func mfaRequired(_ response: HTTPTestClient.Response) throws -> MFARequired {
        #expect(response.status == 401)
        return try response.decodeJSON(MFARequired.self)
    }

    private func verify(_ app: DevService, _ body: [String: String], headers: KeyValuePairs<String, String> = [:])
        async throws -> HTTPTestClient.Response
    {
        try await app.client.post("/v1/mfa/verify", headers: headers, json: body)
    }


    // MARK: TOTP

    @Test func aTOTPUserSignsInWithBothFactorsAndAmrNamesThem() async throws {
        try await DevService.run { app in
            let (user, totp, confirmed, step) = try await userWithTOTP(app, try await app.apple("apple-totp"))
            #expect(confirmed.factor.type == "totp")
            #expect(confirmed.factor.displayName == "Phone app")
            #expect(confirmed.recoveryCodes?.count == 10, "the first factor comes with ten recovery codes")
            #expect(Set(confirmed.recoveryCodes ?? []).count == 10)
            let me = try await app.me(user.session.accessToken).decodeJSON(UserMFAEnvelope.self)
            #expect(me.user.mfa.map(\.type) == ["totp"])

            let challenge = try mfaRequired(try await app.signIn(try await app.apple("apple-totp")))
            #expect(challenge.code == "mfa_required")
            #expect(challenge.factors.map(\.type) == ["totp"])
            #expect(challenge.factors.first?.id == confirmed.factor.id)

            let done = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": confirmed.factor.id,
                                             "code": totp.code(forStep: step + 1)])
            #expect(done.status == 200, "\(done.bodyText)")
            let completed = try done.decodeJSON(Completed.self)
            #expect(completed.user.id == user.user.id)
            let claims = try JOSEObject(parsing: Base64URL.decode(String(completed.session.accessToken.split(separator: ".")[1])))
            #expect(claims["amr"]?.arrayValue?.compactMap(\.stringValue) == ["apple", "otp", "mfa"])
            let shown = try await app.me(completed.session.accessToken)
            #expect(shown.status == 200)
            // The answer's user is the state the command left, the one the read models then show.
            let (answered, read) = (try done.json["user"], try shown.json["user"])
            #expect(answered == read, "\(done.bodyText) against \(shown.bodyText)")
            #expect(try await app.refresh(completed.session.refreshToken).status == 200)

            // A second, different factor gets no new recovery codes.
            let second = try await app.client.post(
                "/v1/users/me/mfa/totp", headers: ["Authorization": "Bearer \(completed.session.accessToken)"], body: [])
            let enrolment = try second.decodeJSON(Enrolment.self)
            let secondTOTP = try TOTP(secret: try Base32.decode(enrolment.secret))
            let again = try await app.client.post(
                "/v1/users/me/mfa/totp/verify", headers: ["Authorization": "Bearer \(completed.session.accessToken)"],
                json: ["factorId": enrolment.factorId, "code": secondTOTP.code(at: Date())])
            #expect(again.status == 200)
            #expect(try again.decodeJSON(Confirmed.self).recoveryCodes == nil)
        }
    }

    @Test func totpCodesFollowRFC6238WindowsAndAreNeverUsedTwice() async throws {
        try await DevService.run { app in
            let accounts = AccountService(database: app.admin, emailPolicy: .oneAccountPerEmail)
            let user = try await app.signedIn(try await app.apple("apple-window"))
            let userId = UUID(uuidString: user.user.id)!
            // A step boundary in the recent past: the time of the enrolment is ours to choose.
            let step = UInt64(Date().timeIntervalSince1970 / 30) - 20
            let start = Date(timeIntervalSince1970: Double(step) * 30)
            let enrolment = try await accounts.enrolTOTP(userId: userId, authTime: start, displayName: nil, context: CommandContext(now: start))
            let totp = try TOTP(secret: try Base32.decode(enrolment.secret))
            let factorId = enrolment.factorId

            // The code of step s works from its first instant to one step after its last (window +-1) …
            let code = totp.code(forStep: step)
            let early = CommandContext(now: start.addingTimeInterval(-30.001))
            // Each command its own id (a shared one would make later commands retries of the first).
            let end = start.addingTimeInterval(59.999)
            var atEnd: CommandContext { CommandContext(now: end) }
            await #expect(throws: AccountError.self) {
                _ = try await accounts.confirmFactor(userId: userId, factorId: factorId, type: .totp, code: code, context: early)
            }
            let confirmed = try await accounts.confirmFactor(userId: userId, factorId: factorId, type: .totp, code: code, context: atEnd)
            #expect(confirmed.factor.isConfirmed)

            // … and then never again, nor any earlier step's code, while the next step's code still works.
            let outcome = try await accounts.signIn(
                ExternalIdentity(provider: "apple", uid: "apple-window", email: nil, isEmailVerified: false),
                session: NewSession(id: UUID(), refreshTokenHash: "h", amr: ["apple"]), context: atEnd)
            let challengeId = try #require(outcome.challenge?.id)
            for (reused, reason) in [(code, "reused"), (totp.code(forStep: step - 1), "earlier")] {
                do {
                    _ = try await accounts.verifyChallenge(
                        userId: userId, challengeId: challengeId, factorId: factorId, code: reused, recoveryCode: nil,
                        session: NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: []), context: atEnd)
                    Issue.record("the \(reason) code was accepted")
                } catch let error as AccountError {
                    #expect(error.code == "invalid_code", "\(reason)")
                }
            }
            let tooLate = CommandContext(now: start.addingTimeInterval(90))
            await #expect(throws: AccountError.self, "step s+1's code is out of the window at step s+3") {
                _ = try await accounts.verifyChallenge(
                    userId: userId, challengeId: challengeId, factorId: factorId, code: totp.code(forStep: step + 1), recoveryCode: nil,
                    session: NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: []), context: tooLate)
            }
            let (session, _) = try await accounts.verifyChallenge(
                userId: userId, challengeId: challengeId, factorId: factorId, code: totp.code(forStep: step + 1), recoveryCode: nil,
                session: NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: []), context: atEnd)
            #expect(session.amr == ["apple", "otp", "mfa"])
            let rejected = try await app.admin.query("""
                SELECT data->>'reason' AS reason FROM events WHERE type = 'MFACodeRejected' ORDER BY position
                """).map { try $0.decode("reason", as: String.self) }
            #expect(rejected == ["wrong_code", "reused_code", "wrong_code", "wrong_code"])
        }
    }

    // MARK: Phone

    @Test func aPhoneFactorIsConfirmedAndUsedThroughTheDevOutbox() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.google("google-phone"))
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(user.session.accessToken)"]
            let invalid = try await app.client.post("/v1/users/me/mfa/phone", headers: auth, json: ["phoneNumber": "555-0100"])
            #expect(invalid.status == 400)
            let enrol = try await app.client.post("/v1/users/me/mfa/phone", headers: auth, json: ["phoneNumber": "+15555550100"])
            #expect(enrol.status == 201)
            let factorId = try enrol.decodeJSON([String: String].self)["factorId"]!
            let confirm = try await app.client.post(
                "/v1/users/me/mfa/phone/verify", headers: auth,
                json: ["factorId": factorId, "code": try await app.smsCode(to: "+15555550100")])
            #expect(confirm.status == 200)
            #expect(try confirm.decodeJSON(Confirmed.self).factor.phoneHint == "+*******0100")

            let challenge = try mfaRequired(try await app.signIn(try await app.google("google-phone")))
            #expect(challenge.factors.first?.phoneHint == "+*******0100")
            let noCode = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": factorId, "code": "000000"])
            #expect(try noCode.decodeJSON(ProblemBody.self).code == "invalid_code", "no code was sent for the challenge yet")
            let sent = try await app.client.post(
                "/v1/mfa/challenge", json: ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": factorId])
            #expect(sent.status == 200)
            let done = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": factorId,
                                             "code": try await app.smsCode(to: "+15555550100")])
            #expect(done.status == 200, "\(done.bodyText)")
            let claims = try JOSEObject(parsing: Base64URL.decode(
                String(try done.decodeJSON(Completed.self).session.accessToken.split(separator: ".")[1])))
            #expect(claims["amr"]?.arrayValue?.compactMap(\.stringValue) == ["google", "sms", "mfa"])
        }
    }

    @Test func recoveryCodesAreStoredAsKeyedHashesAndCodesIssuedBeforeKeysStillWork() async throws {
        try await DevService.run { app in
            let (user, _, confirmed, _) = try await userWithTOTP(app, try await app.apple("apple-keyed"))
            let codes = try #require(confirmed.recoveryCodes)
            let issued: String = try await app.admin.query("""
                SELECT data::text AS data FROM events WHERE type = 'MFARecoveryCodesIssued' AND user_id = \(user.user.id)::uuid
                """)[0].decode("data")
            #expect(issued.components(separatedBy: "\"k1:").count == 11, "ten keyed hashes")
            let unkeyed = { (code: String) in
                DigestAlgorithm.sha256.hash(Array(("recovery:" + code.lowercased().filter { $0.isLetter || $0.isNumber }).utf8)).hexString
            }
            #expect(!issued.contains(unkeyed(codes[0])), "the unkeyed hash, searchable offline, is not stored")
            let stored: String = try await app.admin.query("SELECT key FROM hash_keys WHERE name = 'recovery-codes'")[0].decode("key")
            #expect(!stored.isEmpty)

            // A code issued before keyed hashes (its unkeyed hash in the log) is still accepted, once.
            let id = UUID(uuidString: user.user.id)!
            let version: Int = try await app.admin.query("SELECT max(version)::int AS v FROM events WHERE stream = \("user-" + user.user.id)")[0].decode("v")
            let legacy = try AccountEventCodec.encode(
                .mfaRecoveryCodesIssued(.init(codeHashes: [unkeyed("abcde-fghij")])), userId: id, id: UUID())
            _ = try await PostgresEventStore(client: app.admin).append([legacy], to: .user(id), expected: .exact(version), metadata: EventMetadata())
            let challenge = try mfaRequired(try await app.signIn(try await app.apple("apple-keyed")))
            let done = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "recoveryCode": "ABCDE-FGHIJ"])
            #expect(done.status == 200, "\(done.bodyText)")
            let again = try mfaRequired(try await app.signIn(try await app.apple("apple-keyed")))
            #expect(try await verify(app, ["mfaPendingCredential": again.mfaPendingCredential, "recoveryCode": "abcde-fghij"]).status == 401)
        }
    }

    @Test func whenTheSMSWebhookIsDownTheAnswerIs503AndNothingIsLost() async throws {
        let receiver = try WebhookReceiver()
        let sender = WebhookSMSSender(configuration: .init(url: receiver.url, secret: "a webhook secret of some length"))
        try await DevService.run(sms: sender) { app in
            let user = try await app.signedIn(try await app.apple("apple-webhook"))
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(user.session.accessToken)"]

            receiver.isUp = false
            let refused = try await app.client.post("/v1/users/me/mfa/phone", headers: auth, json: ["phoneNumber": "+15555550199"])
            #expect(refused.status == 503)
            #expect(try refused.decodeJSON(ProblemBody.self).code == "sms_unavailable")
            #expect(!refused.headers.values(for: "Retry-After").isEmpty)
            let factors: Int = try await app.admin.query("SELECT count(*)::int AS n FROM mfa_factors")[0].decode("n")
            #expect(factors == 0, "a code that never left enrols nothing")

            receiver.isUp = true
            let enrol = try await app.client.post("/v1/users/me/mfa/phone", headers: auth, json: ["phoneNumber": "+15555550199"])
            #expect(enrol.status == 201)
            let factorId = try enrol.decodeJSON([String: String].self)["factorId"]!
            let confirm = try await app.client.post(
                "/v1/users/me/mfa/phone/verify", headers: auth, json: ["factorId": factorId, "code": try receiver.lastCode()])
            #expect(confirm.status == 200)

            let challenge = try mfaRequired(try await app.signIn(try await app.apple("apple-webhook")))
            receiver.isUp = false
            let down = try await app.client.post(
                "/v1/mfa/challenge", json: ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": factorId])
            #expect(down.status == 503)
            #expect(try await app.eventCount("MFACodeDeliveryFailed") == 2, "support staff see the failed sends")
            #expect(try await app.eventCount("MFACodeRejected") == 0, "a failed send is never a wrong code")

            receiver.isUp = true
            let up = try await app.client.post(
                "/v1/mfa/challenge", json: ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": factorId])
            #expect(up.status == 200, "the same challenge carries on")
            let done = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": factorId,
                                             "code": try receiver.lastCode()])
            #expect(done.status == 200)
        }
        await receiver.stop()
    }

    @Test func theHistoryTellsWhyAUserCouldNotGetIn() async throws {
        try await DevService.run { app in
            let (user, totp, confirmed, step) = try await userWithTOTP(app, try await app.apple("apple-history"))
            let challenge = try mfaRequired(try await app.signIn(try await app.apple("apple-history")))
            _ = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": confirmed.factor.id,
                                       "code": totp.code(forStep: step + 9)])
            _ = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": confirmed.factor.id,
                                       "code": totp.code(forStep: step + 1)])
            let page = try await UserHistory(database: app.admin).all(of: UUID(uuidString: user.user.id)!)
            let lines = page.entries.filter { $0.type.hasPrefix("MFA") }.map { "\($0.type): \($0.summary.text)" }
            let short = { (id: String) in String(id.prefix(8)) }
            let claims = try JOSEObject(parsing: Base64URL.decode(String(challenge.mfaPendingCredential.split(separator: ".")[1])))
            let challengeId = short(try #require(claims["jti"]?.stringValue))
            #expect(lines.count == 7)
            #expect(Array(lines.prefix(5)) == [
                "MFAFactorEnrolled: totp factor \(short(confirmed.factor.id)) \"Phone app\" enrolment started",
                "MFAFactorConfirmed: factor \(short(confirmed.factor.id)) confirmed",
                "MFARecoveryCodesIssued: 10 recovery codes issued",
                "MFAChallengeIssued: second factor required after apple (challenge \(challengeId))",
                "MFACodeRejected: totp code rejected: wrong_code, attempt 1 of 5 (challenge \(challengeId))",
            ])
            #expect(lines.count == 7 && lines[5].hasPrefix("MFACodeAccepted: totp code accepted (challenge \(challengeId)), session "))
            #expect(lines.last == "MFAChallengeEnded: challenge \(challengeId) ended (completed)")
            let table = HistoryTable.render(page)
            #expect(table.contains("code rejected: wrong_code, attempt 1 of 5"))
            #expect(!table.contains(Base32.encode(totp.secret)), "the TOTP secret never shows")
        }
    }

    // MARK: Limits and pending credentials

    @Test func parallelEnrolmentsOfOneUserSendAtMostTheLimit() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-sms-burst"))
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        try await app.withNewClient {
                            try await $0.post("/v1/users/me/mfa/phone", headers: ["Authorization": "Bearer \(user.session.accessToken)"],
                                              json: ["phoneNumber": "+15555550188"])
                        }.status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            struct Outbox: Decodable { var messages: [[String: JSONValue]] }
            let sent = try await app.idp.get("/dev-idp/sms?phoneNumber=%2B15555550188").decodeJSON(Outbox.self).messages.count
            #expect(sent <= 5, "\(statuses.sorted())")
            #expect(statuses.filter { $0 == 201 }.count == sent)
            #expect(statuses.allSatisfy { $0 == 201 || $0 == 429 })
        }
    }

    @Test func smsCodesToOneNumberAreLimitedWhoeverAsks() async throws {
        try await DevService.run { app in
            var statuses: [Int] = []
            for index in 0..<6 {
                let user = try await app.signedIn(try await app.apple("apple-sms-\(index)"))
                let response = try await app.client.post(
                    "/v1/users/me/mfa/phone", headers: ["Authorization": "Bearer \(user.session.accessToken)"],
                    json: ["phoneNumber": "+15555550177"])
                statuses.append(response.status)
                if response.status == 429 {
                    #expect(try response.decodeJSON(ProblemBody.self).code == "rate_limited")
                    #expect(!response.headers.values(for: "Retry-After").isEmpty)
                }
            }
            #expect(statuses == [201, 201, 201, 201, 201, 429])
            struct Outbox: Decodable { var messages: [[String: JSONValue]] }
            let outbox = try await app.idp.get("/dev-idp/sms?phoneNumber=%2B15555550177").decodeJSON(Outbox.self)
            #expect(outbox.messages.count == 5)
        }
    }

    @Test func fiveWrongCodesEndTheChallengeAndRepeatedFailuresBackOff() async throws {
        try await DevService.run { app in
            let (_, totp, confirmed, step) = try await userWithTOTP(app, try await app.apple("apple-wrong"))
            let challenge = try mfaRequired(try await app.signIn(try await app.apple("apple-wrong")))
            let wrong = totp.code(forStep: step + 10)
            for attempt in 1...5 {
                let response = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential,
                                                      "factorId": confirmed.factor.id, "code": wrong])
                #expect(response.status == 401)
                #expect(try response.decodeJSON(ProblemBody.self).code == "invalid_code", "attempt \(attempt)")
            }
            let ended = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential,
                                               "factorId": confirmed.factor.id, "code": totp.code(forStep: step + 1)])
            #expect(try ended.decodeJSON(ProblemBody.self).code == "invalid_mfa_pending_credential", "the right code comes too late")
            let attempts = try await app.admin.query("""
                SELECT (data->>'attempt')::int AS attempt FROM events WHERE type = 'MFACodeRejected' ORDER BY position
                """).map { try $0.decode("attempt", as: Int.self) }
            #expect(attempts == [1, 2, 3, 4, 5])
            #expect(try await app.eventCount("MFAChallengeEnded") == 1)

            // A fresh challenge right away must wait.
            let next = try mfaRequired(try await app.signIn(try await app.apple("apple-wrong")))
            let waiting = try await verify(app, ["mfaPendingCredential": next.mfaPendingCredential,
                                                 "factorId": confirmed.factor.id, "code": totp.code(forStep: step + 1)])
            #expect(waiting.status == 429)
            #expect(try waiting.decodeJSON(ProblemBody.self).code == "rate_limited")
            #expect(Int(waiting.headers.values(for: "Retry-After").first ?? "") ?? 0 >= 1)
        }
    }

    @Test func pendingCredentialsAreSingleUseExpireAndBelongToOneUser() async throws {
        try await DevService.run { app in
            let (_, totp, alice, step) = try await userWithTOTP(app, try await app.apple("apple-alice"))
            let (_, _, bob, _) = try await userWithTOTP(app, try await app.apple("apple-bob"))
            let challenge = try mfaRequired(try await app.signIn(try await app.apple("apple-alice")))

            let crossed = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": bob.factor.id,
                                                "code": totp.code(forStep: step + 1)])
            #expect(crossed.status == 404)
            #expect(try crossed.decodeJSON(ProblemBody.self).code == "mfa_factor_not_found", "Alice's credential cannot use Bob's factor")

            let done = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": alice.factor.id,
                                             "code": totp.code(forStep: step + 1)])
            #expect(done.status == 200)
            let reused = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": alice.factor.id,
                                               "code": totp.code(forStep: step + 2)])
            #expect(reused.status == 401)
            #expect(try reused.decodeJSON(ProblemBody.self).code == "invalid_mfa_pending_credential")

            // Expired: the credential's own exp, read five minutes and a bit later.
            let fresh = try mfaRequired(try await app.signIn(try await app.apple("apple-alice")))
            let later = MFAPendingCredentials(keys: SigningKeyStore(client: app.admin), clock: ManualClock(Date().addingTimeInterval(320)))
            let expired = await #expect(throws: AccountError.self) { _ = try await later.read(fresh.mfaPendingCredential) }
            #expect(expired?.code == "invalid_mfa_pending_credential")
            // …and the challenge itself, judged five minutes and a bit later.
            let accounts = AccountService(database: app.admin, emailPolicy: .oneAccountPerEmail)
            let pending = try await MFAPendingCredentials(keys: SigningKeyStore(client: app.admin)).read(fresh.mfaPendingCredential)
            let stale = await #expect(throws: AccountError.self) {
                _ = try await accounts.verifyChallenge(
                    userId: pending.userId, challengeId: pending.challengeId, factorId: UUID(uuidString: alice.factor.id)!,
                    code: totp.code(forStep: step + 11), recoveryCode: nil,
                    session: NewSession(id: UUID(), refreshTokenHash: "x", amr: []), context: CommandContext(now: Date().addingTimeInterval(320)))
            }
            #expect(stale?.code == "invalid_mfa_pending_credential")

            // Forged: an access token is not a pending credential, nor is a credential signed by another key.
            let forged = try JWTSigner(privateKey: try PrivateKey.generate(.ecP256), algorithm: .es256)
                .sign(claims: ["iss": "tether", "sub": .string(pending.userId.uuidString.lowercased()),
                               "jti": .string(pending.challengeId.uuidString.lowercased()),
                               "iat": .number(Date().timeIntervalSince1970), "exp": .number(Date().timeIntervalSince1970 + 60)],
                      type: MFAPendingCredentials.tokenType)
            for credential in [forged, try done.decodeJSON(Completed.self).session.accessToken] {
                let response = try await verify(app, ["mfaPendingCredential": credential, "factorId": alice.factor.id, "code": "123456"])
                #expect(response.status == 401)
                #expect(try response.decodeJSON(ProblemBody.self).code == "invalid_mfa_pending_credential")
            }
        }
    }

    /// A sign-in waiting at its second step does not finish once the user unlinks the provider it began with,
    /// not even after linking the same Apple ID again.
    @Test func aSignInBegunWithAProviderUnlinkedMeanwhileDoesNotFinish() async throws {
        try await DevService.run { app in
            let (user, totp, confirmed, step) = try await userWithTOTP(app, try await app.apple("apple-unlinked-mfa"))
            #expect(try await app.link(try await app.google("google-unlinked-mfa"), to: user.session.accessToken).status == 200)
            let challenge = try mfaRequired(try await app.signIn(try await app.apple("apple-unlinked-mfa")))
            let unlinked = try await app.client.delete(
                "/v1/users/me/identities/apple", headers: ["Authorization": "Bearer \(user.session.accessToken)"])
            #expect(unlinked.status == 200, "\(unlinked.bodyText)")
            #expect(try await app.link(try await app.apple("apple-unlinked-mfa"), to: user.session.accessToken).status == 200)
            #expect(try await app.eventCount("MFAChallengeEnded") == 1, "the unlink ended the sign-in it began")
            let refused = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": confirmed.factor.id,
                                                "code": totp.code(forStep: step + 1)])
            #expect(refused.status == 401, "\(refused.bodyText)")
            #expect(try refused.decodeJSON(ProblemBody.self).code == "invalid_mfa_pending_credential")
            let recovered = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential,
                                                  "recoveryCode": try #require(confirmed.recoveryCodes?.first)])
            #expect(recovered.status == 401, "\(recovered.bodyText)")
        }
    }

    @Test func aSignInBegunWithADeviceKeyIsFinishedOnlyByThatKey() async throws {
        try await DevService.run(settings: ["TETHER_FIREBASE_PROJECT_ID": "demo-project"]) { app in
            let (_, totp, confirmed, step) = try await userWithTOTP(app, try await app.apple("apple-bound-mfa"))
            let device = DeviceKey()
            let challenge = try mfaRequired(try await app.signIn(
                try await app.apple("apple-bound-mfa"), headers: ["DPoP": try device.proof("POST", app.url("/v1/sign-in"))]))
            let body = ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": confirmed.factor.id,
                        "code": totp.code(forStep: step + 1)]
            for headers: KeyValuePairs<String, String> in [[:], ["DPoP": try DeviceKey().proof("POST", app.url("/v1/mfa/verify"))]] {
                let refused = try await verify(app, body, headers: headers)
                #expect(refused.status == 401)
                #expect(try refused.decodeJSON(ProblemBody.self).code == "invalid_dpop_proof")
            }
            // Firebase's surface has no device key: the pending credential is no good there.
            let onFirebase = try await app.client.post(
                "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:finalize?key=k", json: JSONValue.object([
                    "mfaPendingCredential": .string(challenge.mfaPendingCredential), "mfaEnrollmentId": .string(confirmed.factor.id),
                    "totpVerificationInfo": .object(["verificationCode": .string(totp.code(forStep: step + 1))]),
                ]))
            #expect(onFirebase.status == 400 && onFirebase.bodyText.contains("INVALID_MFA_PENDING_CREDENTIAL"), "\(onFirebase.bodyText)")
            #expect(try await app.eventCount("MFACodeRejected") == 0, "a missing or wrong key costs no attempt")
            let done = try await verify(app, body, headers: ["DPoP": try device.proof("POST", app.url("/v1/mfa/verify"))])
            #expect(done.status == 200)
            #expect(try done.decodeJSON(Completed.self).session.tokenType == "DPoP")
        }
    }

    @Test func aBoundChallengesCodeCannotBeResentWithoutTheKeyNorBlockedByStrangers() async throws {
        try await DevService.run(settings: ["TETHER_PARSE_APP_ID": ParseApp.appID]) { app in
            let victim = try await app.signedIn(try await app.apple("apple-victim-phone"))
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(victim.session.accessToken)"]
            let enrol = try await app.client.post("/v1/users/me/mfa/phone", headers: auth, json: ["phoneNumber": "+15555550155"])
            let factorId = try enrol.decodeJSON([String: String].self)["factorId"]!
            #expect(try await app.client.post("/v1/users/me/mfa/phone/verify", headers: auth,
                                              json: ["factorId": factorId, "code": try await app.smsCode(to: "+15555550155")]).status == 200)
            // Strangers enrol the victim's number until the number's enrolment budget is spent.
            for index in 0..<5 {
                let stranger = try await app.signedIn(try await app.apple("apple-stranger-\(index)"))
                _ = try await app.client.post("/v1/users/me/mfa/phone", headers: ["Authorization": "Bearer \(stranger.session.accessToken)"],
                                              json: ["phoneNumber": "+15555550155"])
            }
            let device = DeviceKey()
            let challenge = try mfaRequired(try await app.signIn(
                try await app.apple("apple-victim-phone"), headers: ["DPoP": try device.proof("POST", app.url("/v1/sign-in"))]))
            let body = ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": factorId]
            let thief = try await app.client.post("/v1/mfa/challenge", json: body)
            #expect(thief.status == 401, "without the first step's key the code is not even sent")
            #expect(try thief.decodeJSON(ProblemBody.self).code == "invalid_dpop_proof")
            let sent = try await app.client.post(
                "/v1/mfa/challenge", headers: ["DPoP": try device.proof("POST", app.url("/v1/mfa/challenge"))], json: body)
            #expect(sent.status == 200, "the victim's sign-in codes are not the strangers' to spend: \(sent.bodyText)")
            // Nor a Parse log-in's, which has no device key: the code is no MFA token there (141), and says nothing
            // of a session (209 would make a Parse SDK drop its user).
            let parse = ParseApp(app: app)
            let onParse = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-victim-phone", "token": try await parse.appleToken("apple-victim-phone")]),
                "mfa": ParseApp.strings(["token": try await app.smsCode(to: "+15555550155")]),
            ])]))
            #expect(onParse.body["code"] == 141, "\(onParse.text)")
            let done = try await verify(app, ["mfaPendingCredential": challenge.mfaPendingCredential, "factorId": factorId,
                                             "code": try await app.smsCode(to: "+15555550155")],
                                        headers: ["DPoP": try device.proof("POST", app.url("/v1/mfa/verify"))])
            #expect(done.status == 200)
            // The code's hash sits sealed in the log, not readable beside the challenge id.
            let clear: Int = try await app.admin.query("""
                SELECT count(*)::int AS n FROM events WHERE type = 'MFACodeSent' AND (data ? 'codeHash' OR data -> 'personal' ? 'codeHash')
                """)[0].decode("n")
            #expect(clear == 0)
        }
    }

    @Test func everyProviderAndPasswordSignInMeetsTheChallenge() async throws {
        try await DevService.run { app in
            let signUp = try await app.client.post("/v1/sign-up", json: ["email": "multi@example.com", "password": "a long password"])
            let token = try signUp.decodeJSON(SignedIn.self).session.accessToken
            try await app.verifyEmail("multi@example.com", accessToken: token)
            for credential in [try await app.apple("apple-multi"), try await app.google("google-multi"), try await app.facebook("fb-multi")] {
                #expect(try await app.link(credential, to: token).status == 200)
            }
            let enrol = try await app.client.post("/v1/users/me/mfa/totp", headers: ["Authorization": "Bearer \(token)"], body: [])
            let enrolment = try enrol.decodeJSON(Enrolment.self)
            let totp = try TOTP(secret: try Base32.decode(enrolment.secret))
            #expect(try await app.client.post("/v1/users/me/mfa/totp/verify", headers: ["Authorization": "Bearer \(token)"],
                                              json: ["factorId": enrolment.factorId, "code": totp.code(at: Date())]).status == 200)
            let credentials = [app.password("multi@example.com", "a long password"), try await app.apple("apple-multi"),
                               try await app.google("google-multi"), try await app.facebook("fb-multi")]
            for credential in credentials {
                let challenge = try mfaRequired(try await app.signIn(credential))
                #expect(challenge.code == "mfa_required", "\(credential.provider)")
                #expect(challenge.factors.map(\.id) == [enrolment.factorId])
            }
            #expect(try await app.eventCount("MFAChallengeIssued") == 4)
            #expect(try await app.eventCount("SessionStarted") == 1, "no session without the second factor")
        }
    }

    /// Someone who signs up with another person's address must not put a factor on it: an account with a second
    /// factor is never taken over, so the address's owner would be locked out (their Google sign-in refused, a
    /// reset by mail stopped at the squatter's factor). A factor needs a proved address, as Firebase's; an account
    /// with no address may have one, and then takes its first address only proved.
    @Test func aSecondFactorGuardsOnlyAProvedAddress() async throws {
        try await DevService.run { app in
            let squatter = try await app.client.post("/v1/sign-up", json: ["email": "owner@gmail.com", "password": "the squatter's password"])
            let token = try squatter.decodeJSON(SignedIn.self).session.accessToken
            let events = try await app.totalEvents()
            for (path, body) in [("/v1/users/me/mfa/totp", [:]), ("/v1/users/me/mfa/phone", ["phoneNumber": "+15555550123"])] {
                let refused = try await app.client.post(path, headers: ["Authorization": "Bearer \(token)"], json: body)
                #expect(refused.status == 403 && (try? refused.decodeJSON(ProblemBody.self).code) == "email_not_verified", "\(path): \(refused.bodyText)")
            }
            #expect(try await app.totalEvents() == events, "a refused enrolment writes nothing")
            await #expect(throws: HarnessError.self, "and sends nothing") { _ = try await app.smsCode(to: "+15555550123") }
            // The owner of the address signs in with Google, which vouches for it: the squatter's account is theirs.
            let owner = try await app.signIn(try await app.google("google-owner", email: "owner@gmail.com"))
            #expect(owner.status == 200, "\(owner.bodyText)")
            #expect(try await app.eventCount("EmailVerified") == 1)

            // Proved by mail, an address may have a factor.
            let proved = try await app.client.post("/v1/sign-up", json: ["email": "proved@example.com", "password": "a long password"])
            let provedToken = try proved.decodeJSON(SignedIn.self).session.accessToken
            try await app.verifyEmail("proved@example.com", accessToken: provedToken)
            let enrolled = try await app.client.post("/v1/users/me/mfa/totp", headers: ["Authorization": "Bearer \(provedToken)"], body: [])
            #expect(enrolled.status == 201, "\(enrolled.bodyText)")

            // An account with no address has none to squat; it takes a first address only proved.
            let (user, _, _, _) = try await userWithTOTP(app, try await app.apple("apple-no-address"))
            let before = try await app.totalEvents()
            let unproved = try await app.link(app.password("someone@gmail.com", "a long password"), to: user.session.accessToken)
            #expect(unproved.status == 403 && unproved.bodyText.contains("email_not_verified"), "\(unproved.bodyText)")
            let facebook = try await app.link(try await app.facebook("fb-no-address", email: "someone@gmail.com"), to: user.session.accessToken)
            #expect(facebook.status == 403 && facebook.bodyText.contains("email_not_verified"), "\(facebook.bodyText)")
            #expect(try await app.totalEvents() == before)
            let google = try await app.link(try await app.google("google-no-address", email: "someone@gmail.com"), to: user.session.accessToken)
            #expect(google.status == 200, "a provider that proved the address: \(google.bodyText)")
            #expect(try await app.me(user.session.accessToken).decodeJSON(UserEnvelope.self).user.emailVerified)
        }
    }

    @Test func changingFactorsNeedsARecentSignIn() async throws {
        try await DevService.run { app in
            let (user, _, confirmed, _) = try await userWithTOTP(app, try await app.apple("apple-stale"))
            // The user's own token, as it would be ten minutes after the sign-in.
            let stale = try await app.accessToken(user.session.accessToken, signedInSecondsAgo: 600)
            #expect(try await app.me(stale).status == 200, "the token itself is fine")
            for (method, path) in [("DELETE", "/v1/users/me/mfa/\(confirmed.factor.id)"), ("POST", "/v1/users/me/mfa/totp"),
                                   ("POST", "/v1/users/me/mfa/recovery-codes")] {
                let response = method == "DELETE"
                    ? try await app.client.delete(path, headers: ["Authorization": "Bearer \(stale)"])
                    : try await app.client.post(path, headers: ["Authorization": "Bearer \(stale)"], body: [])
                #expect(response.status == 401, "\(path)")
                #expect(try response.decodeJSON(ProblemBody.self).code == "recent_login_required", "\(path)")
            }
            let removed = try await app.client.delete(
                "/v1/users/me/mfa/\(confirmed.factor.id)", headers: ["Authorization": "Bearer \(user.session.accessToken)"])
            #expect(removed.status == 200)
            #expect(try removed.decodeJSON(UserMFAEnvelope.self).user.mfa.isEmpty)
            let (answered, read) = (try removed.json["user"], try await app.me(user.session.accessToken).json["user"])
            #expect(answered == read, "\(removed.bodyText)")
            #expect(try await app.signIn(try await app.apple("apple-stale")).status == 200, "no factor, no challenge")
        }
    }

    @Test func aRecoveryCodeWorksOnceAndCodesCanBeRegenerated() async throws {
        try await DevService.run { app in
            let (user, _, confirmed, _) = try await userWithTOTP(app, try await app.apple("apple-recovery"))
            let code = try #require(confirmed.recoveryCodes?.first)
            let first = try mfaRequired(try await app.signIn(try await app.apple("apple-recovery")))
            let used = try await verify(app, ["mfaPendingCredential": first.mfaPendingCredential, "recoveryCode": code.uppercased()])
            #expect(used.status == 200, "recovery codes are read without case")
            let claims = try JOSEObject(parsing: Base64URL.decode(
                String(try used.decodeJSON(Completed.self).session.accessToken.split(separator: ".")[1])))
            #expect(claims["amr"]?.arrayValue?.compactMap(\.stringValue) == ["apple", "rcv", "mfa"])

            let second = try mfaRequired(try await app.signIn(try await app.apple("apple-recovery")))
            let again = try await verify(app, ["mfaPendingCredential": second.mfaPendingCredential, "recoveryCode": code])
            #expect(again.status == 401)
            #expect(try again.decodeJSON(ProblemBody.self).code == "invalid_code")
            #expect(try await app.eventCount("MFARecoveryCodeUsed") == 1)

            let regenerated = try await app.client.post(
                "/v1/users/me/mfa/recovery-codes", headers: ["Authorization": "Bearer \(user.session.accessToken)"], body: [])
            #expect(regenerated.status == 201)
            let codes = try regenerated.decodeJSON([String: [String]].self)["recoveryCodes"] ?? []
            #expect(codes.count == 10)
            let old = try await verify(app, ["mfaPendingCredential": second.mfaPendingCredential,
                                             "recoveryCode": try #require(confirmed.recoveryCodes?.last)])
            #expect(try old.decodeJSON(ProblemBody.self).code == "invalid_code", "old codes stop working")
            let stored: Int = try await app.admin.query("SELECT count(*)::int AS n FROM mfa_recovery_codes WHERE code_hash = \(codes[0])")[0].decode("n")
            #expect(stored == 0, "only hashes are stored")
        }
    }

    @Test func anEmailWithAColonStillEnrolsTOTPUnderTheUserId() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.google("google-colon", email: "odd:name@example.com"))
            let enrol = try await app.client.post(
                "/v1/users/me/mfa/totp", headers: ["Authorization": "Bearer \(user.session.accessToken)"], body: [])
            #expect(enrol.status == 201)
            #expect(try enrol.decodeJSON(Enrolment.self).otpauthUri.hasPrefix("otpauth://totp/Tether:\(user.user.id)?"))
        }
    }

    /// Ten enrolments never confirmed (their factor ids lost) blocked every later enrolment: the cap counted
    /// them, and no route lists them. Now the oldest abandoned one gives way; the cap holds for confirmed factors.
    @Test func abandonedEnrolmentsGiveWayAndOnlyConfirmedFactorsFillTheCap() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-enrol-abandoned"))
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(user.session.accessToken)"]
            func enrol() async throws -> Enrolment {
                let response = try await app.client.post("/v1/users/me/mfa/totp", headers: auth, body: [])
                #expect(response.status == 201, "\(response.bodyText)")
                return try response.decodeJSON(Enrolment.self)
            }
            var abandoned: [Enrolment] = []
            for _ in 0..<UserAccount.maxFactors { abandoned.append(try await enrol()) }
            let eleventh = try await enrol()
            #expect(try await app.eventCount("MFAFactorRemoved", userId: user.user.id) == 1)
            // The oldest gave way; the newest works.
            let oldest = try TOTP(secret: try Base32.decode(abandoned[0].secret))
            let gone = try await app.client.post(
                "/v1/users/me/mfa/totp/verify", headers: auth, json: ["factorId": abandoned[0].factorId, "code": oldest.code(at: Date())])
            #expect(gone.status == 404, "\(gone.bodyText)")
            let newest = try TOTP(secret: try Base32.decode(eleventh.secret))
            let confirmed = try await app.client.post(
                "/v1/users/me/mfa/totp/verify", headers: auth, json: ["factorId": eleventh.factorId, "code": newest.code(at: Date())])
            #expect(confirmed.status == 200, "\(confirmed.bodyText)")
            #expect(try await app.admin.query("SELECT count(*)::int AS n FROM mfa_factors WHERE user_id = \(UUID(uuidString: user.user.id)!)")[0]
                .decode("n", as: Int.self) == UserAccount.maxFactors, "the read model dropped the one that gave way")

            // Confirmed factors fill the cap: with ten, an enrolment is refused and nothing gives way.
            for enrolment in abandoned.dropFirst() {
                let totp = try TOTP(secret: try Base32.decode(enrolment.secret))
                let response = try await app.client.post(
                    "/v1/users/me/mfa/totp/verify", headers: auth, json: ["factorId": enrolment.factorId, "code": totp.code(at: Date())])
                #expect(response.status == 200, "\(response.bodyText)")
            }
            let full = try await app.client.post("/v1/users/me/mfa/totp", headers: auth, body: [])
            #expect(full.status == 400 && full.bodyText.contains("at most"), "\(full.bodyText)")
            #expect(try await app.eventCount("MFAFactorRemoved", userId: user.user.id) == 1)
        }
    }

    @Test func wrongCodesWhileEnrollingEndTheEnrolment() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-enrol-wrong"))
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(user.session.accessToken)"]
            let enrolment = try await app.client.post("/v1/users/me/mfa/totp", headers: auth, body: []).decodeJSON(Enrolment.self)
            for _ in 1...5 {
                let response = try await app.client.post(
                    "/v1/users/me/mfa/totp/verify", headers: auth, json: ["factorId": enrolment.factorId, "code": "000000"])
                #expect(response.status == 401 || response.status == 404)
            }
            let totp = try TOTP(secret: try Base32.decode(enrolment.secret))
            let late = try await app.client.post(
                "/v1/users/me/mfa/totp/verify", headers: auth, json: ["factorId": enrolment.factorId, "code": totp.code(at: Date())])
            #expect(late.status == 404)
            #expect(try late.decodeJSON(ProblemBody.self).code == "mfa_factor_not_found")
        }
    }
}

/// `{"user": …}` with the user's factors.
struct UserMFAEnvelope: Decodable {
    struct User: Decodable {
        struct Factor: Decodable {
            var id: String
            var type: String
        }
        var id: String
        var mfa: [Factor]
    }
    var user: User
}
