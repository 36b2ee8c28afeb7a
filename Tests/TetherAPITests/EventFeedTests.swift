import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

@Suite("GET /v1/admin/events: the public event feed")
struct EventFeedTests {
    private struct Page: Decodable {
        struct Event: Decodable {
            var id: String
            var type: String
            var version: Int
            var occurredAt: String
            var userId: String
            var surface: String?
            var data: [String: JSONValue]
        }
        var events: [Event]
        var nextAfter: String
    }

    private func key(_ service: DevService, _ role: AdminRole) async throws -> String {
        try await AdminKeyStore(database: service.admin).create(
            role: role, name: "feed reader", metadata: EventMetadata(actor: .operator("tester"), surface: "cli")).secret
    }

    private func page(_ service: DevService, _ key: String, _ query: String) async throws -> Page {
        let response = try await service.client.get("/v1/admin/events?\(query)", headers: ["Authorization": "Bearer \(key)"])
        guard response.status == 200 else { throw HarnessError("the feed answered \(response.status): \(response.bodyText)") }
        return try response.decodeJSON(Page.self)
    }

    /// Pages after `cursor` until `count` events have come (waiting for each page up to 2 s), and the cursor after them.
    private func read(
        _ service: DevService, _ key: String, after cursor: String, count: Int, limit: Int = 3, filter: String = ""
    ) async throws -> ([Page.Event], String) {
        var cursor = cursor
        var events: [Page.Event] = []
        let deadline = ContinuousClock.now + .seconds(60)
        while events.count < count {
            guard ContinuousClock.now < deadline else { throw HarnessError("only \(events.count) of \(count) events came") }
            let next = try await page(service, key, "after=\(cursor)&limit=\(limit)&wait=2\(filter)")
            cursor = next.nextAfter
            events += next.events
        }
        return (events, cursor)
    }

    /// The number of public events in the log (of `userId`, when given).
    private func publicEvents(_ service: DevService, userId: String? = nil) async throws -> Int {
        let user: PostgresQuery = userId.map { "AND user_id = \($0)::uuid" } ?? ""
        return try await service.admin.query("""
            SELECT count(*)::int AS n FROM events WHERE type = ANY(\(PostgresArray(PublicEvent.internalTypes))::text[]) \(user)
            """)[0].decode("n")
    }

    private func signUp(_ service: DevService, _ email: String) async throws -> SignedIn {
        try await service.client.post("/v1/sign-up", json: ["email": email, "password": "a long password"]).decodeJSON(SignedIn.self)
    }

    @Test func everyEventIsReadOnceAcrossPagesWhileWritersCommitOutOfOrder() async throws {
        try await DevService.run { service in
            let admin = try await key(service, .admin)
            for index in 0..<3 { _ = try await signUp(service, "early\(index)@example.com") }
            // A writer that began before the next sign-ups commits after them.
            let held = UUID()
            let (inserted, insertedSignal) = AsyncStream.makeStream(of: Void.self)
            let (release, releaseSignal) = AsyncStream.makeStream(of: Void.self)
            let store = PostgresEventStore(client: service.admin)
            let holder = Task {
                try await service.admin.withTransaction { connection in
                    let data = Data(#"{"emailVerified":false,"userId":"\#(held.lowercasedText)"}"#.utf8)
                    _ = try await store.append(
                        [NewEvent(type: "UserRegistered", data: data, userId: held)], to: .user(held), expected: .noStream,
                        metadata: EventMetadata(surface: "test"), on: connection)
                    insertedSignal.yield()
                    for await _ in release { break }
                }
            }
            for await _ in inserted { break }
            for index in 0..<2 { _ = try await signUp(service, "late\(index)@example.com") }

            // Three sign-ups are four public events each; the late ones and the held one may not come yet.
            var (whileHeld, cursor) = try await read(service, admin, after: "0", count: 12)
            let more = try await page(service, admin, "after=\(cursor)&wait=1")
            whileHeld += more.events
            cursor = more.nextAfter
            #expect(Set(whileHeld.compactMap { if case .string(let email)? = $0.data["email"] { email } else { nil } }) == ["early0@example.com", "early1@example.com", "early2@example.com"])
            #expect(!whileHeld.contains { $0.userId == held.lowercasedText }, "the feed does not pass the open writer")
            releaseSignal.yield()
            try await holder.value
            let (afterCommit, _) = try await read(service, admin, after: cursor, count: try await publicEvents(service) - whileHeld.count)
            #expect(afterCommit.first?.userId == held.lowercasedText, "the late commit comes next, not skipped")
            let all = whileHeld + afterCommit
            #expect(Set(all.map(\.id)).count == all.count, "no event twice")
            #expect(all.count == (try await publicEvents(service)), "every public event once")
            #expect(all.map(\.type).filter { $0 == "user.created" }.count == 6)
            let first = try #require(all.first)
            #expect(first.id.hasPrefix("evt_") && first.id.count == 36)
            #expect(first.version == 1)
            #expect(first.surface == "v1")
            #expect(ISO8601Milliseconds.parse(first.occurredAt) != nil)
            #expect(Set(all.map(\.type)).isSubset(of: PublicEvent.types))
            #expect(!all.contains { $0.type == "session.refreshed" || $0.type.hasPrefix("admin") })
        }
    }

    /// Without `limit`, a page holds 50 events, as the document and every other list say.
    @Test func aPageWithoutALimitHoldsFiftyEvents() async throws {
        try await DevService.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "1000"]) { service in
            let admin = try await key(service, .admin)
            for index in 0..<15 { _ = try await signUp(service, "many\(index)@example.com") }
            let available = try await publicEvents(service)
            #expect(available > 50)
            let first = try await page(service, admin, "after=0")
            #expect(first.events.count == 50)
            let rest = try await page(service, admin, "after=\(first.nextAfter)&limit=500")
            #expect(first.events.count + rest.events.count == available)
        }
    }

    /// Backends hear of a second factor when it is confirmed and when it goes; an enrolment never confirmed (ended by
    /// wrong codes, withdrawn by its user) was never announced, so its end is not either.
    @Test func onlyConfirmedFactorsAreAnnouncedGone() async throws {
        try await DevService.run { service in
            let admin = try await key(service, .admin)
            let ada = try await signUp(service, "ada-mfa@example.com")
            try await service.verifyEmail("ada-mfa@example.com", accessToken: ada.session.accessToken)
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(ada.session.accessToken)"]
            struct Enrolment: Decodable { var factorId: String }
            let failed = try await service.client.post("/v1/users/me/mfa/totp", headers: auth, body: []).decodeJSON(Enrolment.self)
            for _ in 0..<UserAccount.maxCodeAttempts {
                _ = try await service.client.post("/v1/users/me/mfa/totp/verify", headers: auth, json: ["factorId": failed.factorId, "code": "000000"])
            }
            let withdrawn = try await service.client.post("/v1/users/me/mfa/totp", headers: auth, body: []).decodeJSON(Enrolment.self)
            #expect(try await service.client.delete("/v1/users/me/mfa/\(withdrawn.factorId)", headers: auth).status == 200)
            let (kept, _) = try await service.enrolTOTP(accessToken: ada.session.accessToken)
            #expect(try await service.client.delete("/v1/users/me/mfa/\(kept)", headers: auth).status == 200)
            #expect(try await service.eventCount("MFAFactorRemoved") == 3)
            let (events, _) = try await read(service, admin, after: "0", count: 2, limit: 50, filter: "&type=mfa.*")
            #expect(events.map(\.type) == ["mfa.factor_enrolled", "mfa.factor_removed"])
            #expect(events.allSatisfy { $0.data["factorId"] == .string(kept) })
            #expect(try await page(service, admin, "after=0&limit=50&type=mfa.*").events.count == 2)
        }
    }

    @Test func supportKeysReadNoPersonalDataAndFiltersNarrowThePage() async throws {
        try await DevService.run { service in
            let admin = try await key(service, .admin)
            let support = try await key(service, .support)
            let ada = try await signUp(service, "ada@example.com")
            _ = try await signUp(service, "bob@example.com")
            let (fullEvents, _) = try await read(service, admin, after: "0", count: 4, limit: 10, filter: "&type=user.created,identity.linked")
            let full = Page(events: fullEvents, nextAfter: "")
            #expect(full.events.map(\.type) == ["user.created", "identity.linked", "user.created", "identity.linked"])
            #expect(full.events[0].data["email"] == .string("ada@example.com"))
            #expect(full.events[1].data["uid"] == .string("ada@example.com"))
            let redacted = Page(
                events: try await read(service, support, after: "0", count: 4, limit: 10, filter: "&type=user.created,identity.linked").0,
                nextAfter: "")
            #expect(redacted.events.map(\.id) == full.events.map(\.id))
            #expect(redacted.events.allSatisfy { $0.data["email"] == nil && $0.data["uid"] == nil && $0.data["displayName"] == nil })
            #expect(redacted.events[1].data["provider"] == .string("password"))
            let adas = Page(events: try await read(service, support, after: "0", count: 4, limit: 10, filter: "&userId=\(ada.user.id)").0, nextAfter: "")
            #expect(adas.events.allSatisfy { $0.userId == ada.user.id })
            #expect(adas.events.count == 4)
            // Ids in `data` are written as the API writes every id, in lowercase.
            let started = try await read(service, support, after: "0", count: 1, limit: 10, filter: "&type=session.started&userId=\(ada.user.id)").0
            #expect(started.first?.data["sessionId"] == .string(ada.session.id), "\(started.first?.data ?? [:]) against \(ada.session.id)")
            #expect(ada.session.id == ada.session.id.lowercased())
            // A cursor past the newest event (another database's) would wait for events that never come.
            for bad in ["type=user.exploded", "after=nonsense", "wait=31", "limit=501", "userId=nobody", "colour=red", "limit=", "wait=",
                        "after=999999999-1", "after=%2B5-%2B3"] {
                let response = try await service.client.get("/v1/admin/events?\(bad)", headers: ["Authorization": "Bearer \(admin)"])
                #expect(response.status == 400, "\(bad): \(response.bodyText)")
            }
            // The feed's documented empties count as absent (its schema admits them); its numbers' do not.
            let empties = try await service.client.get(
                "/v1/admin/events?after=&type=%20&userId=&limit=2", headers: ["Authorization": "Bearer \(admin)"])
            #expect(empties.status == 200, "\(empties.bodyText)")
            #expect(try empties.json["events"]?.elements.count == 2)
            #expect(try await service.client.get("/v1/admin/events").status == 401)
            let records = try await service.eventCount("AdminEventsRead")
            #expect(records >= 4, "every read of the feed is recorded")
        }
    }

    @Test func aWaitingReaderGetsTheNextEventAsItCommitsAndErasedUsersKeepNoPersonalData() async throws {
        try await DevService.run { service in
            let admin = try await key(service, .admin)
            let ada = try await signUp(service, "ada@example.com")
            let (_, cursor) = try await read(service, admin, after: "0", count: 4, limit: 4)
            let started = ContinuousClock.now
            let writer = Task {
                try await Task.sleep(for: .milliseconds(500))
                _ = try await service.client.post("/v1/sign-out", headers: ["Authorization": "Bearer \(ada.session.accessToken)"], body: [])
            }
            let waited = try await service.withNewClient { client in
                try await client.get("/v1/admin/events?after=\(cursor)&wait=30", headers: ["Authorization": "Bearer \(admin)"])
                    .decodeJSON(Page.self)
            }
            try await writer.value
            #expect(waited.events.map(\.type) == ["session.ended"])
            #expect(ContinuousClock.now - started < .seconds(25), "the wait ends when the event comes, not at its end")
            let empty = try await page(service, admin, "after=\(waited.nextAfter)&wait=1")
            #expect(empty.events.isEmpty)
            // The cursor moves past what is not public (the feed's own read records) so that it is not scanned again.
            #expect(try #require(EventFeed.Cursor(parsing: empty.nextAfter)).checkpoint > EventFeed.Cursor(parsing: waited.nextAfter)!.checkpoint)

            let erased = try await service.client.send(
                "DELETE", "/v1/admin/users/\(ada.user.id)", fields: [("Authorization", "Bearer \(admin)"), ("Content-Type", "application/json")],
                body: Array(#"{"reason": "asked to be forgotten"}"#.utf8))
            #expect(erased.status == 200)
            let (history, _) = try await read(
                service, admin, after: "0", count: try await publicEvents(service, userId: ada.user.id), limit: 100, filter: "&userId=\(ada.user.id)")
            let hers = history.filter { $0.userId == ada.user.id }
            #expect(hers.last?.type == "user.erased")
            #expect(hers.allSatisfy { $0.data["email"] == nil && $0.data["uid"] == nil }, "nothing personal after the erasure")
            #expect(hers.map(\.type).prefix(2) == ["user.created", "identity.linked"], "what happened is still told")
        }
    }

    /// A key revoked while its long poll waits got the events that came after the revocation (an admin key's, with
    /// their personal members), and its read was recorded as answered.
    @Test func aKeyRevokedWhileItWaitsGetsNothingOfWhatCameAfter() async throws {
        try await DevService.run { service in
            let store = AdminKeyStore(database: service.admin)
            let created = try await store.create(role: .admin, name: "temporary", metadata: EventMetadata(actor: .operator("tester"), surface: "cli"))
            let ada = try await signUp(service, "ada@example.com")
            let (_, cursor) = try await read(service, created.secret, after: "0", count: 2, limit: 50)
            let writer = Task {
                try await Task.sleep(for: .milliseconds(500))
                _ = try await store.revoke(created.key.id, metadata: EventMetadata(actor: .operator("tester"), surface: "cli"))
                _ = try await service.client.post("/v1/sign-out", headers: ["Authorization": "Bearer \(ada.session.accessToken)"], body: [])
            }
            let waited = try await service.withNewClient { client in
                try await client.get("/v1/admin/events?after=\(cursor)&wait=30", headers: ["Authorization": "Bearer \(created.secret)"])
            }
            try await writer.value
            #expect(waited.status == 401, "\(waited.status) \(waited.bodyText)")
            #expect(!waited.bodyText.contains("session.ended"))
        }
    }

    @Test func aWriterInAnotherDatabaseOfTheServerDoesNotHoldTheFeedBack() async throws {
        let other = try await TestDatabase.make()
        let otherClient = other.client(asServiceRole: false, maxConnections: 1)
        defer { otherClient.shutdown() }
        try await DevService.run { service in
            let admin = try await key(service, .admin)
            let (holding, holdingSignal) = AsyncStream.makeStream(of: Void.self)
            let (release, releaseSignal) = AsyncStream.makeStream(of: Void.self)
            let holder = Task {
                try await otherClient.withTransaction { connection in
                    try await connection.query("CREATE TABLE held (x int)")
                    holdingSignal.yield()
                    for await _ in release { break }
                }
            }
            for await _ in holding { break }
            _ = try await signUp(service, "ada@example.com")
            let started = ContinuousClock.now
            let (events, _) = try await read(service, admin, after: "0", count: 4)
            #expect(events.first?.type == "user.created")
            #expect(ContinuousClock.now - started < .seconds(10), "the other database's open writer is not waited for")
            releaseSignal.yield()
            try await holder.value
        }
    }
}

@Suite("A stopping server and the feed's long polls")
struct EventFeedStopTests {
    @Test func aStopAnswersALongPollAtOnceInsteadOfWaitingForIt() async throws {
        let database = try await TestDatabase.make()
        let running = try await RunningService.start(databaseURL: database.url, values: [:], devIdP: false)
        let secret = try await AdminKeyStore(database: database.client(asServiceRole: false, maxConnections: 1)).create(
            role: .support, name: "feed reader", metadata: EventMetadata(actor: .operator("tester"), surface: "cli")).secret
        let reader = HTTPTestClient(port: running.service.server.boundPort, timeout: .seconds(40))
        let poll = Task {
            try await reader.get("/v1/admin/events?after=0&type=mfa.factor_removed&wait=30", headers: ["Authorization": "Bearer \(secret)"])
        }
        try await Task.sleep(for: .milliseconds(500)) // the poll is waiting
        let started = ContinuousClock.now
        await running.stop()
        let stopped = ContinuousClock.now - started
        let answer = try await poll.value
        await reader.close()
        #expect(answer.status == 200, "the poll gets its (empty) page, not the grace period's 503: \(answer.bodyText)")
        #expect(answer.bodyText.contains(#""events":[]"#))
        #expect(stopped < .seconds(5), "the stop took \(stopped): it waited for the poll")
    }
}
