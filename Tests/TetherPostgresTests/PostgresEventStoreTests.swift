import Foundation
import Testing
import TetherCore
import TetherJOSE
import TetherPostgres
import TetherTesting

@Suite("Event store against a real server")
struct PostgresEventStoreTests {
    /// Reads the whole log until `count` events arrived. Transactions of other tests
    /// (in other databases of the cluster) hold back `pg_snapshot_xmin` for a moment,
    /// so the reader may lag; it never skips.
    private func readAll(_ store: PostgresEventStore, after checkpoint: LogCheckpoint = .start, count: Int, page: Int = 1000) async throws -> [RecordedEvent] {
        var events: [RecordedEvent] = []
        var checkpoint = checkpoint
        let deadline = ContinuousClock.now + .seconds(20)
        while events.count < count, ContinuousClock.now < deadline {
            let next = try await store.readAll(after: checkpoint, limit: page)
            if let last = next.last {
                events += next
                checkpoint = last.checkpoint
            } else {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        return events
    }

    private func event(_ type: String = "Noted", _ payload: [String: String] = [:], id: UUID = UUID()) -> NewEvent {
        NewEvent(id: id, type: type, data: try! JSONEncoder().encode(payload))
    }

    @Test func concurrentWritersToOneStreamKeepVersionsContiguousAndLosersGetConflicts() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 8)
        defer { client.shutdown() }
        let store = PostgresEventStore(client: client)
        let stream = StreamName("race-\(UUID().uuidString.lowercased())")
        try await store.append([event()], to: stream, expected: .noStream, metadata: EventMetadata())

        // Eight writers each try to append at the version they all read: one wins per round.
        let outcomes = try await withThrowingTaskGroup(of: (won: Int, conflicts: [WrongExpectedVersion]).self) { group in
            for writer in 0..<8 {
                group.addTask {
                    var won = 0
                    var conflicts: [WrongExpectedVersion] = []
                    for round in 0..<10 {
                        let version = try await store.readStream(stream, after: 0).count
                        do {
                            try await store.append(
                                [event("Written", ["writer": "\(writer)", "round": "\(round)"])], to: stream,
                                expected: .exact(version), metadata: EventMetadata())
                            won += 1
                        } catch let conflict as WrongExpectedVersion {
                            conflicts.append(conflict)
                        }
                    }
                    return (won, conflicts)
                }
            }
            var all: [(won: Int, conflicts: [WrongExpectedVersion])] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        let wins = outcomes.map(\.won).reduce(0, +)
        let conflicts = outcomes.flatMap(\.conflicts)
        #expect(wins + conflicts.count == 80)
        #expect(wins >= 10)
        for conflict in conflicts {
            guard case .exact(let expected) = conflict.expected else {
                Issue.record("conflict without an exact expectation")
                continue
            }
            #expect(conflict.actual > expected, "a conflict reports the version that won")
        }
        let events = try await store.readStream(stream, after: 0)
        #expect(events.count == 1 + wins)
        #expect(events.map(\.version) == Array(1...(1 + wins)))
        #expect(Set(events.map(\.id)).count == events.count)
    }

    @Test func anAppendAgainstTheWrongVersionReportsTheActualOne() async throws {
        let database = try await TestDatabase.make()
        let client = database.client()
        defer { client.shutdown() }
        let store = PostgresEventStore(client: client)
        let stream = StreamName.user(UUID())
        try await store.append([event(), event()], to: stream, expected: .noStream, metadata: EventMetadata())
        let conflict = await #expect(throws: WrongExpectedVersion.self) {
            try await store.append([event()], to: stream, expected: .exact(1), metadata: EventMetadata())
        }
        #expect(conflict?.actual == 2)
        await #expect(throws: WrongExpectedVersion.self) {
            try await store.append([event()], to: stream, expected: .noStream, metadata: EventMetadata())
        }
        let result = try await store.append([event()], to: stream, expected: .any, metadata: EventMetadata())
        #expect(result.streamVersion == 3)
    }

    @Test func retryingAnAppendReturnsTheFirstResultAndWritesNothing() async throws {
        let database = try await TestDatabase.make()
        let client = database.client()
        defer { client.shutdown() }
        let store = PostgresEventStore(client: client)
        let stream = StreamName.user(UUID())
        let events = [event("A"), event("B")]
        let metadata = EventMetadata(commandId: UUID(), actor: .anonymous, surface: "v1")
        let first = try await store.append(events, to: stream, expected: .noStream, metadata: metadata)
        let again = try await store.append(events, to: stream, expected: .noStream, metadata: metadata)
        #expect(first.wasAlreadyAppended == false)
        #expect(again.wasAlreadyAppended == true)
        #expect(again.firstPosition == first.firstPosition)
        #expect(again.lastPosition == first.lastPosition)
        #expect(again.streamVersion == 2)
        #expect(try await store.readStream(stream, after: 0).count == 2)

        // Concurrent retries of one command: still a single effect.
        let retried = [event("C")]
        let results = try await withThrowingTaskGroup(of: AppendResult.self) { group in
            for _ in 0..<6 {
                group.addTask { try await store.append(retried, to: stream, expected: .exact(2), metadata: metadata) }
            }
            var results: [AppendResult] = []
            for try await result in group { results.append(result) }
            return results
        }
        #expect(results.filter { !$0.wasAlreadyAppended }.count == 1)
        #expect(Set(results.map(\.firstPosition)).count == 1)
        #expect(try await store.readStream(stream, after: 0).count == 3)
    }

    @Test func metadataAndPayloadAreStoredAsGiven() async throws {
        let database = try await TestDatabase.make()
        let client = database.client()
        defer { client.shutdown() }
        let store = PostgresEventStore(client: client)
        let user = UUID()
        let metadata = EventMetadata(
            commandId: UUID(), correlationId: UUID(), causationId: UUID(), actor: .user(user),
            clientIP: "203.0.113.9", userAgent: "Tether-Test/1.0", surface: "parse")
        try await store.append(
            [NewEvent(type: "UserRegistered", schema: 2, data: Data(#"{"email":"a@example.com"}"#.utf8), userId: user)],
            to: .user(user), expected: .noStream, metadata: metadata)
        let stored = try #require(try await store.readStream(.user(user), after: 0).first)
        #expect(stored.metadata == metadata)
        #expect(stored.type == "UserRegistered")
        #expect(stored.schema == 2)
        #expect(stored.userId == user)
        #expect(try JSONDecoder().decode([String: String].self, from: stored.data) == ["email": "a@example.com"])
        #expect(abs(stored.occurredAt.timeIntervalSinceNow) < 60)
        #expect(try await store.readUser(user).map(\.id) == [stored.id])
    }

    /// Rows are decoded by where their result holds each column, found once a result: a stream read in two
    /// parts whose results order their columns differently decodes as the stream read at once, and a result
    /// without a column the event needs is refused by name.
    @Test func rowsOfResultsWithTheirColumnsInAnotherOrderDecodeAlike() async throws {
        let database = try await TestDatabase.make()
        let client = database.client()
        defer { client.shutdown() }
        let store = PostgresEventStore(client: client)
        let user = UUID()
        let metadata = EventMetadata(commandId: UUID(), actor: .user(user), surface: "v1")
        try await store.append(
            (1...4).map { NewEvent(type: "Noted", schema: 1, data: Data(#"{"n":\#($0)}"#.utf8), userId: $0.isMultiple(of: 2) ? user : nil) },
            to: .user(user), expected: .noStream, metadata: metadata)
        let expected = try await store.readStream(.user(user), after: 0)
        #expect(expected.count == 4)
        let order = "position, tx, stream, version, event_id, type, schema, data, metadata, user_id, occurred_at"
        let reversed = order.split(separator: ", ").reversed().joined(separator: ", ")
        let first = try await client.query(PostgresQuery(unsafeSQL: "SELECT \(order) FROM events WHERE stream = 'user-\(user.lowercasedText)' AND version <= 2 ORDER BY version"))
        let rest = try await client.query(PostgresQuery(unsafeSQL: "SELECT 0 AS padding, \(reversed) FROM events WHERE stream = 'user-\(user.lowercasedText)' AND version > 2 ORDER BY version"))
        #expect(try store.decode(Array(first) + Array(rest), keys: [:]) == expected)
        #expect(try store.decode(Array(rest) + Array(first), keys: [:]).map(\.version) == [3, 4, 1, 2])

        let lacking = try await client.query(PostgresQuery(unsafeSQL: "SELECT position, tx, stream FROM events WHERE stream = 'user-\(user.lowercasedText)'"))
        #expect { try store.decode(lacking, keys: [:]) } throws: { "\($0)".contains("no column \"version\"") }
    }

    @Test func oldSchemasAreUpcastWhenRead() async throws {
        struct SplitName: EventUpcaster {
            let eventType = "ProfileChanged"
            let fromSchema = 1
            func upcast(_ data: Data, metadata: EventMetadata) throws -> Data {
                let old = try JSONDecoder().decode([String: String].self, from: data)
                let parts = (old["name"] ?? "").split(separator: " ", maxSplits: 1).map(String.init)
                return try JSONEncoder().encode(["givenName": parts.first ?? "", "familyName": parts.dropFirst().first ?? ""])
            }
        }
        let database = try await TestDatabase.make()
        let client = database.client()
        defer { client.shutdown() }
        let stream = StreamName.user(UUID())
        try await PostgresEventStore(client: client).append(
            [event("ProfileChanged", ["name": "Ada Lovelace"])], to: stream, expected: .noStream, metadata: EventMetadata())
        let upcasting = PostgresEventStore(client: client, upcasters: UpcasterChain([SplitName()]))
        let read = try #require(try await upcasting.readStream(stream, after: 0).first)
        #expect(read.schema == 2)
        #expect(try JSONDecoder().decode([String: String].self, from: read.data) == ["givenName": "Ada", "familyName": "Lovelace"])
        // The stored row is untouched.
        let raw = try await client.query("SELECT schema, data->>'name' AS name FROM events")
        #expect(try raw[0].decode("schema", as: Int.self) == 1)
        #expect(try raw[0].decode("name", as: String.self) == "Ada Lovelace")
    }

    /// A reader of payloads alone (a history page) gets each sealed event's payload as a full read parses it,
    /// without its data written out again; an event an upcaster changes is read whole, its data upcast.
    @Test func payloadsOnlyLeavesTheDataOfAnEventWithItsPayloadUnwrittenAndUpcastsTheRest() async throws {
        struct Marked: EventUpcaster {
            let eventType = "Renamed"
            let fromSchema = 1
            func upcast(_ data: Data, metadata: EventMetadata) throws -> Data {
                var payload = try JOSEObject(parsing: data)
                payload["upcast"] = .bool(true)
                return Data(payload.jsonBytes)
            }
        }
        let database = try await TestDatabase.make()
        let client = database.client()
        defer { client.shutdown() }
        let user = UUID()
        try await PostgresEventStore(client: client).append([
            NewEvent(type: "Renamed", data: Data(#"{"personal":{"name":"Ada"}}"#.utf8), userId: user),
            NewEvent(type: "Kept", data: Data(#"{"n":1,"personal":{"name":"Ada"}}"#.utf8), userId: user),
        ], to: .user(user), expected: .noStream, metadata: EventMetadata())
        let upcasting = PostgresEventStore(client: client, upcasters: UpcasterChain([Marked()]))
        let statements = PostgresEventStore.userEventsStatements(user)
        let rows = try await client.withConnection { connection in try await connection.run { try $0.pipeline(statements) } }
        let whole = try upcasting.decodeUserEventsParsed(rows[...])
        let light = try upcasting.decodeUserEventsParsed(rows[...], payloadsOnly: true)
        #expect(whole.count == 2 && light.count == 2)
        // Upcast: read whole, as without payloadsOnly (its payload changed after opening: none is handed over).
        #expect(light[0].event == whole[0].event && light[0].payload == nil)
        #expect(try JOSEObject(parsing: light[0].event.data)["upcast"] == .bool(true))
        // Not upcast: the same payload, holding the opened personal part; the data as stored, not written again.
        let payload = try #require(light[1].payload)
        let written = try JOSEObject(parsing: whole[1].event.data)
        #expect(payload == whole[1].payload && payload == written)
        #expect(payload["personal"] == .object(["name": .string("Ada")]))
        #expect(light[1].event.data != whole[1].event.data)
    }

    @Test func theGlobalReaderNeverPassesAnUncommittedEarlierPosition() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 4)
        defer { client.shutdown() }
        let store = PostgresEventStore(client: client)
        let held = StreamName("held-1")
        let later = StreamName("later-1")
        let (heldInserted, heldInsertedSignal) = AsyncStream.makeStream(of: Void.self)
        let (releaseHeld, releaseHeldSignal) = AsyncStream.makeStream(of: Void.self)

        let holder = Task {
            try await client.withTransaction { connection in
                try await store.append([event("Held")], to: held, expected: .noStream, metadata: EventMetadata(), on: connection)
                heldInsertedSignal.yield()
                for await _ in releaseHeld { break }
            }
        }
        for await _ in heldInserted { break }
        try await store.append([event("Later")], to: later, expected: .noStream, metadata: EventMetadata())
        try await store.append([event("Later")], to: later, expected: .exact(1), metadata: EventMetadata())

        let committedPositions = try await client.query("SELECT position FROM events ORDER BY position")
        #expect(committedPositions.count == 2, "only the two later events are visible while the first is held")
        let whileHeld = try await store.readAll(after: .start, limit: 100)
        #expect(whileHeld.isEmpty, "the reader must not pass the held transaction")

        releaseHeldSignal.yield()
        try await holder.value
        let afterCommit = try await readAll(store, count: 3)
        #expect(afterCommit.map(\.type) == ["Held", "Later", "Later"])
        #expect(afterCommit.map(\.position) == afterCommit.map(\.position).sorted())

        // Paging from a checkpoint continues exactly after it.
        let firstPage = try await store.readAll(after: .start, limit: 1)
        let rest = try await readAll(store, after: try #require(firstPage.last).checkpoint, count: 2)
        #expect((firstPage + rest).map(\.id) == afterCommit.map(\.id))
    }

    @Test func tenThousandEventsAppendAndReadBack() async throws {
        let database = try await TestDatabase.make()
        let client = database.client()
        defer { client.shutdown() }
        let store = PostgresEventStore(client: client)
        let stream = StreamName("bulk-1")
        var version = 0
        for batch in 0..<10 {
            let events = (0..<1000).map { event("Bulk", ["n": "\(batch * 1000 + $0)"]) }
            let result = try await store.append(events, to: stream, expected: .exact(version), metadata: EventMetadata())
            version = result.streamVersion
        }
        #expect(version == 10_000)
        let read = try await store.readStream(stream, after: 0)
        #expect(read.count == 10_000)
        #expect(read.map(\.version) == Array(1...10_000))
        #expect(try read.map { try JSONDecoder().decode([String: String].self, from: $0.data)["n"] } == (0..<10_000).map { "\($0)" })

        let all = try await readAll(store, count: 10_000, page: 2500)
        #expect(all.map(\.id) == read.map(\.id))
    }

    @Test func theServiceRoleCannotUpdateOrDeleteEvents() async throws {
        let database = try await TestDatabase.make()
        let service = database.client(asServiceRole: true)
        let owner = database.client(asServiceRole: false)
        defer {
            service.shutdown()
            owner.shutdown()
        }
        let stream = StreamName.user(UUID())
        try await PostgresEventStore(client: service).append([event()], to: stream, expected: .noStream, metadata: EventMetadata())
        let role = try await service.query("SELECT current_user AS role")
        #expect(try role[0].decode("role", as: String.self) == "tether_service")
        for statement: PostgresQuery in ["UPDATE events SET type = 'Forged'", "DELETE FROM events", "TRUNCATE events"] {
            let serviceError = await #expect(throws: PostgresError.self) { try await service.query(statement) }
            #expect(serviceError?.sqlState == "42501")
            // Even the owner cannot rewrite history: a trigger guards the table.
            let ownerError = await #expect(throws: PostgresError.self) { try await owner.query(statement) }
            #expect(ownerError?.sqlState == "42501")
        }
        let rows = try await owner.query("SELECT type FROM events")
        #expect(try rows.map { try $0.decode("type", as: String.self) } == ["Noted"])
    }
}
