import Foundation
import Testing
import TetherCore
import TetherTesting

/// `X-Parse-Request-Id`: the Parse SDKs retry 5xx and timeouts with the same id; a retry gets the first answer and writes nothing.
@Suite("Parse surface: retried X-Parse-Request-Id")
struct ParseRetryTests {
    @Test func parallelRetriesOfASignUpGetTheFirstAnswerAndMakeOneUser() async throws {
        try await ParseApp.run { parse in
            let token = try await parse.appleToken("apple-retry")
            let body: JSONValue = .object(["authData": .object(["apple": ParseApp.strings(["id": "apple-retry", "token": token])])])
            let requestId = UUID().uuidString.lowercased()
            let answers = try await withThrowingTaskGroup(of: ParseAnswer.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        try await parse.app.withNewClient { client in
                            try await parse.send("POST", "/users", .init(requestId: requestId), json: body, on: client)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.map(\.status) == Array(repeating: 201, count: 6), "\(answers.map(\.text))")
            #expect(Set(answers.map(\.text)).count == 1, "every retry gets the first answer's bytes")
            #expect(answers.filter { $0.header("Idempotent-Replayed") == "true" }.count == 5)
            #expect(try await parse.app.eventCount("UserRegistered") == 1)
            #expect(try await parse.app.eventCount("SessionStarted") == 1)
            #expect(try await parse.send("GET", "/users/me", .init(session: answers[0].string("sessionToken"))).status == 200)

            // The same id with another body is Parse's duplicate request; a new id is a new request.
            let other: JSONValue = .object(["authData": .object(["anonymous": ParseApp.strings(["id": UUID().uuidString.lowercased()])])])
            let duplicate = try await parse.send("POST", "/users", .init(requestId: requestId), json: other)
            #expect(duplicate.status == 400)
            #expect(duplicate.text == #"{"code":159,"error":"Duplicate request"}"#)
            #expect(try await parse.send("POST", "/users", .init(requestId: UUID().uuidString), json: other).status == 201)
            #expect(try await parse.app.eventCount("UserRegistered") == 2)
        }
    }

    /// A log-in's answer hands out a session token that lives a year: a retry gets it for ten minutes, and after
    /// that the id is Parse Server's duplicate request, so a captured request with its id is no credential.
    @Test func aLogInsAnswerIsReplayedForMinutesThenTheIdIsADuplicate() async throws {
        try await ParseApp.run { parse in
            let token = try await parse.appleToken("apple-captured")
            let body: JSONValue = .object(["authData": .object(["apple": ParseApp.strings(["id": "apple-captured", "token": token])])])
            let requestId = UUID().uuidString.lowercased()
            let first = try await parse.send("POST", "/users", .init(requestId: requestId), json: body)
            #expect(first.status == 201, "\(first.text)")
            try await parse.app.admin.query("UPDATE idempotent_responses SET created_at = now() - interval '9 minutes'")
            let retry = try await parse.send("POST", "/users", .init(requestId: requestId), json: body)
            #expect(retry.text == first.text)
            try await parse.app.admin.query("UPDATE idempotent_responses SET created_at = now() - interval '11 minutes'")
            let late = try await parse.send("POST", "/users", .init(requestId: requestId), json: body)
            #expect(late.status == 400)
            #expect(late.text == #"{"code":159,"error":"Duplicate request"}"#)
            #expect(try await parse.app.eventCount("SessionStarted") == 1)
        }
    }

    /// A kept log-in answer whose session has ended (a log-out, a revocation, the user disabled) is not replayed: it
    /// told the client it signed in, with a dead token. The retry runs again, as /v1's does.
    @Test func aLogInsAnswerIsNotReplayedOnceItsSessionEnded() async throws {
        try await ParseApp.run { parse in
            let token = try await parse.appleToken("apple-ended")
            let body: JSONValue = .object(["authData": .object(["apple": ParseApp.strings(["id": "apple-ended", "token": token])])])
            let requestId = UUID().uuidString.lowercased()
            let first = try await parse.send("POST", "/users", .init(requestId: requestId), json: body)
            let firstToken = try #require(first.string("sessionToken"), "\(first.text)")
            #expect(try await parse.send("POST", "/logout", .init(session: firstToken)).status == 200)
            let retry = try await parse.send("POST", "/users", .init(requestId: requestId), json: body)
            #expect(retry.status == 200, "\(retry.text)")
            let retryToken = try #require(retry.string("sessionToken"))
            #expect(retryToken != firstToken)
            #expect(try await parse.send("GET", "/users/me", .init(session: retryToken)).status == 200)
            // That new answer is kept and replayed in turn while its session lives.
            #expect(try await parse.send("POST", "/users", .init(requestId: requestId), json: body).string("sessionToken") == retryToken)
            #expect(try await parse.app.eventCount("SessionStarted") == 2)
        }
    }

    /// A review replayed a log-in sent with a session token a day later, and with that session logged out since: both
    /// got a live session from a captured request. And a password change's answer came back with its token dead.
    @Test func aRequestThatCameWithASessionHasItsAnswerReplayedOnlyInTheWindowAndWhileItsTokenLives() async throws {
        try await ParseApp.run { parse in
            let signedUp = try await parse.send("POST", "/users", json: .object(["username": "sid@example.com", "password": "a long password"]))
            let session = try #require(signedUp.string("sessionToken"), "\(signedUp.text)")
            let token = try await parse.appleToken("apple-sid")
            let body: JSONValue = .object(["authData": .object(["apple": ParseApp.strings(["id": "apple-sid", "token": token])])])
            let requestId = UUID().uuidString.lowercased()
            let first = try await parse.send("POST", "/users", .init(session: session, requestId: requestId), json: body)
            #expect(first.string("sessionToken") != nil, "\(first.text)")
            try await parse.app.admin.query("UPDATE idempotent_responses SET created_at = now() - interval '11 minutes'")
            let late = try await parse.send("POST", "/users", .init(session: session, requestId: requestId), json: body)
            #expect(late.text == #"{"code":159,"error":"Duplicate request"}"#, "a live session's retry too")
            #expect(try await parse.send("POST", "/logout", .init(session: session)).status == 200)
            let ended = try await parse.send("POST", "/users", .init(session: session, requestId: requestId), json: body)
            #expect(ended.string("sessionToken") == nil, "an ended session's: \(ended.text)")

            // A password change ends every session and answers a new token; its retry gets it only while it lives.
            let logIn = try await parse.send("POST", "/login", json: .object(["username": "sid@example.com", "password": "a long password"]))
            let current = try #require(logIn.string("sessionToken"))
            let objectId = try #require(logIn.string("objectId"))
            let change = UUID().uuidString.lowercased()
            let changed = try await parse.send(
                "PUT", "/users/\(objectId)", .init(session: current, requestId: change), json: .object(["password": "another long password"]))
            let newToken = try #require(changed.string("sessionToken"), "\(changed.text)")
            let retried = try await parse.send(
                "PUT", "/users/\(objectId)", .init(session: current, requestId: change), json: .object(["password": "another long password"]))
            #expect(retried.string("sessionToken") == newToken, "replayed while its token lives: \(retried.text)")
            // Past the window, the retry is a duplicate, as any (a 209 tells the SDK it was signed out).
            try await parse.app.admin.query("UPDATE idempotent_responses SET created_at = now() - interval '11 minutes'")
            let lateChange = try await parse.send(
                "PUT", "/users/\(objectId)", .init(session: current, requestId: change), json: .object(["password": "another long password"]))
            #expect(lateChange.text == #"{"code":159,"error":"Duplicate request"}"#, "\(lateChange.text)")
            try await parse.app.admin.query("UPDATE idempotent_responses SET created_at = now()")
            #expect(try await parse.send("POST", "/logout", .init(session: newToken)).status == 200)
            let dead = try await parse.send(
                "PUT", "/users/\(objectId)", .init(session: current, requestId: change), json: .object(["password": "another long password"]))
            #expect(dead.code == 209 && dead.string("sessionToken") == nil, "not with its token dead: \(dead.text)")
        }
    }

    @Test func aRetriedLinkOrRefusalGetsTheFirstAnswerAndWritesNothing() async throws {
        try await ParseApp.run { parse in
            let anonymous = try await parse.anonymousLogIn()
            let objectId = try #require(anonymous.string("objectId"))
            let session = try #require(anonymous.string("sessionToken"))
            let link: JSONValue = .object(["authData": .object([
                "anonymous": .null, "google": ParseApp.strings(["id": "google-retry", "id_token": try await parse.googleToken("google-retry")]),
            ])])
            let requestId = UUID().uuidString.lowercased()
            let first = try await parse.send("PUT", "/users/\(objectId)", .init(session: session, requestId: requestId), json: link)
            #expect(first.status == 200, "\(first.text)")
            let events = try await parse.app.totalEvents()
            let retry = try await parse.send("PUT", "/users/\(objectId)", .init(session: session, requestId: requestId), json: link)
            #expect(retry.text == first.text)
            #expect(try await parse.app.totalEvents() == events)
            // A refusal is kept too: the retry does not run again.
            let bad: JSONValue = .object(["authData": .object(["apple": ParseApp.strings(["id": "x", "token": "not-a-jwt"])])])
            let refusalId = UUID().uuidString
            let refused = try await parse.send("PUT", "/users/\(objectId)", .init(session: session, requestId: refusalId), json: bad)
            #expect(refused.code == 101)
            let failures = try await parse.app.tallied("failed")
            #expect(failures == 1, "the refused token is counted")
            #expect(try await parse.send("PUT", "/users/\(objectId)", .init(session: session, requestId: refusalId), json: bad).text == refused.text)
            #expect(try await parse.app.tallied("failed") == failures)
        }
    }
}
