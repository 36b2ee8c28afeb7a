import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherTesting

@Suite("A user's history: API, table and JSON")
struct UserHistoryTests {
    /// Sign-up, link and unlink Facebook, sign out, then an admin looks and disables: the events of two streams.
    private func livedThrough(_ harness: SupportHarness) async throws -> (user: UUID, admin: AdminKey, adminSecret: String) {
        let ada = try await harness.signUp("ada@example.com")
        try await harness.linkFacebook(ada.accessToken, facebookUserID: "10001", email: "ada@fb.example")
        let unlinked = try await harness.client.delete("/v1/users/me/identities/facebook", headers: ["Authorization": "Bearer \(ada.accessToken)"])
        #expect(unlinked.status == 200)
        let signedOut = try await harness.client.post("/v1/sign-out", headers: ["Authorization": "Bearer \(ada.accessToken)"], body: [])
        #expect(signedOut.status == 204)
        let admin = try await harness.adminKey(.admin)
        let base = "/v1/admin/users/\(ada.id.uuidString.lowercased())"
        #expect(try await harness.adminGet(base, key: admin.secret).status == 200)
        #expect(try await harness.adminPost("\(base)/disable", key: admin.secret, json: ["reason": "asked by the user"]).status == 200)
        return (ada.id, admin.key, admin.secret)
    }

    private static let expectedTypes = [
        "UserRegistered", "IdentityLinked", "PasswordSet", "SignedIn", "SessionStarted", "IdentityLinked", "ProviderTokenStored",
        "IdentityUnlinked", "SessionEnded", "AdminUserViewed", "UserDisabled", "SessionsRevoked", "AdminActionRequested",
    ]

    @Test func historyWithLinkedUnlinkedSignInSessionAndAdminEventsRendersInJSON() async throws {
        try await SupportHarness.run { harness in
            let (user, admin, secret) = try await livedThrough(harness)
            let id = user.uuidString.lowercased()
            let response = try await harness.adminGet("/v1/admin/users/\(id)/history", key: secret)
            #expect(response.status == 200)
            #expect(response.headers.values(for: "Content-Type") == ["application/json"])
            let page = try response.json
            #expect(page["userId"]?.string == id)
            #expect(page["nextAfter"] == .null)
            let events = page["events"]?.elements ?? []
            #expect(events.compactMap { $0["type"]?.string } == Self.expectedTypes)
            let positions = events.compactMap { $0["position"]?.int }
            #expect(positions == positions.sorted() && Set(positions).count == positions.count, "oldest first, by position")

            let registered = events[0]
            #expect(registered["summary"]?.string == "registered: email ada@example.com (unverified), name Ada")
            #expect(registered["surface"]?.string == "v1")
            #expect(registered["actor"] == ["kind": "anonymous", "id": nil])
            #expect(registered["clientIP"]?.string == "127.0.0.1")
            #expect(registered["userAgent"]?.string == "support-tests/1")
            #expect(registered["stream"]?.string == "user-\(id)")
            #expect(registered["personalDataErased"] == .bool(false))
            #expect(registered["time"]?.string?.hasSuffix("Z") == true)
            #expect(registered["commandId"]?.string != nil)

            let summaries = events.compactMap { $0["summary"]?.string }
            #expect(summaries[1] == "linked password ada@example.com: email ada@example.com (unverified)")
            #expect(summaries[2] == "password set")
            #expect(summaries[3].hasPrefix("signed in with password (new_user), session "))
            #expect(summaries[4].hasSuffix(" started (amr pwd)"))
            #expect(summaries[5] == "linked facebook 10001: email ada@fb.example (unverified)")
            #expect(summaries[6] == "facebook access_token kept (to revoke and check the grant)")
            #expect(summaries[7] == "unlinked facebook 10001 (user)")
            #expect(summaries[8].hasSuffix(" ended (sign_out)"))
            #expect(summaries[9] == "viewed the user's detail")
            #expect(summaries[10] == "user disabled: asked by the user")
            #expect(summaries[11].hasPrefix("every session revoked; tokens issued before 20"))
            #expect(summaries[12] == "asked to disable: asked by the user")
            #expect(!response.bodyText.contains("EAA"), "the stored Facebook token never shows")
            #expect(!response.bodyText.contains("scrypt"), "the password hash never shows")

            #expect(events[5]["actor"] == ["kind": "user", "id": .string(id)])
            let adminActor: JSONValue = ["kind": "admin", "id": .string(admin.id.uuidString.lowercased())]
            for index in [9, 10, 11, 12] {
                #expect(events[index]["actor"] == adminActor, "\(Self.expectedTypes[index])")
                #expect(events[index]["surface"]?.string == "admin")
            }
            #expect(events[9]["stream"]?.string == "admin-key-\(admin.id.uuidString.lowercased())")

            // This read is itself on record, and shows in the next one.
            let again = try await harness.adminGet("/v1/admin/users/\(id)/history", key: secret).json
            let last = try #require(again["events"]?.elements.last)
            #expect(last["type"]?.string == "AdminHistoryViewed")
            #expect(last["summary"]?.string == "viewed the history (13 events after position 0)")
        }
    }

    @Test func historyWithLinkedUnlinkedSignInSessionAndAdminEventsRendersAsAnAlignedTable() async throws {
        try await SupportHarness.run { harness in
            let (user, admin, _) = try await livedThrough(harness)
            let table = HistoryTable.render(try await UserHistory(database: harness.owner).all(of: user))
            let lines = table.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(lines.count == 16, "header, 13 events, closing line, and the empty rest after the final line feed")
            let header = lines[0]
            #expect(header.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
                    == "TIME EVENT SURFACE ACTOR CLIENT IP SUMMARY")
            let columnStarts = ["EVENT", "SURFACE", "ACTOR", "CLIENT IP", "SUMMARY"].map { header.range(of: $0)!.lowerBound.utf16Offset(in: header) }
            let rows = lines[1...13]
            for (row, type) in zip(rows, Self.expectedTypes) {
                let offset = { (text: String) in row.range(of: text).map { $0.lowerBound.utf16Offset(in: row) } }
                #expect(offset(type) == columnStarts[0], "\(row)")
                #expect(row.dropFirst(columnStarts[4]).first != " ", "the summary starts in its column: \(row)")
            }
            let row = { (index: Int) in lines[index] }
            #expect(row(1).contains("  v1  ") && row(1).contains("anonymous") && row(1).contains("127.0.0.1"))
            #expect(row(1).hasSuffix("registered: email ada@example.com (unverified), name Ada"))
            #expect(row(6).contains(" self ") && row(6).hasSuffix("linked facebook 10001: email ada@fb.example (unverified)"))
            #expect(row(7).hasSuffix("facebook access_token kept (to revoke and check the grant)"))
            #expect(row(8).hasSuffix("unlinked facebook 10001 (user)"))
            let adminColumn = "admin:" + admin.id.uuidString.lowercased().prefix(8)
            #expect(row(10).contains(" admin ") && row(10).contains(adminColumn) && row(10).hasSuffix("viewed the user's detail"))
            #expect(row(13).hasSuffix("asked to disable: asked by the user"))
            #expect(lines[14] == "13 events of user \(user.uuidString.lowercased())")
            #expect(lines[15] == "")
        }
    }

    @Test func historyPagesFollowNextAfterAndRefuseBadParameters() async throws {
        try await SupportHarness.run { harness in
            let (user, _, secret) = try await livedThrough(harness)
            let id = user.uuidString.lowercased()
            // Pages of one event: a record per page would be on the next page, and the reading would never end.
            // Each key's reading is recorded once, after its first page; the record is on a later page.
            let (_, other) = try await harness.adminKey(.support, name: "second reader")
            for (key, limit, views, expectedPages) in [(secret, 1, 1, 14), (other, 5, 2, 3)] {
                var seen: [String] = []
                var after = "0"
                var pages = 0
                while pages < 40 {
                    let page = try await harness.adminGet("/v1/admin/users/\(id)/history?limit=\(limit)&after=\(after)", key: key).json
                    let events = page["events"]?.elements ?? []
                    #expect(events.count <= limit)
                    seen += events.compactMap { $0["type"]?.string }
                    pages += 1
                    guard let next = page["nextAfter"]?.int else { break }
                    #expect(next == events.last?["position"]?.int)
                    after = String(next)
                }
                #expect(Array(seen.prefix(13)) == Self.expectedTypes)
                #expect(Array(seen.dropFirst(13)) == Array(repeating: "AdminHistoryViewed", count: views), "\(seen.dropFirst(13))")
                #expect(pages == expectedPages)
            }
            // A refused request's record does not make a later page a continuation: a key that asked badly, then
            // read from the middle, is recorded for that read; and a read from the start is always recorded.
            let (_, third) = try await harness.adminKey(.support, name: "third reader")
            #expect(try await harness.adminGet("/v1/admin/users/\(id)/history?limit=x", key: third).status == 400)
            #expect(try await harness.adminGet("/v1/admin/users/\(id)/history?after=1", key: third).status == 200)
            #expect(try await harness.adminGet("/v1/admin/users/\(id)/history", key: third).status == 200)
            let thirdReads = try await harness.owner.query("""
                SELECT data->>'status' AS status FROM events WHERE type = 'AdminHistoryViewed' AND user_id = \(user) ORDER BY position DESC LIMIT 3
                """).map { try $0.decode("status", as: String.self) }
            #expect(thirdReads == ["200", "200", "400"])
            // A page that starts before the end of the recorded one is a new reading, recorded: a key that read two
            // events cannot then read from the first on unrecorded.
            let (fourthKey, fourth) = try await harness.adminKey(.support, name: "fourth reader")
            let two = try await harness.adminGet("/v1/admin/users/\(id)/history?limit=2", key: fourth).json
            let firstPosition = try #require(two["events"]?.elements.first?["position"]?.int)
            #expect(try await harness.adminGet("/v1/admin/users/\(id)/history?after=\(firstPosition)&limit=500", key: fourth).status == 200)
            let fourthReads: Int = try await harness.owner.query("""
                SELECT count(*)::int AS n FROM events WHERE type = 'AdminHistoryViewed' AND stream = \(StreamName.adminKey(fourthKey.id).rawValue)
                """)[0].decode("n")
            #expect(fourthReads == 2)

            for bad in ["limit=0", "limit=501", "limit=x", "after=-1", "after=%2B5", "after=first", "page=2", "after=", "limit="] {
                let refused = try await harness.adminGet("/v1/admin/users/\(id)/history?\(bad)", key: secret)
                #expect(refused.status == 400, "\(bad)")
                #expect(try refused.json["code"]?.string == "invalid_request")
            }
            // The record of a 404 names the id: it must not make the id a user's the second time.
            let unknown = UUID().uuidString
            #expect(try await harness.adminGet("/v1/admin/users/\(unknown)/history", key: secret).status == 404)
            #expect(try await harness.adminGet("/v1/admin/users/\(unknown)/history", key: secret).status == 404)
            #expect(try await harness.adminGet("/v1/admin/users/\(unknown)/history?after=5", key: secret).status == 404)
            #expect(try await harness.adminGet("/v1/admin/users/ada/history", key: secret).status == 400)
        }
    }

    @Test func aPageWrittenEntryByEntryIsTheBytesOfItsJSONTree() async throws {
        try await SupportHarness.run { harness in
            let (user, _, _) = try await livedThrough(harness)
            let history = UserHistory(database: harness.owner)
            for page in [try await history.page(of: user, limit: 5), try await history.all(of: user), HistoryPage(userId: user, entries: [], nextAfter: nil)] {
                let written = try page.jsonBytes()
                #expect(written == (try page.json.jsonBytes()))
                #expect(try JSONDecoder().decode(JSONValue.self, from: Data(written)) == page.json)
            }
        }
    }

    /// A page large enough to be opened and written in parts on two cores (``SideBySide``) holds the
    /// entries one thread makes of the events in order, and writes the bytes of its JSON tree.
    @Test func aLargePageOpenedInPartsIsThePageOpenedEventByEvent() async throws {
        try await SupportHarness.run { harness in
            let (user, _, secret) = try await livedThrough(harness)
            let base = "/v1/admin/users/\(user.uuidString.lowercased())"
            for _ in 0..<(2 * UserHistory.minimumPart) {
                #expect(try await harness.adminGet(base, key: secret).status == 200)
            }
            let store = PostgresEventStore(client: harness.owner, upcasters: AccountEventCodec.upcasters)
            let events = try await store.readUser(user)
            #expect(events.count > 2 * UserHistory.minimumPart)
            #expect(SideBySide.ranges(events.count, minimumPart: UserHistory.minimumPart, cores: 2).count == 2)
            let page = try await UserHistory(database: harness.owner).page(of: user, limit: UserHistory.maxPageSize)
            #expect(page.entries == events.map { HistoryEntry($0) })
            #expect(page.nextAfter == nil)
            #expect(try page.jsonBytes() == (try page.json.jsonBytes()))

            // The support API's text, written part by part straight from the rows, is the page's, also for a
            // page that another follows (its row past the limit neither opened nor written).
            let history = UserHistory(database: harness.owner)
            for limit in [UserHistory.maxPageSize, 2 * UserHistory.minimumPart, 3] {
                let rows = try await harness.owner.withTransactionJob { try $0.runAlone(history.pageStatements(of: user, limit: limit)) }
                let expected = try await history.page(of: user, limit: limit)
                #expect((expected.nextAfter != nil) == (limit < events.count))
                #expect(UserHistory.entryCount(in: rows[...], limit: limit) == expected.entries.count)
                #expect(try history.text(of: user, from: rows[...], limit: limit) == (try expected.jsonBytes()), "limit \(limit)")
            }
        }
    }

    /// The support API's record of a page commits, releasing the user's stream lock (which every command of
    /// theirs takes) and the connection, before the page is opened and written out: a user's sign-in does not
    /// wait for a support reader's 500 events. The page is written on a queue the test holds until then.
    @Test func aPagesRecordCommitsAndFreesTheUsersLockBeforeThePageIsWrittenOut() async throws {
        try await SupportHarness.run { harness in
            let (user, _, _) = try await livedThrough(harness)
            let support = try await harness.adminKey(.support)
            let writing = DispatchQueue(label: "held history page writing")
            writing.suspend()
            var router = Router()
            AdminRoutes(
                keys: AdminKeyStore(database: harness.owner), directory: AdminUserDirectory(database: harness.owner),
                history: UserHistory(database: harness.owner, writingOn: writing), accounts: harness.service.accounts
            ).register(on: &router)
            let routes = router
            let id = user.uuidString.lowercased()
            let request = HTTPRequest(
                method: "GET", target: "/v1/admin/users/\(id)/history", headers: ["Authorization": "Bearer \(support.secret)"])
            async let answered = routes.respond(to: request)

            // The queue is resumed whatever the checks meet: a failed query must fail the test, not leave the
            // page's writing (and the `async let` awaited at the scope's end) held for ever.
            let checked: Result<(recorded: Bool, free: Bool), any Error>
            do {
                var recorded = false
                for _ in 0..<400 where !recorded {
                    recorded = try await harness.owner.query("""
                        SELECT 1 FROM events WHERE stream = \(StreamName.adminKey(support.key.id).rawValue) AND type = 'AdminHistoryViewed'
                        """).count == 1
                    if !recorded { try await Task.sleep(for: .milliseconds(25)) }
                }
                let free: Bool = try await harness.owner.withTransactionJob { job in
                    try job.runAlone(["SELECT pg_try_advisory_xact_lock(hashtextextended(\(StreamName.user(user).rawValue), 0)) AS free"])
                }.last![0].decode("free")
                checked = .success((recorded, free))
            } catch {
                checked = .failure(error)
            }
            writing.resume()
            let (recorded, free) = try checked.get()
            #expect(recorded, "the record is in the log while the page waits to be written")
            #expect(free, "a command of the user takes their stream lock at once")

            let response = try await answered
            #expect(response.status == 200)
            let events = try JSONDecoder().decode(JSONValue.self, from: Data(response.body))["events"]?.elements ?? []
            #expect(events.compactMap { $0["type"]?.string } == Self.expectedTypes)
        }
    }

    /// A page is one ordered range scan of `events_user_id` that stops at the page's end, also on the generic
    /// plan PostgreSQL keeps for the prepared page statement, which it costs for an average user. In a log of
    /// 1,000 users of 20 events each, that plan was a bitmap scan of all of the user's events and a sort
    /// (with 2 events a user, an index scan: few enough rows that a bitmap does not pay).
    @Test func aPageIsOneRangeScanThatStopsAtItsEndOnThePlanAnAverageUserGets() async throws {
        try await SupportHarness.run { harness in
            let (user, _, _) = try await livedThrough(harness)
            try await harness.owner.query("""
                INSERT INTO events (stream, version, event_id, type, data, user_id)
                SELECT 'test-plan-' || (n % 1000), n / 1000 + 1, gen_random_uuid(), 'TestPlanned', '{}', md5((n % 1000)::text)::uuid
                FROM generate_series(0, 19999) n
                """)
            try await harness.owner.query("""
                INSERT INTO events (stream, version, event_id, type, data, user_id)
                SELECT 'test-plan-user', n, gen_random_uuid(), 'TestPlanned', '{}', \(user) FROM generate_series(1, 300) n
                """)
            try await harness.owner.query("ANALYZE events")
            let statements = PostgresEventStore.userEventsStatements(user, limit: 51, limitIsUsual: true)
            #expect(statements.count == PostgresEventStore.userEventsStatementCount)
            let page = statements[1]
            #expect(page.parameters.count == 2 && page.sql.contains("user_id = $1 AND position > $2"), "\(page.sql)")
            // The generic plan of the page statement, run after the statement before it, as a page is read.
            let plan = try await harness.owner.withTransactionJob { job in
                try job.runAlone([
                    statements[0], "SET LOCAL plan_cache_mode = force_generic_plan",
                    PostgresQuery(unsafeSQL: "PREPARE test_history_page(uuid, bigint) AS \(page.sql)"),
                    PostgresQuery(unsafeSQL: "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE test_history_page('\(user.lowercasedText)', 0)"),
                    "DEALLOCATE test_history_page",
                ])
            }
            let text: String = try plan[3][0].decode("QUERY PLAN")
            #expect(text.contains(#""Index Name": "events_user_id""#), "\(text)")
            #expect(!text.contains("Bitmap") && !text.contains(#""Node Type": "Sort""#), "\(text)")
            let scanned = text.split(separator: "\n").filter { $0.contains(#""Actual Rows""#) }
                .compactMap { Int($0.split(separator: ":").last!.trimmingCharacters(in: .whitespaces.union(.punctuationCharacters))) }
            #expect(!scanned.isEmpty && scanned.allSatisfy { $0 <= 51 }, "rows read for a page of 51: \(scanned)")
            // The setting ends with the page's transaction (a pipeline's own, here): the connection's next
            // statements are planned as before.
            let one = harness.database.client(asServiceRole: false, maxConnections: 1)
            defer { one.shutdown() }
            #expect(try await UserHistory(database: one).page(of: user, limit: 50).entries.count == 50)
            let after: String = try await one.query("SHOW enable_bitmapscan")[0].decode("enable_bitmapscan")
            #expect(after == "on")
        }
    }

    @Test func payloadsParsedWhileOpeningGiveTheEntriesTheStoredDataGives() async throws {
        try await SupportHarness.run { harness in
            let (user, _, secret) = try await livedThrough(harness)
            let store = PostgresEventStore(client: harness.owner, upcasters: AccountEventCodec.upcasters)
            func check(_ state: String) async throws {
                let parsed = try await store.readUserParsed(user)
                #expect(parsed.map(\.event) == (try await store.readUser(user)))
                // Events with a sealed part come with their payload: history reads it once.
                #expect(parsed.contains { $0.payload != nil }, "\(state): no payload was handed over")
                for (event, payload) in parsed {
                    if let payload { #expect(payload == (try JOSEObject(parsing: event.data)), "\(state): \(event.type)") }
                    #expect(HistoryEntry(event, payload: payload) == HistoryEntry(event), "\(state): \(event.type)")
                }
            }
            try await check("live")
            let erased = try await harness.client.send(
                "DELETE", "/v1/admin/users/\(user.uuidString.lowercased())",
                fields: [("Authorization", "Bearer \(secret)"), ("Content-Type", "application/json")],
                body: Array(#"{"reason": "asked to be forgotten"}"#.utf8))
            #expect(erased.status == 200, "\(erased.bodyText)")
            try await check("erased")
            #expect(try await UserHistory(database: harness.owner).all(of: user).entries.contains { $0.summary.isPersonalDataErased })
        }
    }

    @Test func historyPagingStaysStableWhileEventsAreAppended() async throws {
        try await SupportHarness.run { harness in
            let (user, _, secret) = try await livedThrough(harness)
            let id = user.uuidString.lowercased()
            let before = try await UserHistory(database: harness.owner).all(of: user).entries.map { Int($0.position) }
            // Another support key keeps looking at the user while the pages are read: each look is an
            // event in the user's history, appended between (and during) the page reads.
            let watcher = try await harness.adminKey(.support, name: "watcher")
            let looking = Task {
                for _ in 0..<30 {
                    _ = try await harness.adminGet("/v1/admin/users/\(id)", key: watcher.secret)
                }
            }
            var paged: [Int] = []
            var after = 0
            while true {
                let page = try await harness.adminGet("/v1/admin/users/\(id)/history?limit=4&after=\(after)", key: secret).json
                let positions = (page["events"]?.elements ?? []).compactMap { $0["position"]?.int }
                paged += positions
                guard let next = page["nextAfter"]?.int else { break }
                after = next
            }
            try await looking.value
            // Strictly ascending: no event twice, none out of order, whatever was appended meanwhile.
            #expect(paged == paged.sorted() && Set(paged).count == paged.count, "\(paged)")
            // Nothing committed before the reading began was skipped.
            #expect(Set(before).isSubset(of: Set(paged)), "\(Set(before).subtracting(paged).sorted())")
            // What the pages showed is the history as it stands afterwards, up to where they stopped.
            let final = try await UserHistory(database: harness.owner).all(of: user).entries.map { Int($0.position) }
            #expect(final.filter { $0 <= (paged.last ?? 0) } == paged)
            #expect(final.count >= before.count + 30)
        }
    }

    @Test func eventTypesWithoutASummaryRenderGenericallyWithoutSecrets() async throws {
        try await SupportHarness.run { harness in
            let ada = try await harness.signUp("ada@example.com")
            let payload = #"{"factorId":"f-1","type":"totp","secretBase32":"JBSWY3DPEHPK3PXP","codeHash":"ab12","personal":{"phoneNumber":"+15550100"}}"#
            try await PostgresEventStore(client: harness.owner).append(
                [NewEvent(type: "MfaFactorEnrolled", data: Data(payload.utf8), userId: ada.id)],
                to: StreamName("mfa-test-\(UUID().uuidString.lowercased())"), expected: .noStream,
                metadata: EventMetadata(actor: .user(ada.id), surface: "v1"))
            let page = try await UserHistory(database: harness.owner).all(of: ada.id)
            let entry = try #require(page.entries.last)
            #expect(entry.type == "MfaFactorEnrolled")
            #expect(entry.summary.text == "factorId=f-1, type=totp, personal data not shown")
            #expect(!entry.summary.isPersonalDataErased)
            let table = HistoryTable.render(page)
            #expect(table.contains("factorId=f-1, type=totp, personal data not shown"))
            #expect(!table.contains("JBSWY3DP") && !table.contains("+15550100") && !table.contains("ab12"))
        }
    }

    @Test func aSummaryIsOneLineWhateverControlOrFormatCharactersThePayloadHolds() throws {
        let reasons = [
            "plain", "line\nbreak\r\ttab", "del\u{7F} nel\u{85} zwsp\u{200B} bidi\u{202E}x bom\u{FEFF}",
            "\u{2028}\u{2029} separators stay", "é 😀 👩‍👩‍👧 flags 🇫🇷", "",
        ]
        for reason in reasons {
            let data = try JSONEncoder().encode(["reason": reason])
            let line = EventSummary.describe(type: "SomethingNew", data: data).text
            // What the summary promised before its fast path: each Cc or Cf scalar as a space.
            let expected = "reason=" + String(reason.unicodeScalars.map { CharacterSet.controlCharacters.contains($0) ? " " : Character($0) })
            #expect(line == (reason.isEmpty ? "reason=" : expected), "\(reason.debugDescription)")
            #expect(!line.contains("\n") && !line.contains("\u{200B}"))
        }
    }

    /// An id in a summary is its first eight characters in lower case, whatever case it was written in.
    @Test(arguments: [
        ("0f9a2b7c-1111-4222-8333-444455556666", "0f9a2b7c"), ("0F9A2B7C-1111", "0f9a2b7c"), ("ÉÀé-ab12-x", "éàé-ab12"),
        ("abc", "abc"), ("", ""),
    ])
    func aShortIDIsItsFirstEightCharactersInLowerCase(id: String, short: String) throws {
        let data = try JSONEncoder().encode(["sessionId": id, "reason": "signed_out"])
        #expect(EventSummary.describe(type: "SessionEnded", data: data).text == "session \(short) ended (signed_out)")
    }

    @Test func anEntrysJSONHoldsEachOfItsMembersAsDocumented() throws {
        let user = UUID()
        let command = UUID()
        let full = RecordedEvent(
            position: 9_007_199_254_740_993, transactionId: 1, stream: .user(user), version: 1, id: UUID(), type: "UserDisabled", schema: 1,
            data: Data(#"{"reason":"a \"quoted\" reason"}"#.utf8),
            metadata: EventMetadata(commandId: command, actor: .user(user), clientIP: "2001:db8::1", userAgent: "Tab\there \\ é 😀", surface: "parse"),
            userId: user, occurredAt: Date(timeIntervalSince1970: 1_790_000_000.1236))
        var bare = full
        bare.metadata = EventMetadata()
        bare.position = 1
        bare.occurredAt = Date(timeIntervalSince1970: -86_400.5)
        var system = full
        system.metadata = EventMetadata(actor: .system("replay"))
        let expected: [JSONValue] = [
            [
                "actor": ["kind": "user", "id": .string(user.uuidString.lowercased())], "clientIP": "2001:db8::1",
                "commandId": .string(command.uuidString.lowercased()), "personalDataErased": false, "position": .int(9_007_199_254_740_993),
                "stream": .string("user-\(user.uuidString.lowercased())"), "summary": #"user disabled: a "quoted" reason"#, "surface": "parse",
                "time": "2026-09-21T14:13:20.124Z", "type": "UserDisabled", "userAgent": "Tab\there \\ é 😀",
            ],
            [
                "actor": nil, "clientIP": nil, "commandId": nil, "personalDataErased": false, "position": 1,
                "stream": .string("user-\(user.uuidString.lowercased())"), "summary": #"user disabled: a "quoted" reason"#, "surface": nil,
                "time": "1969-12-30T23:59:59.500Z", "type": "UserDisabled", "userAgent": nil,
            ],
        ]
        #expect(HistoryEntry(full).json == expected[0])
        #expect(HistoryEntry(bare).json == expected[1])
        #expect(HistoryEntry(system).json["actor"] == ["kind": "system", "id": "replay"])
        // Written as `JSONValue` writes the same object: members in name order, nothing escaped twice.
        let page = HistoryPage(userId: user, entries: [HistoryEntry(full), HistoryEntry(bare)], nextAfter: 1)
        let document: JSONValue = ["events": .array(expected), "nextAfter": 1, "userId": .string(user.uuidString.lowercased())]
        #expect(try page.jsonBytes() == document.jsonBytes())
    }

    @Test func erasedPersonalDataShowsAsErasedInTableAndJSON() throws {
        let user = UUID()
        let at = Date(timeIntervalSince1970: 1_790_000_000)
        func recorded(_ position: Int64, _ type: String, _ json: String) -> RecordedEvent {
            RecordedEvent(
                position: position, transactionId: 1, stream: .user(user), version: Int(position), id: UUID(), type: type, schema: 1,
                data: Data(json.utf8), metadata: EventMetadata(actor: .anonymous, clientIP: "203.0.113.9", surface: "v1"),
                userId: user, occurredAt: at)
        }
        let events = [
            recorded(1, "UserRegistered", #"{"emailVerified":true,"userId":"\#(user.uuidString)"}"#),
            recorded(2, "IdentityLinked", #"{"emailVerified":true,"provider":"apple","uid":"001.abc","personal":"v1:AAAAsealed"}"#),
            recorded(3, "EmailVerified", #"{"provider":"apple"}"#),
            recorded(4, "SignedIn", #"{"outcome":"returning","provider":"apple","sessionId":"6F1C2D3E-0000-4000-8000-000000000000"}"#),
            recorded(5, "UserDisabled", #"{"reason":"line one\nline two"}"#),
            recorded(6, "AdminUserViewed", #"{"status":404}"#),
        ]
        let page = HistoryPage(userId: user, entries: events.map(HistoryEntry.init), nextAfter: nil)
        #expect(page.entries.map(\.summary.text) == [
            "registered: email (erased) (verified), name (erased)",
            "linked apple 001.abc: email (erased) (verified)",
            "email verified by apple: (erased)",
            "signed in with apple (returning), session 6f1c2d3e",
            "user disabled: line one line two",
            "asked for the user's detail (answered 404)",
        ])
        #expect(page.entries.map(\.summary.isPersonalDataErased) == [true, true, true, false, false, false])
        // An erased phone number has no hint: no stray `+` is made of the placeholder.
        let phone = HistoryEntry(recorded(7, "MFAFactorEnrolled", #"{"factorId":"8A1C2D3E-0000-4000-8000-000000000000","type":"phone"}"#))
        #expect(phone.summary.text == "phone factor 8a1c2d3e \"(erased)\" for (erased) enrolment started")

        let table = HistoryTable.render(page)
        #expect(table.hasSuffix("6 events of user \(user.uuidString.lowercased()); personal data has been erased where it shows (erased)\n"))
        #expect(table.contains("2026-09-21T14:13:20.000Z  UserRegistered   v1       anonymous  203.0.113.9  registered: email (erased)"))

        let json = page.json
        #expect(json["events"]?.elements.first?["personalDataErased"] == .bool(true))
        #expect(json["events"]?.elements.first?["summary"]?.string == "registered: email (erased) (verified), name (erased)")
        #expect(json["events"]?.elements.last?["personalDataErased"] == .bool(false))
    }

    @Test(arguments: [
        ("3f2a5b1c-0d4e-4f60-8a7b-9c0d1e2f3a4b", "id 3f2a5b1c-0d4e-4f60-8a7b-9c0d1e2f3a4b"),
        ("Ada@Example.com", "email Ada@Example.com"),
        ("apple:001234.abc.0001", "apple uid 001234.abc.0001"),
        ("password:ada@example.com", "password uid ada@example.com"),
        ("facebook:10001", "facebook uid 10001"),
    ])
    func userReferencesParse(_ text: String, _ meaning: String) throws {
        #expect(try UserReference(parsing: text).description == meaning)
    }

    @Test(arguments: ["ada", "", "@example.com", "Apple:001", "ada@", ":10001"])
    func userReferencesThatNameNobodyAreRefused(_ text: String) {
        #expect(throws: AdminError.self) { try UserReference(parsing: text) }
    }

    @Test func sinceTakesDatesTimesAndSpans() throws {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        #expect(try HistorySince.parse("24h", now: now) == now.addingTimeInterval(-86_400))
        #expect(try HistorySince.parse("90m", now: now) == now.addingTimeInterval(-5_400))
        #expect(try HistorySince.parse("7d", now: now) == now.addingTimeInterval(-604_800))
        #expect(try HistorySince.parse("2026-09-21", now: now) == Date(timeIntervalSince1970: 1_789_948_800))
        #expect(try HistorySince.parse("2026-09-21T14:13:20Z", now: now) == now)
        #expect(try HistorySince.parse("2026-09-21T16:13:20.000+02:00", now: now) == now)
        #expect(try HistorySince.parse("2026-09-22T01:13:20+11:00", now: now) == now, "a day named in its own zone")
        #expect(try HistorySince.parse("2026-09-21T19:43:20+0530", now: now) == now, "a compact offset")
        #expect(try HistorySince.parse("2026-09-21T09:13:20-05", now: now) == now, "an offset of hours")
        #expect(try HistorySince.parse("1970-01-01", now: now) == Date(timeIntervalSince1970: 0))
        #expect(try HistorySince.parse("20000d", now: now) == now.addingTimeInterval(-20_000 * 86_400))
        for bad in ["yesterday", "24", "-1h", "2026-13-01", "h", "999999999d", "9999999999d", "9999999d", "36526d",
                    "0001-01-01", "1969-12-31T23:59:59Z", "2026-02-30", "2026-09-21T25:00:00Z", "2026-02-30T10:00:00Z", "2026-09-21T12:59:60Z"] {
            #expect(throws: AdminError.self, "\(bad)") { try HistorySince.parse(bad, now: now) }
        }
    }

    @Test func sinceLeavesOutOlderEvents() async throws {
        try await SupportHarness.run { harness in
            let ada = try await harness.signUp("ada@example.com")
            let history = UserHistory(database: harness.owner)
            let all = try await history.all(of: ada.id)
            #expect(all.entries.count == 5)
            #expect(try await history.all(of: ada.id, since: Date().addingTimeInterval(60)).entries.isEmpty)
            #expect(try await history.all(of: ada.id, since: Date().addingTimeInterval(-60)).entries.count == 5)
        }
    }
}
