import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

@Suite("Provider callbacks: Apple server-to-server notifications, Facebook data deletion")
struct ProviderCallbackTests {
    private func notification(_ service: DevService, _ fields: [String: JSONValue]) async throws -> String {
        let minted = try await service.idp.post("/dev-idp/apple/notification", json: JSONValue.object(fields))
        guard let payload = try minted.decodeJSON([String: String].self)["payload"] else { throw HarnessError("minting answered \(minted.bodyText)") }
        return payload
    }

    private func deliver(_ service: DevService, _ payload: String) async throws -> HTTPTestClient.Response {
        try await service.client.post("/v1/providers/apple/notifications", json: ["payload": payload])
    }

    @Test func consentRevokedUnlinksAppleEndsItsSessionsAndARepeatChangesNothing() async throws {
        try await DevService.run { service in
            let apple = try await service.signedIn(try await service.apple("apple-ada", email: "ada@example.com"))
            #expect(try await service.link(service.password("ada@example.com", "a long password"), to: apple.session.accessToken).status == 200)
            let password = try await service.signedIn(service.password("ada@example.com", "a long password"))
            let payload = try await notification(service, ["type": "consent-revoked", "sub": "apple-ada", "jti": "jti-1"])
            let first = try await deliver(service, payload)
            #expect(first.status == 200)
            #expect(first.bodyText.contains(#""outcome":"unlinked""#))
            #expect(try await service.me(apple.session.accessToken).status == 401, "the session Apple started ended")
            #expect(try await service.me(password.session.accessToken).status == 200, "the password's did not")
            let events = try await service.totalEvents()
            let again = try await deliver(service, payload)
            #expect(again.bodyText.contains(#""status":"duplicate""#))
            #expect(try await service.totalEvents() == events, "a repeat writes nothing")
            let reason: String = try await service.admin.query("""
                SELECT data ->> 'reason' AS reason FROM events WHERE type = 'IdentityUnlinked' AND user_id = \(apple.user.id)::uuid
                """)[0].decode("reason")
            #expect(reason == "apple_consent_revoked")
        }
    }

    /// Consent revoked for a user whose only way in was Apple leaves them none: Apple's next token, which proves
    /// the address, signs the person back in to their account (409 with `signInMethods: []` before).
    @Test func afterConsentRevokedOfTheOnlyWayInAppleSignsThePersonBackIn() async throws {
        try await DevService.run { service in
            let credential = { try await service.apple("apple-solo", email: "solo@privaterelay.appleid.com") }
            let user = try await service.signedIn(try await credential())
            let answer = try await deliver(service, try await notification(service, ["type": "consent-revoked", "sub": "apple-solo"]))
            #expect(answer.bodyText.contains(#""outcome":"unlinked""#), "\(answer.bodyText)")
            #expect(try await service.me(user.session.accessToken).status == 401, "the session Apple started ended")
            let again = try await service.signIn(try await credential())
            #expect(again.status == 200, "\(again.bodyText)")
            #expect(try again.decodeJSON(SignedIn.self).user.id == user.user.id)
        }
    }

    @Test func accountDeleteErasesAUserAppleWasTheOnlyWayInForAndOnlyUnlinksOthers() async throws {
        try await DevService.run { service in
            let only = try await service.signedIn(try await service.apple("apple-only", email: "only@privaterelay.appleid.com"))
            let both = try await service.signedIn(try await service.apple("apple-both", email: "both@example.com"))
            #expect(try await service.link(try await service.google("google-both", email: "both@example.com"), to: both.session.accessToken).status == 200)
            for (sub, type) in [("apple-only", "account-delete"), ("apple-both", "account-deleted")] {
                let answer = try await deliver(service, try await notification(service, ["type": .string(type), "sub": .string(sub)]))
                #expect(answer.status == 200, "\(answer.bodyText)")
            }
            #expect(try await service.eventCount("UserErased", userId: only.user.id) == 1)
            #expect(try await service.eventCount("UserErased", userId: both.user.id) == 0)
            let remaining = try await service.service.accounts.read(UUID(uuidString: both.user.id)!)
            #expect(remaining.signInMethods == ["google"])
            let nobody = try await deliver(service, try await notification(service, ["type": "account-delete", "sub": "apple-stranger"]))
            #expect(nobody.bodyText.contains(#""outcome":"no_user""#))
            // As after every erasure: the read models match the log, and nothing personal of hers is left in them.
            #expect(try await ProjectionReplay(projection: .accounts, database: service.admin).run(.verify).drift.isEmpty)
            let left: Int = try await service.admin.query("""
                SELECT count(*)::int AS n FROM users
                WHERE email_normalized = \(try await service.admin.readModelSeal().seal("only@privaterelay.appleid.com"))
                """)[0].decode("n")
            #expect(left == 0)
        }
    }

    @Test func theRelayAddressStatusIsRecordedOnTheUser() async throws {
        try await DevService.run { service in
            let user = try await service.signedIn(try await service.apple("apple-relay", email: "relay@privaterelay.appleid.com"))
            let id = UUID(uuidString: user.user.id)!
            let bearer = "Bearer \(user.session.accessToken)"
            // The user's body says so once Apple did, and not before.
            func forwarding() async throws -> JSONValue? {
                let me = try await service.client.get("/v1/users/me", headers: ["Authorization": bearer])
                #expect(me.status == 200)
                guard case .object(let answer) = try me.json, case .object(let body)? = answer["user"],
                      case .array(let identities)? = body["identities"],
                      case .object(let apple)? = identities.first else { throw HarnessError("no identity in \(me.bodyText)") }
                return apple["emailForwarding"]
            }
            #expect(try await forwarding() == nil)
            _ = try await deliver(service, try await notification(service, ["type": "email-disabled", "sub": "apple-relay", "eventsAsString": false]))
            #expect(try await service.service.accounts.read(id).identities["apple"]?.emailForwarding == false)
            #expect(try await forwarding() == .bool(false))
            _ = try await deliver(service, try await notification(service, ["type": "email-enabled", "sub": "apple-relay"]))
            #expect(try await service.service.accounts.read(id).identities["apple"]?.emailForwarding == true)
            #expect(try await forwarding() == .bool(true))
            #expect(try await service.eventCount("ProviderEmailStatusChanged", userId: user.user.id) == 2)
            // The column is rebuilt from the log like every other.
            #expect(try await ProjectionReplay(projection: .accounts, database: service.admin).run(.verify).drift.isEmpty)
        }
    }

    @Test func forgedMisaddressedExpiredAndMalformedNotificationsAreRefusedAndChangeNothing() async throws {
        try await DevService.run { service in
            _ = try await service.signedIn(try await service.apple("apple-victim"))
            let before = try await service.totalEvents()
            let cases: [[String: JSONValue]] = [
                ["type": "account-delete", "sub": "apple-victim", "forge": "bad-signature"],
                ["type": "account-delete", "sub": "apple-victim", "forge": "alg-none"],
                ["type": "account-delete", "sub": "apple-victim", "aud": "com.someone.else"],
                ["type": "account-delete", "sub": "apple-victim", "exp": .double(Date().timeIntervalSince1970 - 600)],
                ["type": "account-delete", "sub": "apple-victim", "iat": .double(Date().timeIntervalSince1970 - 30 * 86400)],
            ]
            for fields in cases {
                let answer = try await deliver(service, try await notification(service, fields))
                #expect((400..<500).contains(answer.status), "\(fields): \(answer.status) \(answer.bodyText)")
            }
            // A sign-in token is not a notification, and the body must be one.
            let identityToken = try service.token("identityToken", of: try await service.apple("apple-victim"))
            #expect(try await deliver(service, identityToken).status == 401)
            #expect(try await service.client.post("/v1/providers/apple/notifications", body: Array("{nope".utf8)).status == 400)
            #expect(try await service.client.post("/v1/providers/apple/notifications", json: ["payload": "a.b.c"]).status == 401)
            #expect(try await service.totalEvents() == before)
        }
    }

    @Test func facebookDataDeletionErasesAndAnswersAStatusURL() async throws {
        try await DevService.run { service in
            let fb = try await service.signedIn(try await service.facebook("10001", email: "fb@example.com"))
            func signed(_ fields: [String: JSONValue]) async throws -> String { try await signedRequest(fields, by: service) }
            func post(_ signedRequest: String) async throws -> HTTPTestClient.Response { try await postDeletion(signedRequest, to: service) }
            #expect(try await post(try await signed(["userId": "10001", "forge": true])).status == 401)
            #expect(try await post(try await signed(["userId": "10001", "algorithm": "HMAC-SHA1"])).status == 401)
            #expect(try await post("not-a-signed-request").status == 400)
            #expect(try await service.eventCount("UserErased") == 0)

            let answer = try await post(try await signed(["userId": "10001"]))
            #expect(answer.status == 200)
            let body = try answer.decodeJSON([String: String].self)
            let code = try #require(body["confirmation_code"])
            #expect(body["url"] == "http://127.0.0.1:\(service.port)/v1/providers/facebook/data-deletion/\(code)")
            #expect(try await service.eventCount("UserErased", userId: fb.user.id) == 1, "Facebook was the only way in")
            #expect(try await ProjectionReplay(projection: .accounts, database: service.admin).run(.verify).drift.isEmpty)
            let status = try await service.client.get("/v1/providers/facebook/data-deletion/\(code)")
            #expect(status.bodyText.contains(#""status":"completed""#))
            #expect(try await recordedWith("UserErased", code: code, in: service), "the code commits with the erasure")

            // A user with another way in keeps it: Facebook's identity is unlinked, and the code commits with that.
            let both = try await service.signedIn(try await service.apple("apple-and-fb"))
            #expect(try await service.link(try await service.facebook("10002", email: "fb2@example.com"), to: both.session.accessToken).status == 200)
            let unlinked = try await post(try await signed(["userId": "10002"])).decodeJSON([String: String].self)
            let unlinkedCode = try #require(unlinked["confirmation_code"])
            #expect(try await service.eventCount("IdentityUnlinked", userId: both.user.id) == 1)
            #expect(try await service.eventCount("UserErased", userId: both.user.id) == 0)
            #expect(try await recordedWith("IdentityUnlinked", code: unlinkedCode, in: service))
            #expect(try await service.client.get("/v1/providers/facebook/data-deletion/\(unlinkedCode)").bodyText
                .contains(#""status":"completed""#))
            let stranger = try await post(try await signed(["userId": "99999"])).decodeJSON([String: String].self)
            #expect(try await service.client.get("/v1/providers/facebook/data-deletion/\(stranger["confirmation_code"]!)").bodyText
                .contains(#""status":"no_user""#))
            #expect(try await service.client.get("/v1/providers/facebook/data-deletion/unknown").status == 404)
            let uidInClear: Int = try await service.admin.query(
                "SELECT count(*)::int AS n FROM provider_deletion_requests WHERE uid_hash LIKE '%10001%'")[0].decode("n")
            #expect(uidInClear == 0)
        }
    }

    /// A `signed_request` sent again (by anyone who kept it) erased the account the same person had made since: it is
    /// acted on once, and answered its first code; one issued over a day ago is refused.
    @Test func aFacebookDeletionRequestIsActedOnOnceAndOnlyWhileFresh() async throws {
        try await DevService.run { service in
            func signed(_ fields: [String: JSONValue]) async throws -> String { try await signedRequest(fields, by: service) }
            func post(_ signedRequest: String) async throws -> HTTPTestClient.Response { try await postDeletion(signedRequest, to: service) }
            _ = try await service.signedIn(try await service.facebook("10077"))
            let request = try await signed(["userId": "10077"])
            let first = try await post(request)
            #expect(first.status == 200)
            #expect(try await service.eventCount("UserErased") == 1)
            // The person comes back; the old request, sent again, changes nothing and is answered its code.
            let again = try await service.signedIn(try await service.facebook("10077"))
            let repeated = try await post(request)
            #expect(repeated.status == 200)
            #expect(try repeated.decodeJSON([String: String].self)["confirmation_code"] == first.decodeJSON([String: String].self)["confirmation_code"])
            #expect(try await service.eventCount("UserErased") == 1)
            #expect(try await service.eventCount("UserErased", userId: again.user.id) == 0)
            // One issued two days ago (a request kept somewhere) is refused; one from the last hour is acted on.
            let twoDaysAgo = Int(Date().timeIntervalSince1970) - 2 * 86_400
            let stale = try await post(try await signed(["userId": "10077", "issuedAt": .int(twoDaysAgo)]))
            #expect(stale.status == 401, "\(stale.bodyText)")
            #expect(try await service.eventCount("UserErased") == 1)
            let recent = try await post(try await signed(["userId": "10077", "issuedAt": .int(Int(Date().timeIntervalSince1970) - 3600)]))
            #expect(recent.status == 200)
            #expect(try await service.eventCount("UserErased", userId: again.user.id) == 1)
        }
    }

    /// The same `signed_request` posted twice at once was acted on by both and answered two codes, one of them a
    /// record of a deletion that found no user.
    @Test func theSameDeletionRequestSentTwiceAtOnceIsAnsweredOneCode() async throws {
        try await DevService.run { service in
            for round in 0..<4 {
                let uid = "1009\(round)"
                _ = try await service.signedIn(try await service.facebook(uid))
                let request = try await signedRequest(["userId": .string(uid)], by: service)
                async let first = service.withNewClient { try await postDeletion(request, with: $0) }
                async let second = service.withNewClient { try await postDeletion(request, with: $0) }
                let answers = try await [first, second]
                #expect(answers.map(\.status) == [200, 200])
                let codes = try Set(answers.map { try #require($0.decodeJSON([String: String].self)["confirmation_code"]) })
                #expect(codes.count == 1, "round \(round): \(codes)")
                let records: Int = try await service.admin.query(
                    "SELECT count(*)::int AS n FROM provider_deletion_requests WHERE confirmation_code = ANY(\(PostgresArray(Array(codes)))::text[])"
                )[0].decode("n")
                #expect(records == 1)
            }
            #expect(try await service.admin.query("SELECT count(*)::int AS n FROM provider_deletion_requests")[0].decode("n", as: Int.self) == 4)
            #expect(try await service.eventCount("UserErased") == 4)
        }
    }

    /// A Facebook data deletion request made by the dev identity provider with `fields`.
    private func signedRequest(_ fields: [String: JSONValue], by service: DevService) async throws -> String {
        try await service.idp.post("/dev-idp/facebook/data-deletion", json: JSONValue.object(fields)).decodeJSON([String: String].self)["signed_request"]!
    }

    /// `signedRequest` POSTed to the server's data deletion callback, as Facebook posts it.
    private func postDeletion(_ signedRequest: String, to service: DevService) async throws -> HTTPTestClient.Response {
        try await postDeletion(signedRequest, with: service.client)
    }

    private func postDeletion(_ signedRequest: String, with client: HTTPTestClient) async throws -> HTTPTestClient.Response {
        try await client.post(
            "/v1/providers/facebook/data-deletion", headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Array("signed_request=\(signedRequest)".utf8))
    }

    /// Whether the deletion request `code` was written by the transaction that appended an event of `type`.
    private func recordedWith(_ type: String, code: String, in service: DevService) async throws -> Bool {
        let rows = try await service.admin.query("""
            SELECT count(*)::int AS n FROM provider_deletion_requests r JOIN events e
              ON e.type = \(type) AND e.tx::text::bigint % 4294967296 = r.xmin::text::bigint
            WHERE r.confirmation_code = \(code)
            """)
        return try rows[0].decode("n", as: Int.self) == 1
    }

    @Test func theDevIdentityProviderSendsBothKindsToTheServer() async throws {
        try await DevService.run { service in
            _ = try await service.signedIn(try await service.apple("apple-sent"))
            let apple = try await service.idp.post("/dev-idp/apple/notification", json: JSONValue.object([
                "type": "consent-revoked", "sub": "apple-sent", "sendTo": .string(service.url("/v1/providers/apple/notifications")),
            ]))
            #expect(apple.status == 200)
            #expect(apple.bodyText.contains(#""status":200"#) && apple.bodyText.contains(#""outcome":"unlinked""#), "\(apple.bodyText)")
            let facebook = try await service.idp.post("/dev-idp/facebook/data-deletion", json: JSONValue.object([
                "userId": "10042", "sendTo": .string(service.url("/v1/providers/facebook/data-deletion")),
            ]))
            #expect(facebook.bodyText.contains("confirmation_code"), "\(facebook.bodyText)")
            let outside = try await service.idp.post("/dev-idp/apple/notification", json: JSONValue.object([
                "type": "consent-revoked", "sub": "apple-sent", "sendTo": "https://appleid.example.com/hook",
            ]))
            #expect(outside.status == 400, "the dev identity provider never calls out")
        }
    }
}
