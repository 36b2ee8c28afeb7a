import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherJOSE
import TetherPostgres
import TetherTesting

/// One directory across the surfaces, and ID tokens that are not this project's, this server's or still valid.
@Suite("Firebase surface: one directory and refused ID tokens")
struct FirebaseCrossSurfaceTests {
    @Test func aUserLinkedOnParseShowsBothProvidersInLookup() async throws {
        try await FirebaseApp.run(settings: ["TETHER_PARSE_APP_ID": ParseApp.appID]) { firebase in
            let parse = ParseApp(app: firebase.app)
            let user = try await parse.logIn("apple", ["id": "apple-x", "token": try await parse.appleToken("apple-x")])
            let objectId = try #require(user.string("objectId"))
            #expect(try await parse.send("PUT", "/users/\(objectId)", .init(session: user.string("sessionToken")), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-x"]),
                "facebook": ParseApp.strings(["id": "fb-x", "access_token": try await parse.facebookToken("fb-x")]),
            ])])).status == 200)
            let signIn = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(try await firebase.appleToken("apple-x"))")
            #expect(signIn.body["isNewUser"] == nil)
            let lookup = try await firebase.call("accounts:lookup", .object(["idToken": .string(try #require(signIn.string("idToken")))]))
            guard case .array(let providers)? = lookup.users.first?["providerUserInfo"] else { Issue.record("\(lookup.text)"); return }
            let ids = providers.compactMap { provider -> String? in
                if case .object(let info) = provider, case .string(let id)? = info["providerId"] { id } else { nil }
            }
            #expect(Set(ids) == ["apple.com", "facebook.com"])
            let surfaces = try await firebase.app.admin.query("SELECT DISTINCT metadata->>'surface' AS s FROM events WHERE stream LIKE 'user-%' ORDER BY 1")
                .map { try $0.decode("s", as: String.self) }
            #expect(surfaces == ["firebase", "parse"])
        }
    }

    /// A developer's uid (the `custom` identity) is how the backend names the user: no surface removes it, for
    /// the user or an admin, so the user's `localId` never changes and a custom token never makes a second user.
    @Test func noSurfaceRemovesADevelopersUid() async throws {
        try await FirebaseApp.run(settings: ["TETHER_PARSE_APP_ID": ParseApp.appID]) { firebase in
            let created = try await firebase.admin("accounts", .object([
                "localId": "dev-uid-7", "email": "dev7@example.com", "password": "a long password",
            ]))
            #expect(created.string("localId") == "dev-uid-7", "\(created.text)")
            let parse = ParseApp(app: firebase.app)
            let login = try await parse.send("POST", "/login", json: .object(["username": "dev7@example.com", "password": "a long password"]))
            let objectId = try #require(login.string("objectId"), "\(login.text)")
            let unlinked = try await parse.send(
                "PUT", "/users/\(objectId)", .init(session: login.string("sessionToken")), json: .object(["authData": .object(["custom": .null])]))
            #expect(unlinked.status == 400, "\(unlinked.text)")
            #expect(unlinked.body["code"] == 142)
            let master = try await parse.send(
                "PUT", "/users/\(objectId)", .init(master: try await AdminKeyStore(database: firebase.app.admin).create(
                    role: .admin, name: "parse master", metadata: EventMetadata(actor: .operator("tester"), surface: "cli")).secret), json: .object(["authData": .object(["custom": .null])]))
            #expect(master.status == 400, "\(master.text)")
            let signedIn = try await firebase.app.signedIn(firebase.app.password("dev7@example.com", "a long password"))
            let removed = try await firebase.app.client.send(
                "DELETE", "/v1/users/me/identities/custom", fields: [("Authorization", "Bearer \(signedIn.session.accessToken)")], body: [])
            #expect(removed.status == 400, "\(removed.bodyText)")
            #expect(removed.bodyText.contains("invalid_request"))
            // Nothing unlinked; the uid still names the user.
            #expect(try await firebase.app.eventCount("IdentityUnlinked") == 0)
            let lookup = try await firebase.admin("accounts:lookup", .object(["localId": .array(["dev-uid-7"])]))
            #expect(lookup.users.count == 1, "\(lookup.text)")
        }
    }

    @Test func idTokensOfAnotherProjectForgedExpiredOrOfAnEndedSessionAreRefusedAndWriteNothing() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object([:]))
            let idToken = try #require(signUp.string("idToken"))
            let parts = idToken.split(separator: ".").map(String.init)
            func withClaims(_ change: (inout [String: JSONValue]) -> Void) throws -> String {
                var claims = try JSONDecoder().decode([String: JSONValue].self, from: Data(try Base64URL.decode(parts[1])))
                change(&claims)
                return parts[0] + "." + Base64URL.encode(Array(try JSONEncoder().encode(claims))) + "." + parts[2]
            }
            let before = try await firebase.app.totalEvents()
            let otherProject = try withClaims { $0["aud"] = "someone-elses-project" }
            let forged = try withClaims { $0["sub"] = "another-user" }
            for token in [otherProject, forged, "not.a.token", parts[0] + "." + parts[1] + "."] {
                let answer = try await firebase.call("accounts:update", .object(["idToken": .string(token), "displayName": "Mallory"]))
                #expect(answer.status == 400)
                #expect(answer.errorMessage == "INVALID_ID_TOKEN", "\(answer.text)")
            }
            #expect(try await firebase.call("accounts:lookup", .object([:])).errorMessage == "MISSING_ID_TOKEN")
            #expect(try await firebase.app.totalEvents() == before)
            // Deleted: the token is refused and the SDK signs the user out.
            #expect(try await firebase.call("accounts:delete", .object(["idToken": .string(idToken)])).status == 200)
            #expect(try await firebase.call("accounts:lookup", .object(["idToken": .string(idToken)])).errorMessage == "USER_NOT_FOUND")
        }
    }

    @Test func anExpiredIDTokenIsTokenExpired() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object([:]))
            let account = try await firebase.app.service.accounts.read(try #require(UUID(uuidString: signUp.string("localId") ?? "")))
            let session = try #require(account.activeSessions.first)
            // Signed by the service's own key, but an hour and more ago.
            let tokens = try #require(firebase.app.service.firebaseIDTokens)
            let old = try await tokens.issue(
                account, localId: account.id.uuidString.lowercased(), sessionId: session.id, authTime: Date().addingTimeInterval(-7200),
                signInProvider: "anonymous", secondFactor: nil, now: Date().addingTimeInterval(-7200))
            let answer = try await firebase.call("accounts:lookup", .object(["idToken": .string(old)]))
            #expect(answer.errorMessage == "TOKEN_EXPIRED", "\(answer.text)")
        }
    }
}
