import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherProviders
import TetherTesting

/// Apple authorization codes, revocation through the outbox, and grants checked on refresh (issue #18),
/// against the dev identity provider's Apple token and revoke endpoints and its Graph API.
@Suite("Provider grants: authorization codes, revocation through the outbox, re-validation")
struct ProviderGrantTests {
    // MARK: Helpers

    /// An Apple credential for `sub`, with an authorization code minted for `codeSub` (the same person by default).
    private func appleWithCode(_ service: DevService, _ sub: String, codeFor codeSub: String? = nil, email: String? = nil) async throws -> Credential {
        let token = try service.token("identityToken", of: try await service.apple(sub, email: email))
        let minted = try await service.idp.post("/dev-idp/apple/authorization-code", json: ["sub": codeSub ?? sub])
        let code = try #require(try minted.decodeJSON([String: String].self)["authorizationCode"])
        return Credential(provider: "apple", credential: ["identityToken": .string(token), "authorizationCode": .string(code)])
    }

    private func outage(_ service: DevService, _ endpoint: String, down: Bool) async throws {
        let answer = try await service.idp.post("/dev-idp/outage", json: ["endpoint": .string(endpoint), "down": .bool(down)] as JSONValue)
        #expect(answer.status == 204)
    }

    private func revocations(_ service: DevService, _ provider: String) async throws -> [String] {
        struct Answer: Decodable {
            struct Revocation: Decodable { var subject: String }
            var revocations: [Revocation]
        }
        return try await service.idp.get("/dev-idp/\(provider)/revocations").decodeJSON(Answer.self).revocations.map(\.subject)
    }

    /// Waits (up to 10 s) until the user's stream has `count` events of `type`.
    private func waitFor(_ type: String, count: Int = 1, userId: String, in service: DevService) async throws {
        for _ in 0..<200 {
            if try await service.eventCount(type, userId: userId) >= count { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("no \(count) \(type) event(s) for \(userId) within 10 s")
    }

    private func eraseAsAdmin(_ service: DevService, _ userId: String) async throws {
        let admin = try await AdminKeyStore(database: service.admin).create(
            role: .admin, name: "erase", metadata: EventMetadata(actor: .operator("t"), surface: "cli")).secret
        let erased = try await service.client.send(
            "DELETE", "/v1/admin/users/\(userId)", fields: [("Authorization", "Bearer \(admin)"), ("Content-Type", "application/json")],
            body: Array(#"{"reason": "asked"}"#.utf8))
        #expect(erased.status == 200, "\(erased.bodyText)")
    }

    // MARK: The code exchange

    @Test func anAuthorizationCodeIsRedeemedOnceForItsOwnSubjectAndAppleDownStillSignsIn() async throws {
        try await DevService.run(providerCalls: RunningService.fastProviderCalls) { service in
            let ada = try await service.signedIn(try await appleWithCode(service, "apple-ada"))
            #expect(try await service.eventCount("ProviderTokenStored", userId: ada.user.id) == 1)
            let source: String = try await service.admin.query("""
                SELECT data ->> 'source' AS source FROM events WHERE type = 'ProviderTokenStored' AND user_id = \(ada.user.id)::uuid
                """)[0].decode("source")
            #expect(source == "authorization_code")
            let clear: Int = try await service.admin.query(
                "SELECT count(*)::int AS n FROM events WHERE data::text LIKE '%providerToken%' OR data::text LIKE '%\"r.%'")[0].decode("n")
            #expect(clear == 0, "the refresh token is sealed with the user's key")

            // The same code again (with a fresh identity token): Apple says invalid_grant.
            let first = try await appleWithCode(service, "apple-ada")
            #expect(try await service.signIn(first).status == 200)
            guard case .object(let firstMembers) = first.credential, let firstCode = firstMembers["authorizationCode"] else {
                throw HarnessError("no code in \(first.credential)")
            }
            let reused = Credential(provider: "apple", credential: [
                "identityToken": .string(try service.token("identityToken", of: try await service.apple("apple-ada"))),
                "authorizationCode": firstCode,
            ])
            let refused = try await service.signIn(reused)
            #expect(refused.status == 401)
            #expect(refused.bodyText.contains("invalid_credential"))

            // The code is refused, not the token: its nonce is not spent, and the token signs in without the code.
            let withNonce = try await service.appleWithNonce("apple-ada")
            guard case .object(var nonceMembers) = withNonce.credential else { throw HarnessError("no members") }
            nonceMembers["authorizationCode"] = firstCode
            #expect(try await service.signIn(Credential(provider: "apple", credential: .object(nonceMembers))).status == 401)
            nonceMembers["authorizationCode"] = nil
            let retried = try await service.signIn(Credential(provider: "apple", credential: .object(nonceMembers)))
            #expect(retried.status == 200, "\(retried.bodyText)")

            // A code Apple issued for someone else names another sub in its id_token.
            let stolen = try await service.signIn(try await appleWithCode(service, "apple-ada", codeFor: "apple-mallory"))
            #expect(stolen.status == 401)
            #expect(stolen.bodyText.contains("invalid_credential"))

            // Apple's token endpoint down: the sign-in goes on with the identity token alone, and says so.
            try await outage(service, "apple/auth/token", down: true)
            let down = try await service.signIn(try await appleWithCode(service, "apple-ada"))
            #expect(down.status == 200, "\(down.bodyText)")
            let reasons: [String] = try await service.admin.query("""
                SELECT data ->> 'reason' AS reason FROM events WHERE type = 'ProviderCodeNotRedeemed' AND user_id = \(ada.user.id)::uuid
                """).map { try $0.decode("reason") }
            #expect(reasons == ["provider_unavailable"])
            #expect(try await service.eventCount("ProviderTokenStored", userId: ada.user.id) == 2)
        }
    }

    @Test func parseAndFirebaseCarryTheCodeToo() async throws {
        try await FirebaseApp.run(settings: ["TETHER_PARSE_APP_ID": ParseApp.appID]) { firebase in
            let service = firebase.app
            let parse = ParseApp(app: service)
            func code(_ sub: String) async throws -> String {
                try #require(try await service.idp.post("/dev-idp/apple/authorization-code", json: ["sub": sub])
                    .decodeJSON([String: String].self)["authorizationCode"])
            }
            let loggedIn = try await parse.logIn("apple", [
                "id": "apple-parse", "token": try await parse.appleToken("apple-parse"), "code": try await code("apple-parse"),
            ])
            #expect(loggedIn.status == 201, "\(loggedIn.text)")
            let viaIdp = try await firebase.signInWithIdp(
                "providerId=apple.com&id_token=\(try await firebase.appleToken("apple-firebase"))&code=\(try await code("apple-firebase"))")
            #expect(viaIdp.status == 200)
            let sources: [String] = try await service.admin.query("""
                SELECT data ->> 'source' AS source FROM events WHERE type = 'ProviderTokenStored' ORDER BY position
                """).map { try $0.decode("source") }
            #expect(sources == ["authorization_code", "authorization_code"])
            // A used code is refused on those surfaces as well.
            let used = try await code("apple-parse")
            _ = try await parse.logIn("apple", ["id": "apple-parse", "token": try await parse.appleToken("apple-parse"), "code": used])
            let again = try await parse.logIn("apple", ["id": "apple-parse", "token": try await parse.appleToken("apple-parse"), "code": used])
            #expect(again.status != 200 && again.status != 201, "\(again.text)")
        }
    }

    // MARK: Revocation through the outbox

    @Test func erasureRevokesAtAppleThroughTheOutboxRetryingWhileTheEndpointIsDown() async throws {
        try await DevService.run(providerCalls: RunningService.fastProviderCalls) { service in
            let ada = try await service.signedIn(try await appleWithCode(service, "apple-erase-me"))
            try await outage(service, "apple/auth/revoke", down: true)
            try await eraseAsAdmin(service, ada.user.id) // not held up by the outage
            try await waitFor("ProviderRevocationFailed", count: 2, userId: ada.user.id, in: service)
            #expect(try await revocations(service, "apple").isEmpty)
            let metrics = try await service.client.get("/metrics").bodyText
            #expect(metrics.contains(#"tether_provider_calls_pending{action="apple.revoke"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"tether_provider_calls_total{action="apple.revoke",result="failed"}"#))
            try await outage(service, "apple/auth/revoke", down: false)
            try await waitFor("ProviderTokenRevoked", userId: ada.user.id, in: service)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await revocations(service, "apple") == ["apple-erase-me"], "revoked once")
            #expect(try await service.eventCount("ProviderTokenRevoked", userId: ada.user.id) == 1)
            let row = try await service.admin.query("SELECT payload, done_at FROM provider_calls")
            #expect(row.count == 1)
            #expect(try row[0].decode("payload", as: String?.self) == nil, "the token is dropped once revoked")
            #expect(try row[0].decode("done_at", as: Date?.self) != nil)
            // The attempts show in the erased user's history, and the read models still match the log.
            let history = try await TetherCommandLine.run(["history", ada.user.id], databaseURL: service.database.url)
            #expect(history.stdout.contains("revoking the apple grant failed"), "\(history.stdout)")
            #expect(history.stdout.contains("apple grant revoked at the provider"))
            #expect(try await ProjectionReplay(projection: .accounts, database: service.admin).run(.verify).drift.isEmpty)
        }
    }

    @Test func unlinkingAndConsentRevokedRevokeTheirGrants() async throws {
        try await DevService.run(providerCalls: RunningService.fastProviderCalls) { service in
            // Facebook: unlinking calls DELETE /{user-id}/permissions with the stored token.
            let signedIn = try await service.signedIn(try await service.facebook("7100001", email: "fb@example.com"))
            #expect(try await service.link(try await appleWithCode(service, "apple-fb-user"), to: signedIn.session.accessToken).status == 200)
            let unlinked = try await service.client.send(
                "DELETE", "/v1/users/me/identities/facebook", fields: [("Authorization", "Bearer \(signedIn.session.accessToken)")], body: [])
            #expect(unlinked.status == 200, "\(unlinked.bodyText)")
            try await waitFor("ProviderTokenRevoked", userId: signedIn.user.id, in: service)
            #expect(try await revocations(service, "facebook") == ["7100001"])
            #expect(try await revocations(service, "apple").isEmpty, "Apple is still linked")

            // Apple's consent-revoked unlinks Apple, and the stored refresh token is revoked too.
            let minted = try await service.idp.post("/dev-idp/apple/notification", json: ["type": "consent-revoked", "sub": "apple-fb-user"])
            let payload = try #require(try minted.decodeJSON([String: String].self)["payload"])
            #expect(try await service.client.post("/v1/providers/apple/notifications", json: ["payload": payload]).status == 200)
            try await waitFor("ProviderTokenRevoked", count: 2, userId: signedIn.user.id, in: service)
            #expect(try await revocations(service, "apple") == ["apple-fb-user"])
        }
    }

    @Test func twoInstancesShareTheOutboxAndEachCallIsMadeOnce() async throws {
        try await DevService.run(providerCalls: RunningService.fastProviderCalls) { service in
            let second = try await RunningService.start(
                databaseURL: service.database.url,
                values: DevIdentityProvider.configuration(baseURL: URL(string: "http://127.0.0.1:\(service.idpServer.boundPort)/dev-idp")!),
                devIdP: false, providerCalls: RunningService.fastProviderCalls)
            var users: [String] = []
            for index in 0..<6 {
                users.append(try await service.signedIn(try await appleWithCode(service, "apple-pair-\(index)")).user.id)
            }
            try await outage(service, "apple/auth/revoke", down: true)
            for user in users { try await eraseAsAdmin(service, user) }
            try await Task.sleep(for: .milliseconds(300))
            try await outage(service, "apple/auth/revoke", down: false)
            for user in users { try await waitFor("ProviderTokenRevoked", userId: user, in: service) }
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await revocations(service, "apple").sorted() == (0..<6).map { "apple-pair-\($0)" })
            for user in users { #expect(try await service.eventCount("ProviderTokenRevoked", userId: user) == 1) }
            await second.stop()
        }
    }

    @Test func aTetherServeKilledWithCallsPendingLeavesThemToTheNextOne() async throws {
        let database = try await TestDatabase.make()
        let idp = try DevIdPServer.start()
        let idpClient = idp.client()
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("tether-kill-\(UUID().uuidString).key").path
        _ = try MasterKey.create(at: keyFile)
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        let port = try LocalPostgresServer.freeLoopbackPort()
        var environment = idp.configuration
        environment["TETHER_MASTER_KEY_FILE"] = keyFile
        func serve() async throws -> TetherCommandLine.Process {
            try await TetherCommandLine.serve(databaseURL: database.url, port: port, environment: environment)
        }
        let owner = database.client(asServiceRole: false, maxConnections: 1)
        defer { owner.shutdown() }
        func count(_ condition: String) async throws -> Int {
            try await owner.query("SELECT count(*)::int AS n FROM provider_calls WHERE \(unsafeSQL: condition)")[0].decode("n")
        }

        let first = try await serve()
        let client = HTTPTestClient(port: port, timeout: .seconds(10))
        let token = try await idpClient.post("/dev-idp/apple/token", json: ["sub": "apple-killed"]).decodeJSON([String: String].self)["identityToken"]!
        let code = try await idpClient.post("/dev-idp/apple/authorization-code", json: ["sub": "apple-killed"])
            .decodeJSON([String: String].self)["authorizationCode"]!
        let signedIn = try await client.post(
            "/v1/sign-in", json: ["provider": "apple", "credential": ["identityToken": .string(token), "authorizationCode": .string(code)]] as JSONValue)
        #expect(signedIn.status == 201, "\(signedIn.bodyText)")
        #expect(try await idpClient.post("/dev-idp/outage", json: ["endpoint": "apple/auth/revoke", "down": true] as JSONValue).status == 204)
        let admin = try await AdminKeyStore(database: owner).create(
            role: .admin, name: "erase", metadata: EventMetadata(actor: .operator("t"), surface: "cli")).secret
        let userId = try signedIn.decodeJSON(SignedIn.self).user.id
        #expect(try await client.send(
            "DELETE", "/v1/admin/users/\(userId)", fields: [("Authorization", "Bearer \(admin)"), ("Content-Type", "application/json")],
            body: Array("{}".utf8)).status == 200)
        await client.close()
        // The first attempt fails against the outage; then the process dies without a word.
        for _ in 0..<200 where try await count("attempts > 0 AND lease_owner IS NULL") == 0 {
            try await Task.sleep(for: .milliseconds(50))
        }
        first.send(SIGKILL)
        #expect(try await first.wait().status == 128 + SIGKILL)
        #expect(try await count("done_at IS NULL") == 1, "the call waits in the outbox")

        #expect(try await idpClient.post("/dev-idp/outage", json: ["endpoint": "apple/auth/revoke", "down": false] as JSONValue).status == 204)
        let next = try await serve()
        for _ in 0..<400 where try await count("done_at IS NOT NULL") == 0 { // the retry is due within about 6 s
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(try await count("done_at IS NOT NULL") == 1)
        struct Revocations: Decodable { struct Entry: Decodable { var subject: String }; var revocations: [Entry] }
        #expect(try await idpClient.get("/dev-idp/apple/revocations").decodeJSON(Revocations.self).revocations.map(\.subject) == ["apple-killed"])
        next.send(SIGTERM)
        #expect(try await next.wait().status == 0)
        await idpClient.close()
        await idp.server.shutdown()
    }

    // MARK: Re-validation on refresh

    @Test func refreshesCheckTheGrantAtMostOncePerIntervalAndOnlyARevokedGrantSignsOut() async throws {
        try await DevService.run(
            settings: ["TETHER_PROVIDER_REVALIDATE_INTERVAL": "1s"], providerCalls: RunningService.fastProviderCalls, appleRevalidateMinimum: 0
        ) { service in
            let apple = try await service.signedIn(try await appleWithCode(service, "apple-check"))
            // A second Apple session of the same person: a revoked grant ends it too.
            let otherDevice = try await service.signedIn(try await appleWithCode(service, "apple-check"))
            let facebook = try await service.signedIn(try await service.facebook("7200002"))
            func refresh(_ token: String) async throws -> (status: Int, next: String?) {
                let answer = try await service.refresh(token)
                return (answer.status, answer.status == 200 ? try answer.decodeJSON(SignedIn.self).session.refreshToken : nil)
            }
            // Within the interval: no check.
            var appleToken = try #require(try await refresh(apple.session.refreshToken).next)
            #expect(try await service.eventCount("ProviderGrantChecked", userId: apple.user.id) == 0)
            try await Task.sleep(for: .milliseconds(1100))
            // Due: checked, and valid.
            appleToken = try #require(try await refresh(appleToken).next)
            #expect(try await service.eventCount("ProviderGrantChecked", userId: apple.user.id) == 1)
            appleToken = try #require(try await refresh(appleToken).next)
            #expect(try await service.eventCount("ProviderGrantChecked", userId: apple.user.id) == 1, "not again within the interval")

            // Facebook unreachable: the refresh goes on, and the check is tried again on the next one.
            try await Task.sleep(for: .milliseconds(1100))
            try await outage(service, "facebook/graph", down: true)
            let facebookToken = try #require(try await refresh(facebook.session.refreshToken).next)
            let results: [String] = try await service.admin.query("""
                SELECT data ->> 'result' AS result FROM events WHERE type = 'ProviderGrantChecked' AND user_id = \(facebook.user.id)::uuid
                """).map { try $0.decode("result") }
            #expect(results == ["unreachable"])
            try await outage(service, "facebook/graph", down: false)

            // The person removes the app at Facebook and at Apple: the next refresh ends each session.
            #expect(try await service.idp.post("/dev-idp/facebook/revoke-grant", json: ["userId": "7200002"]).status == 200)
            #expect(try await refresh(facebookToken).status == 401, "the grant is gone: the session ends")
            #expect(try await refresh(facebookToken).status == 401, "and stays ended")
            #expect(try await service.idp.post("/dev-idp/apple/revoke-grant", json: ["sub": "apple-check"]).status == 200)
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await refresh(appleToken).status == 401)
            #expect(try await refresh(otherDevice.session.refreshToken).status == 401, "every session Apple opened ends")
            for (user, count) in [(apple.user.id, 2), (facebook.user.id, 1)] {
                let reasons: [String] = try await service.admin.query("""
                    SELECT data ->> 'reason' AS reason FROM events WHERE type = 'SessionEnded' AND user_id = \(user)::uuid
                    """).map { try $0.decode("reason") }
                #expect(reasons == Array(repeating: "provider_revoked", count: count), "\(user)")
            }
        }
    }

    /// A refresh has rotated its token when the grant check it was due runs: a failure to record a check that
    /// found the grant standing does not turn the refresh into an error whose client never gets the new token
    /// (and whose retry with the old one would end the session as a reuse). The check is due again next time.
    @Test func aGrantCheckThatCannotBeRecordedDoesNotLoseTheRotatedToken() async throws {
        try await DevService.run(settings: ["TETHER_PROVIDER_REVALIDATE_INTERVAL": "1s"], providerCalls: RunningService.fastProviderCalls) { service in
            let facebook = try await service.signedIn(try await service.facebook("7200003"))
            try await service.admin.refuseEvents(ofTypes: ["ProviderGrantChecked"])
            try await Task.sleep(for: .milliseconds(1100))
            let refreshed = try await service.refresh(facebook.session.refreshToken)
            #expect(refreshed.status == 200, "\(refreshed.bodyText)")
            let next = try refreshed.decodeJSON(SignedIn.self).session.refreshToken
            #expect(try await service.eventCount("ProviderGrantChecked", userId: facebook.user.id) == 0)
            try await service.admin.acceptEventsAgain()
            #expect(try await service.refresh(next).status == 200, "the rotated token works")
            #expect(try await service.eventCount("ProviderGrantChecked", userId: facebook.user.id) == 1, "and the check, still due, is recorded")
        }
    }

    @Test func appleGrantsAreCheckedAtMostOnceADayWhateverTheInterval() async throws {
        try await DevService.run(settings: ["TETHER_PROVIDER_REVALIDATE_INTERVAL": "1s"]) { service in
            let apple = try await service.signedIn(try await appleWithCode(service, "apple-daily"))
            let facebook = try await service.signedIn(try await service.facebook("7300003"))
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await service.refresh(apple.session.refreshToken).status == 200)
            #expect(try await service.refresh(facebook.session.refreshToken).status == 200)
            #expect(try await service.eventCount("ProviderGrantChecked", userId: apple.user.id) == 0, "Apple asks for once a day")
            #expect(try await service.eventCount("ProviderGrantChecked", userId: facebook.user.id) == 1)
        }
    }
}
