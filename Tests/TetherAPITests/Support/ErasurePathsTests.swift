import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

/// Every way a person can be erased ends the same: a dump of the database holds nothing that names
/// them, and the read models are what the log rebuilds.
@Suite("Every erasure path: the dump check and the replay check")
struct ErasurePathsTests {
    enum Path: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case admin, apple, facebook, firebase, anonymousSweep, v1Owner, parseOwner, parseMasterKey
        var testDescription: String { rawValue }
    }

    @Test(arguments: Path.allCases)
    func aDumpAfterTheErasureHoldsNothingOfThePersonAndReplayFindsNoDrift(_ path: Path) async throws {
        try await FirebaseApp.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "10", "TETHER_PARSE_APP_ID": ParseApp.appID]) { firebase in
            let service = firebase.app
            let email = "erin.\(path.rawValue.lowercased())@example.com"
            let name = "Quillfeather\(path.rawValue)"
            let appleSub = "erin-apple-sub-\(path.rawValue)"
            var needles = [email]
            let userId: String
            let seal = try await service.admin.readModelSeal()
            /// Before the erasure the dump holds the person's values sealed in the read models (sealing is
            /// deterministic: the same value seals to the same text), never in clear; so the check below can fail.
            func expectNamedBefore(_ needles: [String]) throws {
                let dump = try service.dump()
                for needle in needles {
                    #expect(!dump.lowercased().contains(needle.lowercased()), "\(needle) is in clear in the dump")
                    #expect(dump.contains(try seal.seal(needle)), "\(needle) is not in the read models before the erasure")
                }
            }
            switch path {
            case .admin:
                let signedUp = try await service.client.post(
                    "/v1/sign-up", headers: ["User-Agent": "erin-agent/1"],
                    json: ["email": email, "password": "correct horse battery", "displayName": name])
                #expect(signedUp.status == 201)
                let body = try signedUp.decodeJSON(SignedIn.self)
                userId = body.user.id
                #expect(try await service.link(try await service.apple(appleSub, email: email), to: body.session.accessToken).status == 200)
                #expect(try await service.signIn(service.password(email, "not her password")).status == 401)
                needles += [name, appleSub, "erin-agent"]
                try expectNamedBefore([email, name, appleSub])
                let admin = try await service.adminKey(.admin)
                let erased = try await service.client.send(
                    "DELETE", "/v1/admin/users/\(userId)",
                    fields: [("Authorization", "Bearer \(admin.secret)"), ("Content-Type", "application/json")],
                    body: Array(#"{"reason": "asked to be forgotten"}"#.utf8))
                #expect(erased.status == 200, "\(erased.bodyText)")
            case .apple:
                userId = try await service.signedIn(try await service.apple(appleSub, email: email)).user.id
                needles.append(appleSub)
                try expectNamedBefore(needles)
                let minted = try await service.idp.post(
                    "/dev-idp/apple/notification", json: ["type": "account-delete", "sub": appleSub])
                let payload = try #require(try minted.decodeJSON([String: String].self)["payload"])
                #expect(try await service.client.post("/v1/providers/apple/notifications", json: ["payload": payload]).status == 200)
            case .facebook:
                userId = try await service.signedIn(try await service.facebook("7312001", email: email)).user.id
                try expectNamedBefore(needles)
                let signed = try await service.idp.post("/dev-idp/facebook/data-deletion", json: ["userId": "7312001"])
                    .decodeJSON([String: String].self)["signed_request"]
                let answer = try await service.client.post(
                    "/v1/providers/facebook/data-deletion", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                    body: Array("signed_request=\(try #require(signed))".utf8))
                #expect(answer.status == 200, "\(answer.bodyText)")
            case .firebase:
                let signedUp = try await firebase.call("accounts:signUp", .object([
                    "email": .string(email), "password": "correct horse battery", "displayName": .string(name), "returnSecureToken": true,
                ]))
                userId = try #require(signedUp.string("localId"))
                needles.append(name)
                try expectNamedBefore(needles)
                let deleted = try await firebase.call("accounts:delete", .object(["idToken": .string(try #require(signedUp.string("idToken")))]))
                #expect(deleted.status == 200)
            case .v1Owner, .parseOwner, .parseMasterKey:
                let signedUp = try await service.client.post(
                    "/v1/sign-up", json: ["email": email, "password": "correct horse battery", "displayName": name])
                #expect(signedUp.status == 201)
                let body = try signedUp.decodeJSON(SignedIn.self)
                userId = body.user.id
                needles.append(name)
                try expectNamedBefore(needles)
                if path == .v1Owner {
                    let deleted = try await service.client.delete("/v1/users/me", headers: ["Authorization": "Bearer \(body.session.accessToken)"])
                    #expect(deleted.status == 204, "\(deleted.bodyText)")
                } else {
                    let parse = ParseApp(app: service)
                    let loggedIn = try await parse.send(
                        "POST", "/login", json: ["username": .string(email), "password": "correct horse battery"])
                    let objectId = try #require(loggedIn.string("objectId"), "\(loggedIn.text)")
                    let headers = path == .parseOwner
                        ? ParseApp.Headers(session: try #require(loggedIn.string("sessionToken")))
                        : ParseApp.Headers(master: try await service.adminKey(.admin).secret)
                    let deleted = try await parse.send("DELETE", "/users/\(objectId)", headers)
                    #expect(deleted.status == 200 && deleted.body.isEmpty && deleted.text == "{}", "\(deleted.text)")
                }
            case .anonymousSweep:
                let signedUp = try await firebase.call("accounts:signUp", .object(["returnSecureToken": true]))
                userId = try #require(signedUp.string("localId"))
                let named = try await firebase.call("accounts:update", .object([
                    "idToken": .string(try #require(signedUp.string("idToken"))), "displayName": .string(name),
                ]))
                #expect(named.status == 200)
                needles = [name]
                try expectNamedBefore(needles)
                let swept = try await service.service.accounts.sweepAnonymousUsers(
                    inactiveFor: 60, now: Date().addingTimeInterval(3600), metadata: EventMetadata(actor: .operator("tester"), surface: "cli"))
                #expect(swept == 1)
            }
            #expect(try await service.eventCount("UserErased", userId: userId) == 1)

            let dump = try service.dump()
            #expect(dump.contains(userId.lowercased()), "the dump still names the user's id")
            for needle in needles {
                #expect(!dump.lowercased().contains(needle.lowercased()), "\(needle) is in a dump after the erasure")
                #expect(!dump.contains(try seal.seal(needle)), "\(needle) is still in the read models, sealed, after the erasure")
            }
            #expect(try await ProjectionReplay(projection: .accounts, database: service.admin).run(.verify).drift.isEmpty)
        }
    }
}
