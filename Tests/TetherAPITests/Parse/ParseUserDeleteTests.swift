import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherTesting

/// Parse-Swift's `user.delete()` (`DELETE /parse/users/:id`): the user's own session or the master key erases the
/// user; anyone else gets Parse Server's answers and changes nothing (ErasurePathsTests checks what is left after).
@Suite("Parse: DELETE /users/:id")
struct ParseUserDeleteTests {
    @Test func aUserDeletesThemselvesAndNobodyElseDoes() async throws {
        try await ParseApp.run { parse in
            let alice = try await parse.logIn("apple", ["id": "apple-delete-alice", "token": try await parse.appleToken("apple-delete-alice")])
            let bob = try await parse.logIn("apple", ["id": "apple-delete-bob", "token": try await parse.appleToken("apple-delete-bob")])
            let aliceId = try #require(alice.string("objectId")), aliceToken = try #require(alice.string("sessionToken"))
            let bobToken = try #require(bob.string("sessionToken"))
            let events = try await parse.accountEvents()

            let anonymous = try await parse.send("DELETE", "/users/\(aliceId)")
            #expect(anonymous.status == 400 && anonymous.code == 206 && anonymous.string("error") == "Insufficient auth to delete user",
                    "\(anonymous.text)")
            let someoneElse = try await parse.send("DELETE", "/users/\(aliceId)", .init(session: bobToken))
            #expect(someoneElse.status == 400 && someoneElse.code == 206 && someoneElse.string("error") == "Insufficient auth.",
                    "\(someoneElse.text)")
            // `me` is no objectId of Parse's delete: another user's, as Parse Server reads it, in either form.
            let me = try await parse.send("DELETE", "/users/me", .init(session: bobToken))
            #expect(me.status == 400 && me.code == 206, "\(me.text)")
            let forged = try await parse.send("DELETE", "/users/\(aliceId)", .init(session: "r:" + String(repeating: "0", count: 32)))
            #expect(forged.code == 209, "\(forged.text)")
            #expect(try await parse.accountEvents() == events, "a refused delete writes nothing")
            #expect(try await parse.send("GET", "/users/me", .init(session: aliceToken)).status == 200)

            let deleted = try await parse.send("DELETE", "/users/\(aliceId)", .init(session: aliceToken))
            #expect(deleted.status == 200 && deleted.text == "{}", "\(deleted.text)")
            #expect(try await parse.app.eventCount("UserErased") == 1)
            // Her session ended with her: the token is Parse's invalid session, and so is a second delete.
            #expect(try await parse.send("GET", "/users/me", .init(session: aliceToken)).code == 209)
            #expect(try await parse.send("DELETE", "/users/\(aliceId)", .init(session: aliceToken)).code == 209)
            // Bob is untouched, and the same Apple ID signs in as a new user.
            #expect(try await parse.send("GET", "/users/me", .init(session: bobToken)).status == 200)
            let again = try await parse.logIn("apple", ["id": "apple-delete-alice", "token": try await parse.appleToken("apple-delete-alice")])
            #expect(again.status == 201 && again.string("objectId") != aliceId, "\(again.text)")
        }
    }

    /// Parse SDKs send a write again with the same `X-Parse-Request-Id` when its answer was lost: a delete that
    /// went through gets its first `{}` back, not 209 for the session it ended (which would tell the app the
    /// deletion failed). Another request with that token is still 209.
    @Test func aRetriedDeleteGetsItsFirstAnswer() async throws {
        try await ParseApp.run { parse in
            let dora = try await parse.logIn("apple", ["id": "apple-delete-dora", "token": try await parse.appleToken("apple-delete-dora")])
            let doraId = try #require(dora.string("objectId")), doraToken = try #require(dora.string("sessionToken"))
            let headers = ParseApp.Headers(session: doraToken, requestId: UUID().uuidString)
            let deleted = try await parse.send("DELETE", "/users/\(doraId)", headers)
            #expect(deleted.status == 200 && deleted.text == "{}", "\(deleted.text)")
            let retried = try await parse.send("DELETE", "/users/\(doraId)", headers)
            #expect(retried.status == 200 && retried.text == "{}", "\(retried.text)")
            #expect(try await parse.app.eventCount("UserErased") == 1)
            let another = try await parse.send("DELETE", "/users/\(doraId)", .init(session: doraToken, requestId: UUID().uuidString))
            #expect(another.code == 209, "\(another.text)")
            #expect(try await parse.send("GET", "/users/me", .init(session: doraToken)).code == 209)
        }
    }

    /// The master key erases anyone, as its admin key's action; an unknown or erased user is 101.
    @Test func theMasterKeyDeletesAnyUserAsItsAdminKeysAction() async throws {
        try await ParseApp.run { parse in
            let carol = try await parse.send("POST", "/users", json: .object(["username": "carol@example.com", "password": "difference engine"]))
            let carolId = try #require(carol.string("objectId"))
            let master = try await parse.app.adminKey(.admin)
            let support = try await parse.app.adminKey(.support)

            let asSupport = try await parse.send("DELETE", "/users/\(carolId)", .init(master: support.secret))
            #expect(asSupport.status == 403, "a support key is no master key: \(asSupport.text)")
            let unknown = try await parse.send("DELETE", "/users/AAAAAAAAAA", .init(master: master.secret))
            #expect(unknown.status == 404 && unknown.code == 101, "\(unknown.text)")
            #expect(try await parse.app.eventCount("UserErased") == 0)

            let deleted = try await parse.send("DELETE", "/users/\(carolId)", .init(master: master.secret))
            #expect(deleted.status == 200 && deleted.text == "{}", "\(deleted.text)")
            #expect(try await parse.app.eventCount("UserErased") == 1)
            let userErased = try await parse.app.admin.query("SELECT user_id FROM events WHERE type = 'UserErased'")
            let carolUUID: UUID = try #require(userErased.first).decode("user_id")
            let erasure = try await parse.app.events(inStream: .user(carolUUID)).filter { $0.type == "UserErased" }
            #expect(erasure.map(\.metadata.actor) == [.admin(keyId: master.key.id)])
            let records = try await parse.app.events(inStream: .adminKey(master.key.id)).filter { $0.type == "AdminActionRequested" }
            let actions = try records.map { try JSONDecoder().decode(AdminEvent.ActionRequested.self, from: $0.data) }
            #expect(actions.map { "\($0.action) \($0.status)" } == ["erase 200"])
            #expect(records.map(\.userId) == [carolUUID])
            let again = try await parse.send("DELETE", "/users/\(carolId)", .init(master: master.secret))
            #expect(again.status == 404 && again.code == 101, "\(again.text)")
        }
    }
}
