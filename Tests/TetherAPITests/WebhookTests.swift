import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders
import TetherTesting

/// Webhook subscriptions against a real receiver: signed, in order, durable, shared between instances.
@Suite("Webhooks: the event feed pushed to a receiver")
struct WebhookTests {
    private static let allowLoopback = ["TETHER_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1", "TETHER_SIGN_IN_FAILURE_LIMIT": "1000"]

    private func adminKey(_ database: PostgresClient) async throws -> String {
        try await AdminKeyStore(database: database).create(
            role: .admin, name: "webhooks", metadata: EventMetadata(actor: .operator("tester"), surface: "cli")).secret
    }

    /// Creates a subscription through the admin API; answers its id and secret.
    private func subscribe(
        _ client: HTTPTestClient, key: String, url: URL, events: [String] = ["*"], from: String = "now"
    ) async throws -> (id: String, secret: String) {
        let created = try await client.post(
            "/v1/admin/webhooks", headers: ["Authorization": "Bearer \(key)"],
            json: ["url": JSONValue.string(url.absoluteString), "events": .array(events.map(JSONValue.string)), "from": .string(from)])
        guard created.status == 201, case .object(let body) = try created.decodeJSON(JSONValue.self),
              case .string(let secret)? = body["secret"], case .object(let webhook)? = body["webhook"], case .string(let id)? = webhook["id"] else {
            throw HarnessError("creating a webhook answered \(created.status): \(created.bodyText)")
        }
        return (id, secret)
    }

    /// Checks a delivery as a receiver would: the Standard Webhooks signature over the exact bytes, by one of `secrets`.
    private func isSigned(_ received: WebhookReceiver.Received, by secrets: [String]) -> Bool {
        guard let id = received.headers["webhook-id"], let timestamp = received.headers["webhook-timestamp"],
              let signatures = received.headers["webhook-signature"], abs((Int(timestamp) ?? 0) - Int(Date().timeIntervalSince1970)) < 300
        else { return false }
        let signed = Array("\(id).\(timestamp).".utf8) + received.body
        let expected = secrets.map { secret in
            "v1," + Data(HMAC.authenticationCode(for: signed, key: Array(Data(base64Encoded: String(secret.dropFirst(6)))!), digest: .sha256))
                .base64EncodedString()
        }
        return signatures.split(separator: " ").contains { expected.contains(String($0)) }
    }

    private struct Delivered: Decodable {
        var id: String
        var type: String
        var userId: String
        var data: [String: JSONValue]
    }

    private func delivered(_ receiver: WebhookReceiver) throws -> [Delivered] {
        try receiver.received.map { try JSONDecoder().decode(Delivered.self, from: Data($0.body)) }
    }

    /// Waits until `condition` holds, failing after `timeout`.
    private func eventually(_ what: String, timeout: Duration = .seconds(15), _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw HarnessError("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    private func signUp(_ client: HTTPTestClient, _ email: String) async throws -> SignedIn {
        try await client.post("/v1/sign-up", json: ["email": email, "password": "a long password"]).decodeJSON(SignedIn.self)
    }

    /// A receiver's redirect is not followed, and is counted as a redirect: it was counted as a 4xx, a refusal.
    @Test func aRedirectIsAFailedAttemptCountedAsOne() async throws {
        let receiver = try WebhookReceiver()
        receiver.answer = 302
        try await DevService.run(settings: Self.allowLoopback) { service in
            let key = try await adminKey(service.admin)
            _ = try await subscribe(service.client, key: key, url: receiver.url, events: ["user.created"])
            _ = try await signUp(service.client, "redirected@example.com")
            try await eventually("the redirected attempt") { !receiver.received.isEmpty }
            var metrics = try await service.client.get("/metrics")
            let deadline = ContinuousClock.now + .seconds(10)
            while !metrics.bodyText.contains("tether_webhook_deliveries_total{result=\"3xx\"}"), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                metrics = try await service.client.get("/metrics")
            }
            #expect(metrics.bodyText.contains("tether_webhook_deliveries_total{result=\"3xx\"}"), "\(metrics.bodyText.split(separator: "\n").filter { $0.contains("deliveries_total") })")
            #expect(!metrics.bodyText.contains("tether_webhook_deliveries_total{result=\"4xx\"}"))
        }
        await receiver.stop()
    }

    @Test func eventsArriveSignedInLogOrderAndTheReceiverGoingDownLosesNothing() async throws {
        let receiver = try WebhookReceiver()
        try await DevService.run(settings: Self.allowLoopback) { service in
            let key = try await adminKey(service.admin)
            let (id, secret) = try await subscribe(service.client, key: key, url: receiver.url, events: ["user.*", "identity.linked"])
            #expect(secret.hasPrefix("whsec_"))
            let listed = try await service.client.get("/v1/admin/webhooks", headers: ["Authorization": "Bearer \(key)"])
            #expect(!listed.bodyText.contains(secret), "the secret is shown once")

            let ada = try await signUp(service.client, "ada@example.com")
            try await eventually("ada's two events") { receiver.received.count == 2 }
            #expect(try delivered(receiver).map(\.type) == ["user.created", "identity.linked"])
            #expect(try delivered(receiver).first?.data["email"] == .string("ada@example.com"))
            #expect(receiver.received.allSatisfy { isSigned($0, by: [secret]) })
            #expect(!receiver.received.contains { isSigned($0, by: [WebhookSignature.newSecret()]) }, "another secret does not verify")

            receiver.isUp = false
            for index in 0..<3 { _ = try await signUp(service.client, "down\(index)@example.com") }
            _ = try await service.client.post("/v1/sign-out", headers: ["Authorization": "Bearer \(ada.session.accessToken)"], body: [])
            // The attempts while down are recorded, and retried (the retry comes after a backoff: waited for, not slept).
            let downUntil = ContinuousClock.now + .seconds(15)
            var failures = 0
            while failures < 2, ContinuousClock.now < downUntil {
                try await Task.sleep(for: .milliseconds(50))
                failures = try await service.admin.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 503")[0].decode("n")
            }
            #expect(failures >= 2, "the attempts while down are recorded, and retried")
            receiver.isUp = true
            try await eventually("the events of the outage") { receiver.received.count == 8 }
            let all = try delivered(receiver)
            #expect(Set(all.map(\.id)).count == all.count, "each once")
            #expect(receiver.received.allSatisfy { isSigned($0, by: [secret]) }, "every delivery is signed")
            #expect(all.map(\.type) == ["user.created", "identity.linked"] + Array(repeating: ["user.created", "identity.linked"], count: 3).flatMap { $0 })
            let deliveries = try await service.client.get("/v1/admin/webhooks/\(id)/deliveries", headers: ["Authorization": "Bearer \(key)"])
            #expect(deliveries.bodyText.contains(#""status":503"#))
            #expect(deliveries.bodyText.contains(#""status":204"#))
            // The cursor passes the public events after the last delivered one (ones this subscription does
            // not want) on the deliverer's next look below the log's horizon, which may come after the last
            // delivery: a transaction still open at its look holds the horizon back. So the lag is read until
            // it is 0, for as long as a few polls take; a cursor that never moves on still fails here.
            let caughtUp = "tether_webhook_lag_events{subscription=\"\(id)\",status=\"active\"} 0"
            var metrics = try await service.client.get("/metrics")
            let deadline = ContinuousClock.now + .seconds(15)
            while !metrics.bodyText.contains(caughtUp), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                metrics = try await service.client.get("/metrics")
            }
            #expect(metrics.bodyText.contains(caughtUp))
            #expect(metrics.bodyText.contains("tether_webhook_deliveries_total{result=\"5xx\"}"))
        }
        await receiver.stop()
    }

    @Test func aGoneReceiverDisablesTheSubscriptionAndPrivateTargetsAreRefused() async throws {
        let receiver = try WebhookReceiver()
        try await DevService.run(settings: Self.allowLoopback) { service in
            let key = try await adminKey(service.admin)
            let (id, _) = try await subscribe(service.client, key: key, url: receiver.url)
            receiver.answer = 410
            _ = try await signUp(service.client, "gone@example.com")
            try await eventually("the subscription disabled") {
                false == receiver.received.isEmpty
            }
            try await Task.sleep(for: .milliseconds(200))
            let status: String = try await service.admin.query("SELECT status FROM webhook_subscriptions WHERE id = \(id)::uuid")[0].decode("status")
            #expect(status == "disabled")
            #expect(receiver.received.count == 1, "nothing more after a 410")

            for target in ["http://10.1.2.3/hook", "http://192.168.0.10/", "http://169.254.169.254/latest/meta-data", "ftp://example.com/",
                           "http://[fd00::1]/", "http://127.0.0.1:99999/x", "http://127.0.0.1:0/x",
                           // Loopback, allowed under tether dev, in forms no delivery could reach (libcurl rewrites the host).
                           "http://127.1/", "http://2130706433/", "http://0x7f000001/", "http://017700000001/", "http://127.0.0.01/"] {
                let refused = try await service.client.post(
                    "/v1/admin/webhooks", headers: ["Authorization": "Bearer \(key)"], json: ["url": target])
                #expect(refused.status == 400, "\(target): \(refused.bodyText)")
            }
            // An empty list of events is no choice: refused, not read as every event.
            let noEvents = try await service.client.post(
                "/v1/admin/webhooks", headers: ["Authorization": "Bearer \(key)"], json: JSONValue.object(["url": .string(receiver.url.absoluteString), "events": []]))
            #expect(noEvents.status == 400 && noEvents.bodyText.contains("names no event type"), "\(noEvents.bodyText)")
            // A prefix is a whole group or everything, and a target URL has a bound.
            for (url, events) in [(receiver.url.absoluteString, ["user*"]), (receiver.url.absoluteString + "?" + String(repeating: "q", count: 2100), ["*"])] {
                let refused = try await service.client.post(
                    "/v1/admin/webhooks", headers: ["Authorization": "Bearer \(key)"],
                    json: JSONValue.object(["url": .string(url), "events": .array(events.map(JSONValue.string))]))
                #expect(refused.status == 400, "\(events) \(url.count): \(refused.bodyText)")
            }
            #expect(try await service.client.get("/v1/admin/events?type=user*", headers: ["Authorization": "Bearer \(key)"]).status == 400)
            let subscriptions: Int = try await service.admin.query("SELECT count(*)::int AS n FROM webhook_subscriptions")[0].decode("n")
            #expect(subscriptions == 1)
            // A type named twice is kept once.
            let twice = try await subscribe(service.client, key: key, url: receiver.url, events: ["user.created", "user.*", "user.created"])
            let kept: String = try await service.admin.query(
                "SELECT array_to_string(event_types, ',') AS types FROM webhook_subscriptions WHERE id = \(twice.id)::uuid")[0].decode("types")
            #expect(kept == "user.created,user.*")
            _ = try await service.client.send("DELETE", "/v1/admin/webhooks/\(twice.id)", fields: [("Authorization", "Bearer \(key)")], body: [])
            let supportKey = try await AdminKeyStore(database: service.admin).create(
                role: .support, name: "support", metadata: EventMetadata(actor: .operator("tester"), surface: "cli")).secret
            #expect(try await service.client.get("/v1/admin/webhooks", headers: ["Authorization": "Bearer \(supportKey)"]).status == 403)
            // Unknown query parameters are refused here too, naming what the route takes.
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(key)"]
            let listed = try await service.client.get("/v1/admin/webhooks?x=1", headers: auth)
            #expect(listed.status == 400 && listed.bodyText.contains("takes no query parameters"), "\(listed.bodyText)")
            #expect(try await service.client.get("/v1/admin/webhooks/\(id)?verbose=1", headers: auth).status == 400)
            let deliveries = try await service.client.get("/v1/admin/webhooks/\(id)/deliveries?x=1", headers: auth)
            #expect(deliveries.status == 400 && deliveries.bodyText.contains("accepts limit"), "\(deliveries.bodyText)")
            #expect(try await service.client.get("/v1/admin/webhooks/\(id)/deliveries?limit=5", headers: auth).status == 200)
        }
        await receiver.stop()
    }

    @Test func productionTargetsMustBeHTTPSAndPublic() async throws {
        let strict = WebhookTargetPolicy(allowsHTTP: false, allowedHosts: [])
        await #expect(throws: WebhookTargetPolicy.Refusal.self) { try await strict.check("http://example.com/hook") }
        await #expect(throws: WebhookTargetPolicy.Refusal.self) { try await strict.check("https://127.0.0.1/hook") }
        await #expect(throws: WebhookTargetPolicy.Refusal.self) { try await strict.check("https://localhost/hook") }
        for embedded in ["https://[::ffff:10.0.0.1]/hook", "https://[::127.0.0.1]/hook", "https://[64:ff9b::a00:1]/hook",
                         "https://[2002:c0a8:101::1]/hook", "https://[fec0::1]/hook", "https://198.18.0.1/hook", "https://192.0.0.8/hook",
                         "https://[64:ff9b:1::a00:1]/hook", "https://[64:ff9b:1:a00:1::]/hook", "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
                         "https://[2001:db8::1]/hook", "https://[100::1]/hook", "https://[3fff::1]/hook", "https://[2001:2::1]/hook",
                         "https://192.0.2.1/hook", "https://198.51.100.7/hook", "https://203.0.113.9/hook",
                         "https://[::ffff:0:10.0.0.1]/hook", "https://[::ffff:0:a9fe:a9fe]/hook"] {
            await #expect(throws: WebhookTargetPolicy.Refusal.self, "\(embedded)") { try await strict.check(embedded) }
        }
        await #expect(throws: WebhookTargetPolicy.Refusal.self) { try await strict.check("https://user:pw@93.184.215.14/hook") }
        #expect(try await strict.check("https://[::ffff:0:5db8:d70e]/hook").addresses.isEmpty, "a translated public address passes")
        let literal = try await strict.check("https://93.184.215.14/hook")
        #expect(literal.url.host == "93.184.215.14" && literal.addresses.isEmpty, "a public literal passes without DNS, and needs no pin")
        #expect(try await strict.check("https://[3ff0::1]/hook").addresses.isEmpty, "3ff0::/12 beyond the documentation /20 is public")
        let literal6 = try await strict.check("https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/hook")
        #expect(literal6.addresses.isEmpty, "an IPv6 literal is not pinned (libcurl cannot read such a pin)")
        let allowed = WebhookTargetPolicy(allowsHTTP: false, allowedHosts: ["hooks.internal"])
        let listed = try await allowed.check("https://hooks.internal/x")
        #expect(listed.url.host == "hooks.internal" && listed.addresses.isEmpty, "a listed host is trusted wherever it resolves")
        let loopback = WebhookTargetPolicy(allowsHTTP: true, allowedHosts: [], allowsLoopback: true)
        #expect(try await loopback.check("http://localhost:8080/x").addresses.contains("127.0.0.1"), "a name's addresses, as checked")
    }

    /// A delivery connects to the addresses its target's check found, not to wherever the name resolves when the
    /// transfer starts (DNS rebinding: public for the check, internal for the request).
    @Test func aDeliveryConnectsOnlyToTheAddressesChecked() async throws {
        let receiver = try WebhookReceiver()
        let port = try #require(receiver.url.port)
        let client = CurlProviderHTTPClient()
        // A name that resolves nowhere reaches the receiver through the address given for it.
        let pinned = try await client.post(
            url: URL(string: "http://rebound.invalid:\(port)/hook")!, headers: [:], body: Array("{}".utf8), timeout: 5, maxBytes: 1024,
            connectingTo: ["127.0.0.1"])
        #expect(pinned.status == 204)
        #expect(receiver.received.count == 1)
        // A name that resolves to the receiver is not followed there when the addresses given say otherwise.
        await #expect(throws: HTTPClientError.self) {
            _ = try await client.post(
                url: URL(string: "http://localhost:\(port)/hook")!, headers: [:], body: Array("{}".utf8), timeout: 5, maxBytes: 1024,
                connectingTo: ["127.0.0.2"])
        }
        #expect(receiver.received.count == 1)
        await receiver.stop()
    }

    /// A retried change (a lost answer, the same Idempotency-Key) gets the first answer: one subscription, one
    /// rotation, and the secret the first answer showed. The same key with another body is refused.
    @Test func aRetriedSubscriptionOrRotationWithItsKeyIsMadeOnce() async throws {
        let receiver = try WebhookReceiver()
        try await DevService.run(settings: Self.allowLoopback) { service in
            let key = try await adminKey(service.admin)
            let body: JSONValue = ["url": .string(receiver.url.absoluteString), "events": ["user.created"]]
            let headers: KeyValuePairs<String, String> = ["Authorization": "Bearer \(key)", "Idempotency-Key": "create-1"]
            let first = try await service.client.post("/v1/admin/webhooks", headers: headers, json: body)
            let retry = try await service.client.post("/v1/admin/webhooks", headers: headers, json: body)
            #expect(first.status == 201)
            #expect(retry.bodyText == first.bodyText)
            #expect(retry.headers.values(for: "Idempotent-Replayed") == ["true"])
            let other = try await service.client.post(
                "/v1/admin/webhooks", headers: headers, json: ["url": .string(receiver.url.absoluteString + "other")] as JSONValue)
            #expect(other.status == 422)
            // A misspelt member passed for an absent one, whose default asks for more: every event, with personal data.
            for misspelt in [
                ["url": .string(receiver.url.absoluteString), "evnts": ["user.created"]],
                ["url": .string(receiver.url.absoluteString), "events": ["user.created"], "personl": false],
            ] as [JSONValue] {
                let refused = try await service.client.post("/v1/admin/webhooks", headers: ["Authorization": "Bearer \(key)"], json: misspelt)
                #expect(refused.status == 400 && refused.bodyText.contains("unknown member"), "\(refused.bodyText)")
            }
            let count: Int = try await service.admin.query("SELECT count(*)::int AS n FROM webhook_subscriptions")[0].decode("n")
            #expect(count == 1)

            guard case .object(let made) = try first.decodeJSON(JSONValue.self), case .object(let webhook)? = made["webhook"],
                  case .string(let id)? = webhook["id"] else { throw HarnessError("no webhook in \(first.bodyText)") }
            let rotation: KeyValuePairs<String, String> = ["Authorization": "Bearer \(key)", "Idempotency-Key": "rotate-1"]
            let rotated = try await service.client.post("/v1/admin/webhooks/\(id)/rotate-secret", headers: rotation, body: [])
            let rotatedAgain = try await service.client.post("/v1/admin/webhooks/\(id)/rotate-secret", headers: rotation, body: [])
            #expect(rotated.status == 200)
            #expect(rotatedAgain.bodyText == rotated.bodyText, "the retry shows the secret the rotation made, not a third one")
            let replayTypo = try await service.client.post(
                "/v1/admin/webhooks/\(id)/replay", headers: ["Authorization": "Bearer \(key)"], json: ["from": "start", "x": 1] as JSONValue)
            #expect(replayTypo.status == 400, "\(replayTypo.bodyText)")
            // A route that takes no body refuses one (malformed, or meant for another route) and changes nothing; `{}` passes.
            for (route, body) in [("disable", "garbage{"), ("rotate-secret", #"{"from":"start"}"#), ("disable", #"{"reason":"x"}"#)] {
                let refused = try await service.client.post(
                    "/v1/admin/webhooks/\(id)/\(route)", headers: ["Authorization": "Bearer \(key)"], body: Array(body.utf8))
                #expect(refused.status == 400, "\(route) \(body): \(refused.status) \(refused.bodyText)")
            }
            let deleteRefused = try await service.client.send(
                "DELETE", "/v1/admin/webhooks/\(id)", fields: [("Authorization", "Bearer \(key)")], body: Array("garbage{".utf8))
            #expect(deleteRefused.status == 400, "\(deleteRefused.bodyText)")
            let unchanged = try await service.client.get("/v1/admin/webhooks/\(id)", headers: ["Authorization": "Bearer \(key)"])
            #expect(unchanged.status == 200 && unchanged.bodyText.contains(#""status":"active""#), "\(unchanged.bodyText)")
            #expect(try await service.client.post("/v1/admin/webhooks/\(id)/enable", headers: ["Authorization": "Bearer \(key)"], body: Array("{}".utf8)).status == 200)
            guard case .object(let answer) = try rotated.decodeJSON(JSONValue.self), case .string(let new)? = answer["secret"],
                  case .object(let original) = try first.decodeJSON(JSONValue.self), case .string(let old)? = original["secret"]
            else { throw HarnessError("no secrets in \(rotated.bodyText)") }
            _ = try await signUp(service.client, "idem@example.com")
            try await eventually("the event") { receiver.received.count == 1 }
            let received = try #require(receiver.received.first)
            #expect(received.headers["webhook-signature"]?.split(separator: " ").count == 2, "two secrets sign: the first and one rotation")
            #expect(isSigned(received, by: [old]) && isSigned(received, by: [new]))
        }
        await receiver.stop()
    }

    @Test func aRotatedSecretAndTheOldOneBothSignDuringTheOverlapAndErasedUsersCarryNoPersonalData() async throws {
        let receiver = try WebhookReceiver()
        try await DevService.run(settings: Self.allowLoopback) { service in
            let key = try await adminKey(service.admin)
            let (id, old) = try await subscribe(service.client, key: key, url: receiver.url, events: ["user.created"])
            let rotated = try await service.client.post(
                "/v1/admin/webhooks/\(id)/rotate-secret", headers: ["Authorization": "Bearer \(key)"], body: [])
            guard case .object(let body) = try rotated.decodeJSON(JSONValue.self), case .string(let new)? = body["secret"] else {
                throw HarnessError("rotate-secret answered \(rotated.bodyText)")
            }
            let bob = try await signUp(service.client, "bob@example.com")
            try await eventually("bob's event") { receiver.received.count == 1 }
            let received = try #require(receiver.received.first)
            #expect(isSigned(received, by: [old]))
            #expect(isSigned(received, by: [new]))
            #expect(received.headers["webhook-signature"]?.split(separator: " ").count == 2)

            let erased = try await service.client.send(
                "DELETE", "/v1/admin/users/\(bob.user.id)", fields: [("Authorization", "Bearer \(key)"), ("Content-Type", "application/json")],
                body: Array(#"{"reason": "forget me"}"#.utf8))
            #expect(erased.status == 200)
            let beyond = try await service.client.post(
                "/v1/admin/webhooks/\(id)/replay", headers: ["Authorization": "Bearer \(key)"], json: ["from": "999999999-1"])
            #expect(beyond.status == 400 && beyond.bodyText.contains("past the newest event"), "\(beyond.bodyText)")
            let made = try await service.client.post(
                "/v1/admin/webhooks", headers: ["Authorization": "Bearer \(key)"],
                json: ["url": .string(receiver.url.absoluteString), "from": "999999999-1"] as JSONValue)
            #expect(made.status == 400, "\(made.bodyText)")
            let replayed = try await service.client.post(
                "/v1/admin/webhooks/\(id)/replay", headers: ["Authorization": "Bearer \(key)"], json: ["from": "start"])
            #expect(replayed.status == 200)
            try await eventually("the replay") { receiver.received.count == 2 }
            let again = try delivered(receiver)
            #expect(again[0].id == again[1].id, "a replayed event keeps its id")
            #expect(again[0].data["email"] == .string("bob@example.com"))
            #expect(again[1].data["email"] == nil, "after the erasure the replayed event carries nothing personal")
        }
        await receiver.stop()
    }

    @Test func twoInstancesDeliverEachEventOnceAndARestartRepeatsAtMostTheEventInFlight() async throws {
        let receiver = try WebhookReceiver()
        let database = try await TestDatabase.make()
        let owner = database.client(asServiceRole: false, maxConnections: 2)
        let first = try await RunningService.start(databaseURL: database.url, values: Self.allowLoopback, devIdP: true)
        let second = try await RunningService.start(databaseURL: database.url, values: Self.allowLoopback, devIdP: true)
        do {
            let key = try await adminKey(owner)
            _ = try await subscribe(first.client, key: key, url: receiver.url, events: ["user.created"])
            for index in 0..<12 {
                _ = try await signUp(index % 2 == 0 ? first.client : second.client, "user\(index)@example.com")
            }
            try await eventually("twelve sign-ups") { receiver.received.count >= 12 }
            try await Task.sleep(for: .milliseconds(300))
            let ids = try delivered(receiver).map(\.id)
            #expect(ids.count == 12, "no event twice between two instances")
            #expect(Set(ids).count == 12)

            // The receiver holds its answer; the instance delivering is stopped meanwhile, and another starts.
            receiver.delay = .seconds(2)
            await second.stop()
            _ = try await signUp(first.client, "inflight@example.com")
            try await eventually("the delivery in flight") { receiver.received.count == 12 } // not counted until answered
            try await Task.sleep(for: .milliseconds(300))
            await first.stop()
            receiver.delay = .zero
            let third = try await RunningService.start(databaseURL: database.url, values: Self.allowLoopback, devIdP: true)
            _ = try await signUp(third.client, "after@example.com")
            try await eventually("the events after the restart") {
                Set(try delivered(receiver).map(\.id)).count == 14
            }
            try await Task.sleep(for: .milliseconds(300))
            let all = try delivered(receiver).map(\.id)
            #expect(all.count - Set(all).count <= 1, "at most the event in flight comes twice")
            await third.stop()
        } catch {
            await first.stop()
            await second.stop()
            owner.shutdown()
            await receiver.stop()
            throw error
        }
        owner.shutdown()
        await receiver.stop()
    }

    /// One receiver that answers slowly, and many subscriptions with nothing to deliver, hold up no other
    /// subscription: each instance delivers with several loops, one loop's turn on a subscription is short, and
    /// a subscription that has seen the whole log is not taken until the log grows (at the default one-second poll).
    @Test func aSlowReceiverAndIdleSubscriptionsHoldNoOtherUp() async throws {
        let slow = try WebhookReceiver()
        slow.delay = .seconds(5)
        let fast = try WebhookReceiver()
        let database = try await TestDatabase.make()
        let owner = database.client(asServiceRole: false, maxConnections: 2)
        var delivery = RunningService.fastWebhooks
        delivery.pollInterval = WebhookDeliverer.Configuration().pollInterval
        let running = try await RunningService.start(databaseURL: database.url, values: Self.allowLoopback, devIdP: true, webhookDelivery: delivery)
        do {
            let key = try await adminKey(owner)
            _ = try await subscribe(running.client, key: key, url: slow.url, events: ["user.created"])
            for index in 0..<24 {
                _ = try await subscribe(running.client, key: key, url: fast.url.appendingPathComponent("idle\(index)"), events: ["mfa.factor_removed"])
            }
            _ = try await subscribe(running.client, key: key, url: fast.url, events: ["user.created"])
            try await Task.sleep(for: .seconds(1)) // every subscription has looked at the log once
            let started = ContinuousClock.now
            for index in 0..<3 {
                _ = try await signUp(running.client, "busy\(index)@example.com")
            }
            try await eventually("three sign-ups at the fast receiver", timeout: .seconds(30)) { fast.received.count >= 3 }
            let waited = ContinuousClock.now - started
            #expect(waited < .seconds(4), "the fast receiver waited \(waited) behind the slow one or the idle ones")
            #expect(slow.received.count < 3, "the slow receiver is still answering")
        } catch {
            await running.stop()
            owner.shutdown()
            await slow.stop()
            await fast.stop()
            throw error
        }
        await running.stop()
        owner.shutdown()
        await slow.stop()
        await fast.stop()
    }

    @Test func aSlowReceiverDoesNotSlowSignIns() async throws {
        let receiver = try WebhookReceiver()
        receiver.delay = .seconds(3)
        try await DevService.run(settings: Self.allowLoopback) { service in
            let key = try await adminKey(service.admin)
            _ = try await subscribe(service.client, key: key, url: receiver.url)
            for index in 0..<4 {
                let started = ContinuousClock.now
                _ = try await signUp(service.client, "fast\(index)@example.com")
                #expect(ContinuousClock.now - started < .seconds(1), "a sign-in waits for no delivery")
            }
        }
        await receiver.stop()
    }
}
