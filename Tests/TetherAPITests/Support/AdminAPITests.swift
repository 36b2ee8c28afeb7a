import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherTesting

@Suite("Support and admin API over HTTP")
struct AdminAPITests {
    /// A Parse anonymous user signs in with its `authData.anonymous.id` alone: support and admin readers
    /// (user detail, history, export, the event feed) see a fingerprint of it, never the id itself.
    @Test func anAnonymousIdReachesSupportOnlyAsAFingerprint() async throws {
        try await SupportHarness.run(settings: ["TETHER_PARSE_APP_ID": "support-app"]) { harness in
            let secretId = "7d1b6a52-3c5e-4f1a-9e0b-2a4c6d8e0f13"
            func parseLogIn(_ id: String) async throws -> HTTPTestClient.Response {
                try await harness.client.post(
                    "/parse/users", headers: ["X-Parse-Application-Id": "support-app"],
                    json: ["authData": JSONValue.object(["anonymous": .object(["id": .string(id)])])])
            }
            let signedUp = try await parseLogIn(secretId)
            #expect(signedUp.status == 201, "\(signedUp.bodyText)")
            let objectId = try #require(try signedUp.json["objectId"]?.string)
            let userId = try #require(try await harness.owner.query(
                "SELECT user_id FROM identities WHERE provider = 'anonymous'").first?.decode("user_id", as: UUID.self)).uuidString.lowercased()
            let (_, support) = try await harness.adminKey(.support)
            let (_, admin) = try await harness.adminKey(.admin)
            let detail = try await harness.adminGet("/v1/admin/users/\(userId)", key: support)
            #expect(detail.status == 200, "\(detail.bodyText)")
            let fingerprint = try #require(detail.bodyText.range(of: #"sha256:[0-9a-f]{16}"#, options: .regularExpression).map { String(detail.bodyText[$0]) })
            let reads = [
                ("detail", detail),
                ("history", try await harness.adminGet("/v1/admin/users/\(userId)/history", key: support)),
                ("export", try await harness.adminGet("/v1/admin/users/\(userId)/export", key: admin)),
                ("feed", try await harness.adminGet("/v1/admin/events?userId=\(userId)", key: admin)),
                ("an action's answer", try await harness.adminPost("/v1/admin/users/\(userId)/revoke-sessions", key: admin)),
                ("Parse's master-key read", try await harness.client.get(
                    "/parse/users/\(objectId)", headers: ["X-Parse-Application-Id": "support-app", "X-Parse-Master-Key": admin])),
            ]
            for (name, read) in reads {
                #expect(read.status == 200, "\(name): \(read.bodyText)")
                #expect(!read.bodyText.contains(secretId), "\(name) shows the anonymous id: \(read.bodyText)")
                #expect(read.bodyText.contains(fingerprint), "\(name) shows no fingerprint: \(read.bodyText)")
            }
            // A master-key client saving back the user it fetched (with the fingerprint) changes nothing.
            let before = try await harness.events(inStream: .user(try #require(UUID(uuidString: userId)))).count
            let saved = try await harness.client.put(
                "/parse/users/\(objectId)", headers: ["X-Parse-Application-Id": "support-app", "X-Parse-Master-Key": admin],
                json: ["authData": JSONValue.object(["anonymous": .object(["id": .string(fingerprint)])])])
            #expect(saved.status == 200, "\(saved.bodyText)")
            #expect(try await harness.events(inStream: .user(try #require(UUID(uuidString: userId)))).count == before)
            // The fingerprint signs nobody in to the user; the id still does.
            let withFingerprint = try await parseLogIn(fingerprint)
            #expect(try withFingerprint.json["objectId"]?.string != objectId)
            #expect(try await parseLogIn(secretId).json["objectId"]?.string == objectId)
        }
    }

    @Test func requestsWithoutALiveKeyAre401AndReachNothing() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("ada@example.com")
            let target = "/v1/admin/users/\(user.id.uuidString.lowercased())"

            let missing = try await harness.client.get(target)
            #expect(missing.status == 401)
            #expect(try missing.json["code"]?.string == "invalid_token")
            #expect(missing.headers.values(for: "WWW-Authenticate") == ["Bearer realm=\"tether-admin\""])

            let wellFormedButUnknown = AdminKeyStore.secretFormat.generate()
            for header in ["Bearer nonsense", "Basic dXNlcjpwYXNz", "Bearer \(wellFormedButUnknown)", "Bearer "] {
                let refused = try await harness.client.get(target, headers: ["Authorization": header])
                #expect(refused.status == 401, "\(header)")
                #expect(try refused.json["code"]?.string == "invalid_token")
            }

            let support = try await harness.adminKey(.support)
            #expect(try await harness.adminGet(target, key: support.secret).status == 200)
            _ = try await AdminKeyStore(database: harness.owner).revoke(support.key.id, metadata: EventMetadata(surface: "cli"))
            let revoked = try await harness.adminGet(target, key: support.secret)
            #expect(revoked.status == 401)
            #expect(try revoked.json["code"]?.string == "invalid_token")

            // Created, one view, revoked: the refused requests left no trace in the key's stream.
            let types = try await harness.events(inStream: .adminKey(support.key.id)).map(\.type)
            #expect(types == ["AdminKeyCreated", "AdminUserViewed", "AdminKeyRevoked"])
        }
    }

    /// A history read does not look up a key found live before: its record checks it, in its own transaction.
    /// A key revoked since (here from another pool, as `tether admin-keys revoke` would) is refused there
    /// with 401, and nothing is recorded or read with it.
    @Test func aKeyRevokedAfterAHistoryReadIsRefusedAtItsNextReadWithNothingRecorded() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("ada@example.com")
            let history = "/v1/admin/users/\(user.id.uuidString.lowercased())/history"
            let support = try await harness.adminKey(.support)
            for _ in 0..<2 {
                let read = try await harness.adminGet(history, key: support.secret)
                #expect(read.status == 200)
                #expect(try read.json["events"]?.elements.isEmpty == false)
            }
            _ = try await AdminKeyStore(database: harness.owner).revoke(support.key.id, metadata: EventMetadata(surface: "cli"))
            for target in [history, "\(history)?limit=50", "\(history)?limit=none", "\(history)?after=1"] {
                let refused = try await harness.adminGet(target, key: support.secret)
                #expect(refused.status == 401, "\(target)")
                #expect(try refused.json["code"]?.string == "invalid_token", "\(target)")
                #expect(try refused.json["events"] == nil)
            }
            let types = try await harness.events(inStream: .adminKey(support.key.id)).map(\.type)
            #expect(types == ["AdminKeyCreated", "AdminHistoryViewed", "AdminHistoryViewed", "AdminKeyRevoked"])

            // Another key is found and used as before.
            let other = try await harness.adminKey(.support)
            #expect(try await harness.adminGet(history, key: other.secret).status == 200)
            #expect(try await harness.adminGet(history, key: other.secret).status == 200)
            #expect(try await harness.events(inStream: .adminKey(other.key.id)).map(\.type).filter { $0 == "AdminHistoryViewed" }.count == 2)
        }
    }

    @Test func supportKeyCannotActAndTheRefusalIsRecorded() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("ada@example.com")
            let support = try await harness.adminKey(.support)
            let id = user.id.uuidString.lowercased()
            for action in ["disable", "enable", "revoke-sessions"] {
                let refused = try await harness.adminPost("/v1/admin/users/\(id)/\(action)", key: support.secret)
                #expect(refused.status == 403, "\(action)")
                #expect(try refused.json["code"]?.string == "forbidden")
            }
            let me = try await harness.client.get("/v1/users/me", headers: ["Authorization": "Bearer \(user.accessToken)"])
            #expect(me.status == 200, "the refused disable changed nothing")

            let records = try await harness.events(inStream: .adminKey(support.key.id)).dropFirst()
            #expect(records.map(\.type) == Array(repeating: "AdminActionRequested", count: 3))
            for record in records {
                #expect(record.userId == user.id)
                #expect(record.metadata.actor == .admin(keyId: support.key.id))
                #expect(record.metadata.surface == "admin")
                let payload = try JSONDecoder().decode(AdminEvent.ActionRequested.self, from: record.data)
                #expect(payload.status == 403)
            }
        }
    }

    /// An action's change commits before its record in the key's stream: when the record then fails, the change
    /// is still answered (its own events name the key as their actor), and a new webhook's secret, shown once,
    /// still reaches the admin. A read is not answered without its record.
    @Test func aCommittedActionIsAnsweredWhenItsRecordFailsAndAReadIsNot() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("rita@example.com")
            let admin = try await harness.adminKey(.admin)
            try await harness.owner.refuseEvents(ofTypes: ["AdminActionRequested", "AdminUserViewed"])
            let disabled = try await harness.adminPost("/v1/admin/users/\(user.id.uuidString.lowercased())/disable", key: admin.secret)
            #expect(disabled.status == 200, "\(disabled.bodyText)")
            #expect(try await harness.client.get("/v1/users/me", headers: ["Authorization": "Bearer \(user.accessToken)"]).status == 401)
            let disabledBy: [String] = try await harness.owner.query("""
                SELECT metadata -> 'actor' ->> 'kind' AS kind FROM events WHERE type = 'UserDisabled' AND user_id = \(user.id)
                """).map { try $0.decode("kind") }
            #expect(disabledBy == ["admin"], "the change's own event names the key")
            let created = try await harness.client.post(
                "/v1/admin/webhooks", headers: ["Authorization": "Bearer \(admin.secret)"], json: ["url": JSONValue.string("https://93.184.215.14/hook")])
            #expect(created.status == 201 && created.bodyText.contains("whsec_"), "\(created.bodyText)")
            let read = try await harness.adminGet("/v1/admin/users/\(user.id.uuidString.lowercased())", key: admin.secret)
            #expect(read.status == 500, "no read without its record: \(read.status)")
        }
    }

    @Test func adminKeyDisablesEnablesAndRevokesSessionsAsTheAdminActor() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("ada@example.com")
            let admin = try await harness.adminKey(.admin)
            let base = "/v1/admin/users/\(user.id.uuidString.lowercased())"

            let disabled = try await harness.adminPost("\(base)/disable", key: admin.secret, json: ["reason": "chargeback fraud"])
            #expect(disabled.status == 200)
            #expect(try disabled.json["user"]?["disabled"] == .bool(true))
            let me = try await harness.client.get("/v1/users/me", headers: ["Authorization": "Bearer \(user.accessToken)"])
            #expect(me.status == 401, "disabling ends the user's sessions at once")
            let signIn = try await harness.client.post(
                "/v1/sign-in", json: ["provider": JSONValue.string("password"),
                                      "credential": ["email": "ada@example.com", "password": "correct horse battery"]])
            #expect(signIn.status == 403)
            #expect(try signIn.json["code"]?.string == "user_disabled")

            let again = try await harness.adminPost("\(base)/disable", key: admin.secret)
            #expect(again.status == 200, "disabling a disabled user is answered with its state")
            let enabled = try await harness.adminPost("\(base)/enable", key: admin.secret)
            #expect(enabled.status == 200)
            #expect(try enabled.json["user"]?["disabled"] == .bool(false))
            let revoked = try await harness.adminPost("\(base)/revoke-sessions", key: admin.secret)
            #expect(revoked.status == 200)

            let userEvents = try await harness.events(inStream: .user(user.id))
            let byAdmin = userEvents.filter { $0.metadata.actor == .admin(keyId: admin.key.id) }
            #expect(byAdmin.map(\.type) == ["UserDisabled", "SessionsRevoked", "UserEnabled", "SessionsRevoked"])
            #expect(byAdmin.allSatisfy { $0.metadata.surface == "admin" && $0.metadata.clientIP == "127.0.0.1" })
            #expect(String(decoding: byAdmin[0].data, as: UTF8.self).contains("chargeback fraud"))

            let records = try await harness.events(inStream: .adminKey(admin.key.id)).dropFirst()
            let actions = try records.map { try JSONDecoder().decode(AdminEvent.ActionRequested.self, from: $0.data) }
            #expect(actions.map(\.action) == ["disable", "disable", "enable", "revoke-sessions"])
            #expect(actions.allSatisfy { $0.status == 200 && $0.userId == user.id })
            // The action's events and its record share the command id, which ties them together.
            #expect(records.first?.metadata.commandId == byAdmin.first?.metadata.commandId)
        }
    }

    /// Support ends one session, a lost phone's, and leaves the user's others: the session's end says an admin ended
    /// it, the key's record names the session, and a session that is not the user's live one is 404 with nothing written.
    @Test func adminKeyEndsOneSessionOfAUser() async throws {
        try await SupportHarness.run { harness in
            let laptop = try await harness.signedIn(try await harness.apple("apple-lost-phone"))
            let phone = try await harness.signedIn(try await harness.apple("apple-lost-phone"))
            let stranger = try await harness.signedIn(try await harness.apple("apple-lost-phone-stranger"))
            let admin = try await harness.adminKey(.admin)
            let support = try await harness.adminKey(.support)
            let base = "/v1/admin/users/\(laptop.user.id)/sessions"
            func end(_ session: String, key: String, reason: String? = nil, idempotencyKey: String? = nil) async throws -> HTTPTestClient.Response {
                try await harness.adminDelete("\(base)/\(session)", key: key, reason: reason, idempotencyKey: idempotencyKey)
            }

            let events = try await harness.totalEvents()
            #expect(try await end(phone.session.id, key: support.secret).status == 403)
            for (session, status) in [(stranger.session.id, 404), (UUID().uuidString, 404), ("not-a-session", 400)] {
                let refused = try await end(session, key: admin.secret)
                #expect(refused.status == status, "\(session): \(refused.bodyText)")
            }
            let unknownUser = try await harness.client.delete(
                "/v1/admin/users/\(UUID().uuidString)/sessions/\(phone.session.id)", headers: ["Authorization": "Bearer \(admin.secret)"])
            #expect(unknownUser.status == 404)
            #expect(try await harness.eventCount("SessionEnded") == 0, "a refused end ends nothing")
            #expect(try await harness.totalEvents() == events + 5, "only the five refusals' records")

            let ended = try await end(phone.session.id, key: admin.secret, reason: "phone reported lost", idempotencyKey: "lost-1")
            #expect(ended.status == 200, "\(ended.bodyText)")
            #expect(try ended.json["user"]?["id"]?.string == laptop.user.id)
            let retried = try await end(phone.session.id, key: admin.secret, reason: "phone reported lost", idempotencyKey: "lost-1")
            #expect(retried.status == 200 && retried.headers.values(for: "Idempotent-Replayed") == ["true"])
            #expect(try await harness.me(phone.session.accessToken).status == 401)
            #expect(try await harness.refresh(phone.session.refreshToken).status == 401)
            #expect(try await harness.me(laptop.session.accessToken).status == 200, "the user's other session stays")
            #expect(try await harness.me(stranger.session.accessToken).status == 200)
            let again = try await end(phone.session.id, key: admin.secret)
            let code = try again.json["code"]?.string
            #expect(again.status == 404 && code == "not_found", "an ended session: \(again.bodyText)")

            let userId = try #require(UUID(uuidString: laptop.user.id))
            let endings = try await harness.events(inStream: .user(userId)).filter { $0.type == "SessionEnded" }
            #expect(endings.count == 1)
            #expect(endings.first?.metadata.actor == .admin(keyId: admin.key.id))
            let payload = try JSONDecoder().decode(AccountEvent.SessionEnded.self, from: try #require(endings.first).data)
            #expect(payload.reason == "ended_by_admin" && payload.sessionId.uuidString.lowercased() == phone.session.id)
            let actions = try await harness.actionRecords(of: admin.key.id)
            #expect(actions.map(\.status) == [404, 404, 400, 404, 200, 404])
            #expect(actions.allSatisfy { $0.action == "end-session" })
            #expect(actions[4].sessionId?.uuidString.lowercased() == phone.session.id && actions[4].reason == "phone reported lost")
            #expect(actions[2].sessionId == nil && actions[2].userId == userId, "the refused id is no session id")
            let summaries = try await harness.historySummaries(of: laptop.user.id, key: admin.secret)
            #expect(summaries.contains("asked to end-session \(phone.session.id.prefix(8)): phone reported lost"), "\(summaries)")
        }
    }

    /// Support removes one way in (a Facebook account the user lost), the last one too, which the user cannot; a
    /// provider the user has none of, or a name that is no provider, changes nothing.
    @Test func adminKeyUnlinksAProviderEvenTheLastOne() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("ada@example.com")
            try await harness.linkFacebook(user.accessToken, facebookUserID: "fb-ada-lost", email: "ada@example.com")
            let admin = try await harness.adminKey(.admin)
            let support = try await harness.adminKey(.support)
            let base = "/v1/admin/users/\(user.id.uuidString.lowercased())/identities"
            func unlink(_ provider: String, key: String, reason: String? = nil, idempotencyKey: String? = nil) async throws -> HTTPTestClient.Response {
                try await harness.adminDelete("\(base)/\(provider)", key: key, reason: reason, idempotencyKey: idempotencyKey)
            }
            func providers(_ response: HTTPTestClient.Response) throws -> [String] {
                try response.json["user"]?["identities"]?.elements.compactMap { $0["provider"]?.string } ?? []
            }

            #expect(try await unlink("facebook", key: support.secret).status == 403)
            let google = try await unlink("google", key: admin.secret)
            let code = try google.json["code"]?.string
            #expect(google.status == 404 && code == "no_such_provider", "\(google.bodyText)")
            for name in ["twitter", "Facebook", "facebook%00x"] {
                let refused = try await unlink(name, key: admin.secret)
                #expect(refused.status == 400, "\(name): \(refused.bodyText)")
            }
            // An anonymous user's id stays: unlinked, the user would stop being anonymous and never be swept.
            let anonymous = try await harness.client.post("/v1/sign-in", json: ["provider": JSONValue.string("anonymous")])
            let anonymousId = try #require(try anonymous.json["user"]?["id"]?.string, "\(anonymous.bodyText)")
            let kept = try await harness.adminDelete("/v1/admin/users/\(anonymousId)/identities/anonymous", key: admin.secret)
            #expect(kept.status == 400 && kept.bodyText.contains("anonymous"), "\(kept.bodyText)")
            #expect(try await harness.eventCount("IdentityUnlinked") == 0, "a refused unlink unlinks nothing")

            let facebook = try await unlink("facebook", key: admin.secret, reason: "lost the Facebook account, ticket 7", idempotencyKey: "fb-1")
            #expect(facebook.status == 200, "\(facebook.bodyText)")
            #expect(try providers(facebook) == ["password"])
            let retried = try await unlink("facebook", key: admin.secret, reason: "lost the Facebook account, ticket 7", idempotencyKey: "fb-1")
            #expect(retried.status == 200 && retried.headers.values(for: "Idempotent-Replayed") == ["true"])
            // The last way in, which the user may not remove themselves.
            let password = try await unlink("password", key: admin.secret)
            let left = try providers(password)
            #expect(password.status == 200 && left == [], "\(password.bodyText)")
            let signIn = try await harness.client.post(
                "/v1/sign-in", json: ["provider": JSONValue.string("password"),
                                      "credential": ["email": "ada@example.com", "password": "correct horse battery"]])
            #expect(signIn.status == 401, "\(signIn.bodyText)")

            let unlinked = try await harness.events(inStream: .user(user.id)).filter { $0.type == "IdentityUnlinked" }
            #expect(unlinked.count == 2 && unlinked.allSatisfy { $0.metadata.actor == .admin(keyId: admin.key.id) })
            #expect(unlinked.allSatisfy { String(decoding: $0.data, as: UTF8.self).contains(#""reason":"admin""#) })
            let actions = try await harness.actionRecords(of: admin.key.id)
            #expect(actions.map(\.status) == [404, 400, 400, 400, 400, 200, 200])
            #expect(actions.map(\.provider) == ["google", nil, nil, nil, "anonymous", "facebook", "password"])
            #expect(actions.allSatisfy { $0.action == "unlink" })
            let summaries = try await harness.historySummaries(of: user.id.uuidString.lowercased(), key: admin.secret)
            #expect(summaries.contains("asked to unlink facebook: lost the Facebook account, ticket 7"), "\(summaries)")
        }
    }

    @Test func aRetriedActionWithTheSameIdempotencyKeyGetsTheFirstAnswerAndRecordsNothing() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("ada@example.com")
            let admin = try await harness.adminKey(.admin)
            let path = "/v1/admin/users/\(user.id.uuidString.lowercased())/disable"
            let headers: KeyValuePairs<String, String> = ["Authorization": "Bearer \(admin.secret)", "Idempotency-Key": "disable-ada-1"]
            let first = try await harness.client.post(path, headers: headers, json: ["reason": "fraud"])
            let before = try await harness.owner.query("SELECT count(*)::int AS n FROM events")[0].decode("n", as: Int.self)
            let retry = try await harness.client.post(path, headers: headers, json: ["reason": "fraud"])
            #expect(first.status == 200 && retry.status == 200)
            #expect(retry.bodyText == first.bodyText)
            #expect(retry.headers.values(for: "Idempotent-Replayed") == ["true"])
            let after = try await harness.owner.query("SELECT count(*)::int AS n FROM events")[0].decode("n", as: Int.self)
            #expect(after == before, "neither the action nor its record is written twice")
            let other = try await harness.client.post(path, headers: headers, json: ["reason": "another reason"])
            #expect(other.status == 422)
        }
    }

    @Test func badActionRequestsAreRefusedAndChangeNothing() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("ada@example.com")
            let admin = try await harness.adminKey(.admin)
            let base = "/v1/admin/users/\(user.id.uuidString.lowercased())"

            let tooLong = try await harness.adminPost("\(base)/disable", key: admin.secret, json: ["reason": String(repeating: "x", count: 501)])
            #expect(tooLong.status == 400)
            #expect(try tooLong.json["code"]?.string == "invalid_request")
            let notJSON = try await harness.client.post("\(base)/disable", headers: ["Authorization": "Bearer \(admin.secret)"], body: Array("reason".utf8))
            #expect(notJSON.status == 400)
            let notAnID = try await harness.adminPost("/v1/admin/users/not-a-uuid/disable", key: admin.secret)
            #expect(notAnID.status == 400)
            let unknown = try await harness.adminPost("/v1/admin/users/\(UUID().uuidString)/disable", key: admin.secret)
            #expect(unknown.status == 404)
            #expect(try unknown.json["code"]?.string == "not_found")
            let queried = try await harness.adminPost("\(base)/disable?force=1", key: admin.secret)
            #expect(queried.status == 400)
            // An id with a NUL and more after it is no id (a C-string read took it for the id before it).
            let trailed = try await harness.adminPost("\(base)%00evil/disable", key: admin.secret)
            #expect(trailed.status == 400, "\(trailed.bodyText)")
            #expect(try await harness.adminGet("\(base)%00x", key: admin.secret).status == 400)
            #expect(try await harness.adminGet("/v1/admin/events?userId=\(user.id.uuidString.lowercased())%00zz", key: admin.secret).status == 400)

            #expect(try await harness.events(inStream: .user(user.id)).allSatisfy { $0.type != "UserDisabled" })
            let statuses = try await harness.actionRecords(of: admin.key.id).map(\.status)
            #expect(statuses == [400, 400, 400, 404, 400, 400])
        }
    }

    /// A NUL in an admin request's query or reason reached PostgreSQL, which cannot hold it in text or jsonb: the
    /// search or action answered 500, and its record (quoting the NUL) was lost. Each is now 400, changes nothing,
    /// and is recorded, as every request past the key check is.
    @Test func aNULInAnAdminRequestIs400AndRecorded() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("nul@example.com")
            let admin = try await harness.adminKey(.admin)
            let base = "/v1/admin/users/\(user.id.uuidString.lowercased())"
            let before = try await harness.events(inStream: .adminKey(admin.key.id)).count
            var answers: [HTTPTestClient.Response] = []
            for target in ["/v1/admin/users?provider=%00", "/v1/admin/users?provider=a%00b&uid=x", "/v1/admin/users?q=ada%00",
                           "/v1/admin/events?after=%00", "/v1/admin/events?type=user.%00", "\(base)/history?after=%00"] {
                answers.append(try await harness.adminGet(target, key: admin.secret))
            }
            for action in ["disable", "enable", "revoke-sessions"] {
                answers.append(try await harness.adminPost("\(base)/\(action)", key: admin.secret, json: ["reason": "a\u{0}b"]))
            }
            answers.append(try await harness.client.send(
                "DELETE", base, fields: [("Authorization", "Bearer \(admin.secret)"), ("Content-Type", "application/json")],
                body: Array(#"{"reason":"a\u0000b"}"#.utf8)))
            for answer in answers {
                let code = try answer.json["code"]?.string
                #expect(answer.status == 400 && code == "invalid_request", "\(answer.status) \(answer.bodyText)")
            }
            let webhook = try await harness.adminGet("/v1/admin/webhooks/%00", key: admin.secret)
            #expect((400..<500).contains(webhook.status), "\(webhook.status) \(webhook.bodyText)")
            #expect(try await harness.events(inStream: .adminKey(admin.key.id)).count == before + answers.count + 1, "every request is recorded")
            #expect(try await harness.events(inStream: .user(user.id)).allSatisfy { !["UserDisabled", "UserErased", "SessionsRevoked"].contains($0.type) })
        }
    }

    @Test func erasingAUserMakesEverythingPersonalInTheLogUnreadable() async throws {
        try await SupportHarness.run { harness in
            let ada = try await harness.signUp("ada.erase@example.com", displayName: "Ada Erasable")
            try await harness.linkFacebook(ada.accessToken, facebookUserID: "fb-erase-77", email: "ada.fb@example.com")
            let wrong = try await harness.client.post(
                "/v1/sign-in", json: ["provider": JSONValue.string("password"),
                                      "credential": ["email": "ada.erase@example.com", "password": "not her password"]])
            #expect(wrong.status == 401)
            let id = ada.id.uuidString.lowercased()
            let eventsBefore = try await harness.owner.query("SELECT count(*)::int AS n FROM events")[0].decode("n", as: Int.self)
            let support = try await harness.adminKey(.support)
            #expect(try await harness.client.delete("/v1/admin/users/\(id)", headers: ["Authorization": "Bearer \(support.secret)"]).status == 403)
            #expect(try await harness.adminGet("/v1/admin/events?userId=\(id)", key: support.secret).status == 200)
            #expect(try await harness.adminGet("/v1/admin/users/\(id)", key: support.secret).status == 200)

            let admin = try await harness.adminKey(.admin)
            let erased = try await harness.client.delete(
                "/v1/admin/users/\(id)", headers: ["Authorization": "Bearer \(admin.secret)"])
            #expect(erased.status == 200)
            let user = try erased.json["user"]
            #expect(user?["email"] == .null && user?["displayName"] == .null && user?["disabled"] == .bool(true))
            #expect(user?["identities"] == .array([]))

            // Nothing personal can be read anywhere in the database, and the log only grew.
            for secret in ["ada.erase@example.com", "Ada Erasable", "fb-erase-77", "ada.fb@example.com", "scrypt"] {
                let hits: Int = try await harness.owner.query("""
                    SELECT (SELECT count(*) FROM events WHERE data::text ILIKE \("%" + secret + "%") OR metadata::text ILIKE \("%" + secret + "%"))
                         + (SELECT count(*) FROM users WHERE row(users.*)::text ILIKE \("%" + secret + "%"))
                         + (SELECT count(*) FROM identities WHERE user_id = \(ada.id))
                         AS n
                    """)[0].decode("n")
                #expect(hits == 0, "\(secret) is still readable")
            }
            let eventsAfter = try await harness.owner.query("SELECT count(*)::int AS n FROM events")[0].decode("n", as: Int.self)
            #expect(eventsAfter > eventsBefore, "erasure appends; it removes no event")
            #expect(try await harness.owner.query(
                "SELECT 1 FROM personal_data_keys WHERE user_id = \(ada.id) AND key IS NULL AND destroyed_at IS NOT NULL").count == 1)

            // Her history still tells what happened, with (erased) where personal data stood.
            let history = try await UserHistory(database: harness.owner).all(of: ada.id)
            let summaries = history.entries.map(\.summary.text)
            #expect(summaries.first == "registered: email (erased) (unverified), name (erased)")
            #expect(summaries.contains("linked facebook (erased): email (erased) (unverified)"))
            #expect(summaries.contains { $0.hasPrefix("user erased") })
            #expect(history.entries.first?.summary.isPersonalDataErased == true)
            #expect(history.entries.first { $0.type == "UserRegistered" }?.clientIP == nil, "client addresses were sealed too")
            // Who read about her is evidence that outlives her: every admin record keeps its reader's address.
            let reads = history.entries.filter { AdminEvent.types.contains($0.type) }
            #expect(Set(reads.map(\.type)).isSuperset(of: ["AdminEventsRead", "AdminUserViewed", "AdminActionRequested"]))
            #expect(reads.allSatisfy { $0.clientIP == "127.0.0.1" }, "\(reads.map { ($0.type, $0.clientIP) })")

            // She cannot sign in; her password and Facebook identity are free for someone new.
            #expect(try await harness.client.get("/v1/users/me", headers: ["Authorization": "Bearer \(ada.accessToken)"]).status == 401)
            let again = try await harness.client.post(
                "/v1/sign-up", json: ["email": "ada.erase@example.com", "password": "a new long password"])
            #expect(again.status == 201)
            #expect(try await harness.client.delete("/v1/admin/users/\(id)", headers: ["Authorization": "Bearer \(admin.secret)"]).status == 404)

            // The read models still follow from the log.
            let replay = ProjectionReplay(projection: .accounts, database: harness.owner)
            #expect(try await replay.run(.verify).drift.isEmpty)
        }
    }

    @Test func searchFindsUsersByEmailProviderUidIdAndFreeTextWithoutRecordingWhoWasFound() async throws {
        try await SupportHarness.run { harness in
            let ada = try await harness.signUp("Ada.Lovelace@Example.com", displayName: "Ada Lovelace")
            let grace = try await harness.signUp("grace@example.org", displayName: "Grace Hopper")
            try await harness.linkFacebook(grace.accessToken, facebookUserID: "10042", email: "amazing.grace@example.net")
            let alan = try await harness.signUp("alan@example.org", displayName: "Alan 100% Turing")
            let support = try await harness.adminKey(.support)

            func ids(_ query: String) async throws -> [String] {
                let response = try await harness.adminGet("/v1/admin/users?\(query)", key: support.secret)
                #expect(response.status == 200, "\(query): \(response.bodyText)")
                return try response.json["users"]?.elements.compactMap { $0["id"]?.string } ?? []
            }
            func lower(_ id: UUID) -> String { id.uuidString.lowercased() }

            #expect(try await ids("email=ada.lovelace%40example.com") == [lower(ada.id)])
            #expect(try await ids("email=AMAZING.GRACE@example.net") == [lower(grace.id)], "a linked identity's email finds its user")
            #expect(try await ids("provider=facebook&uid=10042") == [lower(grace.id)])
            #expect(try await ids("provider=facebook&uid=10043") == [])
            #expect(try await ids("provider=password") == [ada, grace, alan].map { lower($0.id) })
            #expect(try await ids("uid=grace%40example.org") == [lower(grace.id)], "a password identity's uid is its email")
            #expect(try await ids("uid=GRACE%40example.org") == [lower(grace.id)], "in any case")
            // Other providers' ids are exact: two Apple ids that differ in case are two people.
            let upper = try await harness.signedIn(try await harness.apple("001.CaseID"))
            _ = try await harness.signedIn(try await harness.apple("001.caseid"))
            #expect(try await ids("provider=apple&uid=001.CaseID") == [upper.user.id.lowercased()])
            #expect(try await ids("provider=APPLE&uid=001.CaseID") == [upper.user.id.lowercased()], "a provider's name in any case")
            #expect(try await ids("q=\(ada.id.uuidString)") == [lower(ada.id)])
            // Free text finds whole words (the read models keep values sealed, and sealed text keeps equality only).
            #expect(try await ids("q=hopper") == [lower(grace.id)], "a word of the name, without case")
            #expect(try await ids("q=Grace%20Hopper") == [lower(grace.id)], "the whole name")
            #expect(try await ids("q=example.org") == [lower(grace.id), lower(alan.id)], "an email's domain")
            #expect(try await ids("q=ada.lovelace") == [lower(ada.id)], "an email's part before the @")
            #expect(try await ids("q=amazing.grace%40example.net") == [lower(grace.id)], "a linked identity's email")
            #expect(try await ids("q=10042") == [lower(grace.id)], "a linked identity's uid")
            #expect(try await ids("q=100%25") == [lower(alan.id)], "% is a character like another")
            #expect(try await ids("q=hopp") == [], "not part of a word")
            #expect(try await ids("q=example") == [], "nor part of a domain")
            #expect(try await ids("q=0_") == [])
            #expect(try await ids("email=grace%40example.org&provider=facebook") == [lower(grace.id)])
            #expect(try await ids("email=ada.lovelace%40example.com&provider=facebook") == [])

            let first = try await harness.adminGet("/v1/admin/users?provider=password&limit=2", key: support.secret)
            #expect(try first.json["users"]?.elements.count == 2)
            let cursor = try #require(try first.json["nextAfter"]?.string)
            let second = try await harness.adminGet("/v1/admin/users?provider=password&limit=2&after=\(cursor)", key: support.secret)
            #expect(try second.json["users"]?.elements.compactMap { $0["id"]?.string } == [lower(alan.id)])
            #expect(try second.json["nextAfter"] == .null)

            let summary = try #require(try await harness.adminGet("/v1/admin/users?provider=facebook", key: support.secret).json["users"]?.elements.first)
            #expect(summary["providers"] == ["facebook", "password"])
            #expect(summary["email"]?.string == "grace@example.org")
            #expect(summary["disabled"] == .bool(false))
            #expect(summary["lastSignInAt"]?.string != nil)

            // A search form's empty free-text fields count as absent; a typed parameter given empty is refused.
            #expect(try await ids("email=&provider=&uid=%20&q=ada.lovelace%40example.com") == [lower(ada.id)])
            for bad in ["", "q=a", "emial=ada%40example.com", "limit=0", "limit=501", "limit=ten&q=ada", "after=nobody&q=ada",
                        "after=\(UUID().uuidString)&q=ada", "q=ada&q=grace", "after=&q=ada", "limit=&q=ada", "q=&email=ada%40example.com",
                        "email="] {
                let refused = try await harness.adminGet("/v1/admin/users?\(bad)", key: support.secret)
                #expect(refused.status == 400, "\(bad)")
                #expect(try refused.json["code"]?.string == "invalid_request", "\(bad)")
            }

            let searches = try await harness.events(inStream: .adminKey(support.key.id)).dropFirst()
            let firstSearch = try #require(searches.first)
            #expect(firstSearch.type == "AdminUsersSearched")
            #expect(firstSearch.userId == nil, "a search is about no one user")
            let recorded = try JSONDecoder().decode(AdminEvent.UsersSearched.self, from: firstSearch.data)
            #expect(recorded.personal == AdminEvent.SearchTerms(email: "ada.lovelace@example.com"))
            #expect(recorded.resultCount == 1)
            #expect(recorded.status == 200)
            #expect(!String(decoding: firstSearch.data, as: UTF8.self).contains(lower(ada.id)), "the people found are not recorded")
            #expect(searches.count == 39, "every search above is recorded, refused ones too")
        }
    }

    @Test func detailShowsIdentitiesSessionsAndConfirmedFactors() async throws {
        try await SupportHarness.run { harness in
            let grace = try await harness.signUp("grace@example.org", displayName: "Grace Hopper")
            try await harness.linkFacebook(grace.accessToken, facebookUserID: "10042", email: "amazing.grace@example.net")
            let signOut = try await harness.client.post("/v1/sign-out", headers: ["Authorization": "Bearer \(grace.accessToken)"], body: [])
            #expect(signOut.status == 204)
            _ = try await harness.signUp("other@example.org")
            let confirmed = UUID()
            let seal = try await harness.owner.readModelSeal()
            try await harness.owner.query("""
                INSERT INTO mfa_factors (id, user_id, type, display_name, phone_hint, enrolled_at, confirmed_at)
                VALUES (\(confirmed), \(grace.id), 'phone', \(try seal.seal("Work phone")), \(try seal.seal("+*******0100")), now(), now()),
                       (\(UUID()), \(grace.id), 'totp', \(try seal.seal("Not confirmed")), NULL, now(), NULL)
                """)
            let support = try await harness.adminKey(.support)

            let response = try await harness.adminGet("/v1/admin/users/\(grace.id.uuidString.lowercased())", key: support.secret)
            #expect(response.status == 200)
            let detail = try response.json
            #expect(detail["user"]?["email"]?.string == "grace@example.org")
            #expect(detail["user"]?["identities"]?.elements.compactMap { $0["provider"]?.string } == ["password", "facebook"])
            let sessions = detail["sessions"]?.elements ?? []
            #expect(sessions.count == 1)
            #expect(sessions.first?["active"] == .bool(false))
            #expect(sessions.first?["endReason"]?.string == "sign_out")
            #expect(sessions.first?["amr"] == ["pwd"])
            #expect(detail["activeSessionCount"]?.int == 0)
            let factors = detail["factors"]?.elements ?? []
            #expect(factors.count == 1, "only confirmed factors are listed")
            #expect(factors.first?["id"]?.string == confirmed.uuidString.lowercased())
            #expect(factors.first?["phoneHint"]?.string == "+*******0100")
            #expect(detail["validSince"] == .null)
            #expect(detail["erasedAt"] == .null)

            let nobody = UUID()
            let unknown = try await harness.adminGet("/v1/admin/users/\(nobody.uuidString)", key: support.secret)
            #expect(unknown.status == 404)
            let badID = try await harness.adminGet("/v1/admin/users/12345", key: support.secret)
            #expect(badID.status == 400)

            let views = try await harness.events(inStream: .adminKey(support.key.id)).dropFirst()
            #expect(views.map(\.type) == ["AdminUserViewed", "AdminUserViewed", "AdminUserViewed"])
            #expect(views.map(\.userId) == [grace.id, nil, nil])
            let statuses = try views.map { try JSONDecoder().decode(AdminEvent.UserViewed.self, from: $0.data).status }
            #expect(statuses == [200, 404, 400])
            // A request about an id no user has is recorded about no one: it made a personal key for any id asked about.
            #expect(try await harness.adminGet("/v1/admin/users/\(nobody.uuidString)/history", key: support.secret).status == 404)
            let keys: Int = try await harness.owner.query(
                "SELECT count(*)::int AS n FROM personal_data_keys WHERE user_id = \(nobody)")[0].decode("n")
            #expect(keys == 0)
        }
    }

    @Test func concurrentRequestsWithOneKeyAreEachRecordedOnce() async throws {
        try await SupportHarness.run { harness in
            let user = try await harness.signUp("ada@example.com")
            let support = try await harness.adminKey(.support)
            let port = harness.service.server.boundPort
            let target = "/v1/admin/users/\(user.id.uuidString.lowercased())"
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        let client = HTTPTestClient(port: port)
                        let status = try await client.get(target, headers: ["Authorization": "Bearer \(support.secret)"]).status
                        await client.close()
                        return status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 12))
            let stream = try await harness.events(inStream: .adminKey(support.key.id))
            #expect(stream.map(\.version) == Array(1...13))
            #expect(stream.dropFirst().allSatisfy { $0.type == "AdminUserViewed" && $0.userId == user.id })
        }
    }
}
