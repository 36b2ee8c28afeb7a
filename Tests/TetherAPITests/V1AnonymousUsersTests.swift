import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherTesting

/// Anonymous users in the domain, seen through `/v1` (Parse's surface uses the same commands).
@Suite("/v1 anonymous users")
struct V1AnonymousUsersTests {
    private struct AnonymousUser: Decodable {
        struct User: Decodable {
            struct Identity: Decodable { var provider: String; var uid: String }
            var id: String
            var isAnonymous: Bool
            var identities: [Identity]
        }
        var user: User
        var isNewUser: Bool?
        var session: SignedIn.Session?
    }

    private static func anonymous(_ app: DevService, credential: JSONValue? = [:]) async throws -> HTTPTestClient.Response {
        var body: [String: JSONValue] = ["provider": "anonymous"]
        if let credential { body["credential"] = credential }
        return try await app.client.post("/v1/sign-in", json: JSONValue.object(body))
    }

    @Test func eachAnonymousSignInMakesANewAnonymousUser() async throws {
        try await DevService.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "100"]) { app in
            var ids: Set<String> = []
            for credential: JSONValue? in [[:], nil, .null] {
                let response = try await Self.anonymous(app, credential: credential)
                #expect(response.status == 201, "\(response.bodyText)")
                let answer = try response.decodeJSON(AnonymousUser.self)
                #expect(answer.isNewUser == true)
                #expect(answer.user.isAnonymous)
                #expect(answer.user.identities.map(\.provider) == ["anonymous"])
                ids.insert(answer.user.id)
            }
            #expect(ids.count == 3)
            // An id of the client's choosing would be a guessable secret: /v1 takes none.
            let chosen = try await Self.anonymous(app, credential: ["id": "my-own-anonymous-id"])
            #expect(chosen.status == 400)
            #expect(try chosen.decodeJSON(ProblemBody.self).code == "invalid_request")
            #expect(try await app.eventCount("UserRegistered") == 3)
        }
    }

    @Test func linkingUpgradesTheSameUserAndDropsTheAnonymousIdentity() async throws {
        try await DevService.run { app in
            let first = try await Self.anonymous(app).decodeJSON(AnonymousUser.self)
            let token = try #require(first.session?.accessToken)
            let linked = try await app.link(try await app.apple("apple-upgrade", email: "up@icloud.com"), to: token)
            #expect(linked.status == 200, "\(linked.bodyText)")
            let user = try linked.decodeJSON(AnonymousUser.self).user
            #expect(user.id == first.user.id)
            #expect(!user.isAnonymous)
            #expect(user.identities.map(\.provider) == ["apple"])
            let unlinked = try await app.admin.query("""
                SELECT data->>'reason' AS reason FROM events WHERE type = 'IdentityUnlinked' AND user_id = \(user.id)::uuid
                """)
            #expect(try unlinked.map { try $0.decode("reason", as: String.self) } == ["upgraded"])
            // The Apple identity now signs in to the same user.
            #expect(try await app.signedIn(try await app.apple("apple-upgrade")).user.id == first.user.id)
        }
    }

    @Test func aPasswordUpgradesAnAnonymousUserAndThenSignsIn() async throws {
        try await DevService.run { app in
            let first = try await Self.anonymous(app).decodeJSON(AnonymousUser.self)
            let token = try #require(first.session?.accessToken)
            let upgraded = try await app.link(app.password("anon@example.com", "correct horse battery"), to: token)
            #expect(upgraded.status == 200, "\(upgraded.bodyText)")
            #expect(try upgraded.decodeJSON(AnonymousUser.self).user.identities.map(\.provider) == ["password"])
            let signedIn = try await app.signedIn(app.password("anon@example.com", "correct horse battery"))
            #expect(signedIn.user.id == first.user.id)
            #expect(signedIn.user.email == "anon@example.com")
            #expect(!signedIn.user.emailVerified)
            // A second password is refused; so is an email another account holds.
            #expect(try await app.link(app.password("other@example.com", "correct horse battery"), to: token).status == 409)
            let other = try await Self.anonymous(app).decodeJSON(AnonymousUser.self)
            let taken = try await app.link(app.password("anon@example.com", "another good password"), to: try #require(other.session?.accessToken))
            #expect(taken.status == 409)
            #expect(try taken.decodeJSON(ProblemBody.self).code == "email_already_in_use")
        }
    }

    @Test func theAnonymousIdentityIsTheLastMethodAndAnonymousCannotBeLinked() async throws {
        try await DevService.run { app in
            let first = try await Self.anonymous(app).decodeJSON(AnonymousUser.self)
            let token = try #require(first.session?.accessToken)
            let unlink = try await app.client.delete("/v1/users/me/identities/anonymous", headers: ["Authorization": "Bearer \(token)"])
            #expect(unlink.status == 409)
            #expect(try unlink.decodeJSON(ProblemBody.self).code == "last_sign_in_method")
            // Nor does a second factor guard an anonymous sign-in (Firebase's UNSUPPORTED_FIRST_FACTOR).
            let enrol = try await app.client.post("/v1/users/me/mfa/totp", headers: ["Authorization": "Bearer \(token)"], body: [])
            #expect(enrol.status == 400 && enrol.bodyText.contains("anonymous"), "\(enrol.bodyText)")
            // Nor does it take an address by an email change, which would end its only session and leave it an
            // address it cannot sign in with: it upgrades, with a password or a provider.
            let events = try await app.totalEvents()
            let change = try await app.client.post(
                "/v1/users/me/email", headers: ["Authorization": "Bearer \(token)"], json: ["email": "anon.change@example.com"])
            #expect(change.status == 400 && change.bodyText.contains("upgrade"), "\(change.bodyText)")
            #expect(try await app.mails(to: "anon.change@example.com").isEmpty)
            #expect(try await app.totalEvents() == events)
            let apple = try await app.signedIn(try await app.apple("apple-plain"))
            let linkAnonymous = try await app.client.post(
                "/v1/users/me/identities", headers: ["Authorization": "Bearer \(apple.session.accessToken)"],
                json: JSONValue.object(["provider": "anonymous", "credential": [:]]))
            #expect(linkAnonymous.status == 400)
        }
    }

    @Test func anonymousSignUpsAreLimitedPerAddressAndCanBeTurnedOff() async throws {
        try await DevService.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "3"]) { app in
            for _ in 0..<3 { #expect(try await Self.anonymous(app).status == 201) }
            let limited = try await Self.anonymous(app)
            #expect(limited.status == 429)
            #expect(limited.headers.values(for: "Retry-After").first != nil)
            #expect(try await app.eventCount("UserRegistered") == 3)
        }
        try await DevService.run(settings: ["TETHER_ANONYMOUS_USERS": "off"]) { app in
            let refused = try await Self.anonymous(app)
            #expect(refused.status == 400)
            #expect(try refused.decodeJSON(ProblemBody.self).code == "unsupported_provider")
        }
    }

    @Test func theSweepErasesOnlyAnonymousUsersUnusedForTheSpan() async throws {
        try await DevService.run { app in
            let idle = try await Self.anonymous(app).decodeJSON(AnonymousUser.self)
            let upgraded = try await Self.anonymous(app).decodeJSON(AnonymousUser.self)
            _ = try await app.link(try await app.google("google-kept"), to: try #require(upgraded.session?.accessToken))
            let apple = try await app.signedIn(try await app.apple("apple-kept"))
            let metadata = EventMetadata(actor: .operator("test"), surface: "cli")

            // Nobody is 30 days idle yet.
            #expect(try await app.service.accounts.sweepAnonymousUsers(inactiveFor: 30 * 86400, metadata: metadata) == 0)
            // Thirty-one days on, only the user still anonymous goes.
            let later = Date().addingTimeInterval(31 * 86400)
            #expect(try await app.service.accounts.sweepAnonymousUsers(inactiveFor: 30 * 86400, now: later, metadata: metadata) == 1)
            let erased = try await app.admin.query("SELECT id FROM users WHERE erased_at IS NOT NULL").map { try $0.decode("id", as: UUID.self) }
            #expect(erased.map { $0.uuidString.lowercased() } == [idle.user.id])
            #expect(try await app.eventCount("UserErased") == 1)
            #expect(try await app.me(try #require(idle.session?.accessToken)).status == 401)
            #expect(try await app.me(apple.session.accessToken).status == 200)
            // Run again: nothing left to do.
            #expect(try await app.service.accounts.sweepAnonymousUsers(inactiveFor: 30 * 86400, now: later, metadata: metadata) == 0)
        }
    }

    @Test func theSweepCommandRefusesBadSpansAndCountsOnADryRun() async throws {
        try await DevService.run { app in
            _ = try await Self.anonymous(app)
            let url = app.database.url
            let missing = try await TetherCommandLine.run(["sweep", "anonymous"], databaseURL: url)
            #expect(missing.status == 2 && missing.stderr.contains("--inactive-for"))
            let short = try await TetherCommandLine.run(["sweep", "anonymous", "--inactive-for", "5m"], databaseURL: url)
            #expect(short.status == 2 && short.stderr.contains("at least an hour"))
            let other = try await TetherCommandLine.run(["sweep", "users", "--inactive-for", "30d"], databaseURL: url)
            #expect(other.status == 2)
            let dry = try await TetherCommandLine.run(["sweep", "anonymous", "--inactive-for", "1h", "--dry-run"], databaseURL: url)
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(dry.stdout.hasPrefix("would erase 0 anonymous users unused since "))
            let real = try await TetherCommandLine.run(["sweep", "anonymous", "--inactive-for", "1h"], databaseURL: url)
            #expect(real.status == 0, "\(real.stderr)")
            #expect(real.stdout.hasPrefix("erased 0 anonymous users"))
            #expect(try await app.eventCount("UserErased") == 0)
        }
    }
}
