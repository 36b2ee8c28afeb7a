import Foundation
import Testing
import TetherCore
@testable import TetherPostgres
import TetherTesting

/// A projection that exists only in these tests: notebooks with a title and unkeyed
/// marks, so replay is seen to work from the `Projection` description alone, for a
/// table with a primary key, a named unique constraint, a check, an index, a foreign
/// key, grants, and a table with no key at all.
private enum Notebooks {
    static let schema = """
        CREATE TABLE notebooks (
            id         uuid PRIMARY KEY,
            title      text NOT NULL CONSTRAINT notebooks_title_not_blank CHECK (title <> ''),
            created_at timestamptz NOT NULL,
            renamed    integer NOT NULL DEFAULT 0,
            details    jsonb NOT NULL DEFAULT '{"pages": 1.0}',
            tags       text[] NOT NULL DEFAULT '{a,b}',
            CONSTRAINT notebooks_title_key UNIQUE (title)
        );
        CREATE INDEX notebooks_created ON notebooks (created_at DESC) WHERE renamed = 0;
        CREATE TABLE notebook_marks (
            notebook_id uuid NOT NULL REFERENCES notebooks (id),
            mark        text NOT NULL
        );
        GRANT SELECT, INSERT, UPDATE ON notebooks, notebook_marks TO tether_service;
        """

    struct Payload: Codable {
        var title: String?
        var mark: String?
    }

    static let projection = Projection(name: "notebooks", tables: ["notebook_marks", "notebooks"], categories: ["notebook"]) {
        event, occurredAt, connection, _ in
        try await apply(event.type, try JSONDecoder().decode(Payload.self, from: event.data), notebook: event.userId!, at: occurredAt, on: connection)
    }

    static func apply(_ type: String, _ payload: Payload, notebook: UUID, at: String, on connection: PostgresConnection) async throws {
        switch type {
        case "NotebookCreated":
            try await connection.query("INSERT INTO notebooks (id, title, created_at) VALUES (\(notebook), \(payload.title!), \(at)::timestamptz)")
        case "NotebookRenamed":
            try await connection.query("UPDATE notebooks SET title = \(payload.title!), renamed = renamed + 1 WHERE id = \(notebook)")
        case "Marked":
            try await connection.query("INSERT INTO notebook_marks (notebook_id, mark) VALUES (\(notebook), \(payload.mark!))")
        default:
            break
        }
    }

    /// Appends one event and projects it inline, as a command would.
    static func write(_ type: String, _ payload: Payload, notebook: UUID, client: PostgresClient) async throws {
        let store = PostgresEventStore(client: client)
        try await client.withTransaction { connection in
            let event = NewEvent(type: type, data: try JSONEncoder().encode(payload), userId: notebook)
            try await store.append([event], to: StreamName("notebook-\(notebook.uuidString.lowercased())"), expected: .any, metadata: EventMetadata(), on: connection)
            let at: String = try await connection.query("SELECT now()::text AS at")[0].decode("at")
            try await apply(type, payload, notebook: notebook, at: at, on: connection)
        }
    }
}

@Suite("tether replay: rebuild, verify and swap")
struct ProjectionReplayTests {
    /// A migrated database with the notebooks tables and `count` notebooks, each created,
    /// renamed once and marked twice; the owner's pool (replay's) and the service's.
    private func notebooks(_ count: Int) async throws -> (owner: PostgresClient, service: PostgresClient, ids: [UUID]) {
        let database = try await TestDatabase.make()
        let owner = database.client(asServiceRole: false, maxConnections: 4)
        try await owner.withConnection { try await $0.execute(simple: Notebooks.schema) }
        let service = database.client(maxConnections: 4)
        var ids: [UUID] = []
        for index in 0..<count {
            let id = UUID()
            ids.append(id)
            try await Notebooks.write("NotebookCreated", .init(title: "draft \(index)"), notebook: id, client: service)
            try await Notebooks.write("NotebookRenamed", .init(title: "notebook \(index)"), notebook: id, client: service)
            try await Notebooks.write("Marked", .init(mark: "a"), notebook: id, client: service)
            try await Notebooks.write("Marked", .init(mark: "a"), notebook: id, client: service)
        }
        return (owner, service, ids)
    }

    /// Every row of `tables`, as text, in a stable order.
    private func rows(_ tables: [String], _ client: PostgresClient) async throws -> [String] {
        var lines: [String] = []
        for table in tables {
            let rows = try await client.query("SELECT t::text AS row FROM \(unsafeSQL: table) t ORDER BY 1")
            lines += try rows.map { "\(table): " + (try $0.decode("row", as: String.self)) }
        }
        return lines
    }

    /// What the catalog says about `tables`: OIDs aside, everything a swap must keep.
    private func structure(_ tables: [String], _ client: PostgresClient) async throws -> [String] {
        try await client.query("""
            SELECT format('%s %s', conrelid::regclass, pg_get_constraintdef(oid)) || ' ' || conname AS line
            FROM pg_constraint WHERE conrelid = ANY(\(PostgresArray(tables))::regclass[])
            UNION ALL SELECT indexdef FROM pg_indexes WHERE tablename = ANY(\(PostgresArray(tables))::name[])
            UNION ALL SELECT relname || ' ' || relacl::text FROM pg_class WHERE oid = ANY(\(PostgresArray(tables))::regclass[])
            UNION ALL SELECT format('%s.%s %s %s %s', attrelid::regclass, attname, format_type(atttypid, atttypmod), attnotnull,
                                    pg_get_expr(adbin, adrelid))
            FROM pg_attribute LEFT JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum
            WHERE attrelid = ANY(\(PostgresArray(tables))::regclass[]) AND attnum > 0 AND NOT attisdropped
            ORDER BY 1
            """).map { try $0.decode("line") }
    }

    private func oids(_ tables: [String], _ client: PostgresClient) async throws -> [Int] {
        try await client.query("SELECT oid::int AS oid FROM unnest(\(PostgresArray(tables))::regclass[]) AS t(oid) ORDER BY 1")
            .map { try $0.decode("oid") }
    }

    private func shadowSchemaExists(_ client: PostgresClient) async throws -> Bool {
        try await client.query("SELECT to_regnamespace('tether_replay') IS NOT NULL AS present")[0].decode("present")
    }

    @Test func aReplayRebuildsIdenticalRowsIntoNewTablesBuiltExactlyLikeTheLiveOnes() async throws {
        let (owner, service, _) = try await notebooks(12)
        defer { owner.shutdown(); service.shutdown() }
        let tables = Notebooks.projection.tables
        let (rowsBefore, structureBefore, oidsBefore) = (try await rows(tables, owner), try await structure(tables, owner), try await oids(tables, owner))

        let outcome = try await ProjectionReplay(projection: Notebooks.projection, database: owner, configuration: .init(batchSize: 7))
            .run(.replace)

        #expect(outcome.events == 48)
        #expect(try await rows(tables, owner) == rowsBefore)
        #expect(try await structure(tables, owner) == structureBefore)
        #expect(try await oids(tables, owner) != oidsBefore, "the tables were swapped, not refilled")
        #expect(try await !shadowSchemaExists(owner))
        // The service role keeps its grants and the constraint names it maps to errors.
        await #expect(throws: PostgresError.self) {
            try await Notebooks.write("NotebookCreated", .init(title: "notebook 3"), notebook: UUID(), client: service)
        }
        do {
            try await Notebooks.write("NotebookCreated", .init(title: "notebook 3"), notebook: UUID(), client: service)
        } catch let error as PostgresError {
            #expect(error.constraint == "notebooks_title_key")
        }
        try await Notebooks.write("NotebookCreated", .init(title: "after the swap"), notebook: UUID(), client: service)
    }

    /// Several projections rebuilt by one run hold the run lock from the first to the last: a migration (or
    /// another replay) cannot start between two of them.
    @Test func aRunOfSeveralProjectionsHoldsItsLockBetweenThem() async throws {
        let (owner, service, _) = try await notebooks(3)
        defer { owner.shutdown(); service.shutdown() }
        var between: [Bool] = []
        try await ProjectionReplay.run([Notebooks.projection, Notebooks.projection], .replace, on: owner) { outcome in
            #expect(outcome.events == 12)
            between.append(try await service.query("SELECT pg_try_advisory_lock(\(ProjectionReplay.runLockKey)) AS locked")[0].decode("locked"))
        }
        #expect(between == [false, false], "another session could take the run lock while the run went on")
        #expect(try await service.query("SELECT pg_try_advisory_lock(\(ProjectionReplay.runLockKey)) AS locked")[0].decode("locked", as: Bool.self),
                "the run lets it go at the end")
    }

    @Test func verifyReportsChangedMissingAndExtraRowsAndChangesNothing() async throws {
        let (owner, service, ids) = try await notebooks(3)
        defer { owner.shutdown(); service.shutdown() }
        let replay = ProjectionReplay(projection: Notebooks.projection, database: owner)
        #expect(try await replay.run(.verify).drift.isEmpty)

        try await owner.query("UPDATE notebooks SET title = 'tampered', renamed = 7 WHERE id = \(ids[0])")
        try await owner.query("DELETE FROM notebook_marks WHERE ctid IN (SELECT ctid FROM notebook_marks WHERE notebook_id = \(ids[1]) LIMIT 1)")
        try await owner.query("INSERT INTO notebook_marks (notebook_id, mark) VALUES (\(ids[2]), 'forged')")
        let before = try await rows(Notebooks.projection.tables, owner)
        let oidsBefore = try await oids(Notebooks.projection.tables, owner)

        let drift = try await replay.run(.verify).drift

        let id0 = ids[0].uuidString.lowercased()
        #expect(drift.count == 3)
        #expect(drift.contains(RowDrift(
            table: "notebooks", kind: .changed, key: "id=\(id0)",
            detail: "title live 'tampered', log 'notebook 0'; renamed live '7', log '1'")))
        #expect(drift.contains { $0.table == "notebook_marks" && $0.kind == .missing && $0.detail.contains(ids[1].uuidString.lowercased()) })
        #expect(drift.contains { $0.table == "notebook_marks" && $0.kind == .extra && $0.detail.contains("forged") })
        #expect(drift.first { $0.kind == .changed }?.description
            == "notebooks (id=\(id0)) changed: title live 'tampered', log 'notebook 0'; renamed live '7', log '1'")
        #expect(try await rows(Notebooks.projection.tables, owner) == before)
        #expect(try await oids(Notebooks.projection.tables, owner) == oidsBefore)
        #expect(try await !shadowSchemaExists(owner))

        // A replay repairs the drift.
        _ = try await replay.run(.replace)
        #expect(try await replay.run(.verify).drift.isEmpty)
    }

    @Test func verifyFindsADifferenceOnlyTheTextShows() async throws {
        let (owner, service, ids) = try await notebooks(2)
        defer { owner.shutdown(); service.shutdown() }
        let replay = ProjectionReplay(projection: Notebooks.projection, database: owner)
        #expect(try await replay.run(.verify).drift.isEmpty)

        // Equal as jsonb values, different in print: the whole-table digest must not take them for the same.
        #expect(try await owner.query(#"SELECT '{"pages": 1.00}'::jsonb = '{"pages": 1.0}'::jsonb AS equal"#)[0].decode("equal", as: Bool.self))
        try await owner.query(#"UPDATE notebooks SET details = '{"pages": 1.00}' WHERE id = \#(ids[0])"#)
        let jsonDrift = try await replay.run(.verify).drift
        #expect(jsonDrift == [RowDrift(
            table: "notebooks", kind: .changed, key: "id=\(ids[0].uuidString.lowercased())",
            detail: #"details live '{"pages": 1.00}', log '{"pages": 1.0}'"#)])

        // An array's hash leaves out its bounds: the same elements from 0 print differently, and must drift too.
        _ = try await replay.run(.replace)
        try await owner.query("UPDATE notebooks SET tags = '[0:1]={a,b}' WHERE id = \(ids[1])")
        let arrayDrift = try await replay.run(.verify).drift
        #expect(arrayDrift == [RowDrift(
            table: "notebooks", kind: .changed, key: "id=\(ids[1].uuidString.lowercased())",
            detail: "tags live '[0:1]={a,b}', log '{a,b}'")])
    }

    @Test func anInterruptedReplayDropsItsCopiesAndLeavesTheLiveTablesAlone() async throws {
        let (owner, service, _) = try await notebooks(10)
        defer { owner.shutdown(); service.shutdown() }
        let tables = Notebooks.projection.tables
        try await owner.query("UPDATE notebooks SET renamed = 99") // drift a swap would repair
        let (before, oidsBefore) = (try await rows(tables, owner), try await oids(tables, owner))
        let replay = ProjectionReplay(projection: Notebooks.projection, database: owner, configuration: .init(batchSize: 2))

        let task = Task {
            try await replay.run(.replace) { progress in
                // Like SIGINT in `tether replay`: cancel the run partway through the rebuild.
                if progress.applied >= 6 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }

        #expect(try await rows(tables, owner) == before)
        #expect(try await oids(tables, owner) == oidsBefore)
        #expect(try await !shadowSchemaExists(owner))
        let recorded = try await ProjectionReplayRecord.latest(on: service)
        #expect(recorded.isEmpty)
    }

    @Test func copiesLeftByAKilledRunAreDroppedByTheNextRun() async throws {
        let (owner, service, _) = try await notebooks(2)
        defer { owner.shutdown(); service.shutdown() }
        try await owner.withConnection {
            try await $0.execute(simple: "CREATE SCHEMA tether_replay; CREATE TABLE tether_replay.notebooks (stale int)")
        }
        let outcome = try await ProjectionReplay(projection: Notebooks.projection, database: owner).run(.replace)
        #expect(outcome.events == 8)
        #expect(try await !shadowSchemaExists(owner))
    }

    @Test func finishedRunsAreRecordedForMetrics() async throws {
        let (owner, service, _) = try await notebooks(2)
        defer { owner.shutdown(); service.shutdown() }
        let replay = ProjectionReplay(projection: Notebooks.projection, database: owner)
        _ = try await replay.run(.replace)
        try await owner.query("UPDATE notebooks SET renamed = 5")
        _ = try await replay.run(.verify)

        let latest = try await ProjectionReplayRecord.latest(on: service) // the service role may read them
        #expect(latest.count == 2)
        let replayed = try #require(latest.first { $0.mode == .replace })
        let verified = try #require(latest.first { $0.mode == .verify })
        #expect(replayed.projection == "notebooks")
        #expect(replayed.events == 8)
        #expect(replayed.driftingRows == nil)
        #expect(replayed.eventsPerSecond > 0)
        #expect(verified.driftingRows == 2)
    }

    @Test func replayRefusesTheServiceRoleAndAnUnmigratedDatabase() async throws {
        let (owner, service, _) = try await notebooks(1)
        defer { owner.shutdown(); service.shutdown() }
        await #expect { try await ProjectionReplay(projection: Notebooks.projection, database: service).run(.verify) } throws: { error in
            "\(error)".contains("role that owns the tables")
        }
        let empty = try await TestDatabase.make(migrated: false).client(asServiceRole: false)
        defer { empty.shutdown() }
        await #expect { try await ProjectionReplay(projection: .accounts, database: empty).run(.replace) } throws: { error in
            "\(error)".contains("run tether migrate")
        }
    }

    @Test func aViewOnAProjectionTableStopsTheReplayBeforeItStarts() async throws {
        let (owner, service, _) = try await notebooks(1)
        defer { owner.shutdown(); service.shutdown() }
        try await owner.withConnection { try await $0.execute(simple: "CREATE VIEW notebook_titles AS SELECT title FROM notebooks") }
        await #expect { try await ProjectionReplay(projection: Notebooks.projection, database: owner).run(.replace) } throws: { error in
            "\(error)".contains("view notebook_titles")
        }
        #expect(try await !shadowSchemaExists(owner))
    }

    // MARK: Vacuums of the live tables

    /// A vacuum of a live table (its lock taken here by another session, in the mode a vacuum holds, for 3 s)
    /// outlasts the swap's 200 ms table waits, which once gave up after all 50 attempts while autovacuum
    /// worked through tables a swap had just put in place. The swap (and `--verify`'s snapshot) now waits it
    /// out before taking the gate: one attempt is enough, and a command written meanwhile does not wait.
    @Test(arguments: [ProjectionReplay.Mode.replace, .verify])
    func aVacuumOfALiveTableIsWaitedOutBeforeTheGate(mode: ProjectionReplay.Mode) async throws {
        let (owner, service, _) = try await notebooks(4)
        defer { owner.shutdown(); service.shutdown() }
        let holder = Task {
            try await service.withConnection { connection in
                try await connection.execute(simple: "BEGIN")
                try await connection.execute(simple: "LOCK TABLE notebooks IN SHARE UPDATE EXCLUSIVE MODE")
                try await Task.sleep(for: .seconds(3))
                try await connection.execute(simple: "COMMIT")
            }
        }
        defer { holder.cancel() }
        func held() async throws -> Bool {
            try await owner.query("""
                SELECT count(*) = 1 AS held FROM pg_locks
                WHERE relation = 'notebooks'::regclass AND mode = 'ShareUpdateExclusiveLock' AND granted
                """)[0].decode("held")
        }
        while try await !held() { try await Task.sleep(for: .milliseconds(10)) }

        let replay = ProjectionReplay(projection: Notebooks.projection, database: owner, configuration: .init(maxSwapAttempts: 1))
        let run = Task { try await replay.run(mode) }
        try await Task.sleep(for: .milliseconds(300)) // the run is at its swap, waiting
        let clock = ContinuousClock()
        let written = clock.now
        try await Notebooks.write("NotebookCreated", .init(title: "while a vacuum runs"), notebook: UUID(), client: service)
        #expect(clock.now - written < .seconds(1), "a command waited for the swap")
        #expect(try await held(), "the vacuum's lock was still held when the command was written")

        let outcome = try await run.value
        try await holder.value
        #expect(outcome.drift.isEmpty)
        if mode == .replace {
            let titles = try await owner.query("SELECT title FROM notebooks ORDER BY title").map { try $0.decode("title", as: String.self) }
            #expect(titles.contains("while a vacuum runs") && titles.count == 5)
        }
    }

    // MARK: Storage parameters and autovacuum

    /// Each table's storage parameters and, prefixed `toast.`, its TOAST table's, sorted.
    private func storageOptions(_ tables: [String], in schema: String, _ client: PostgresClient) async throws -> [String: [String]] {
        let rows = try await client.query("""
            SELECT c.relname AS name,
                   ARRAY(SELECT o FROM unnest(c.reloptions || ARRAY(SELECT 'toast.' || o FROM unnest(t.reloptions) o)) o ORDER BY o)::text AS options
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
            WHERE n.nspname = \(schema) AND c.relname = ANY(\(PostgresArray(tables))::text[])
            """)
        var options: [String: [String]] = [:]
        for row in rows {
            let text: String = try row.decode("options")
            options[try row.decode("name")] = text.trimmingCharacters(in: CharacterSet(charactersIn: "{}")).split(separator: ",").map(String.init)
        }
        return options
    }

    /// The copies fill with autovacuum off, their TOAST tables' too (an autovacuum the load set off held the swap's
    /// locks past its 50 attempts); the swap gives back the live tables' own switches, set or not, and every other
    /// storage parameter, the TOAST table's included, is the live table's throughout.
    @Test func copiesFillWithAutovacuumOffAndTakeTheLiveTablesStorageParametersAtTheSwap() async throws {
        let (owner, service, _) = try await notebooks(3)
        defer { owner.shutdown(); service.shutdown() }
        let tables = Notebooks.projection.tables
        try await owner.withConnection {
            try await $0.execute(simple: """
                ALTER TABLE notebooks SET (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.05, toast.autovacuum_enabled = false);
                ALTER TABLE notebook_marks SET (autovacuum_enabled = false)
                """)
        }
        let before = try await storageOptions(tables, in: "public", owner)
        #expect(before == [
            "notebooks": ["autovacuum_vacuum_scale_factor=0.05", "fillfactor=90", "toast.autovacuum_enabled=false"],
            "notebook_marks": ["autovacuum_enabled=false"],
        ])

        try await owner.withConnection { connection in
            try await ShadowTables.dropLeftovers(on: connection)
            let shadow = try await ShadowTables.locate(tables, on: connection)
            try await shadow.create(on: connection)
            let copies = try await storageOptions(tables, in: ShadowTables.schema, owner)
            #expect(copies == [
                "notebooks": ["autovacuum_enabled=off", "autovacuum_vacuum_scale_factor=0.05", "fillfactor=90", "toast.autovacuum_enabled=off"],
                "notebook_marks": ["autovacuum_enabled=off", "toast.autovacuum_enabled=off"],
            ])
            try await shadow.verifyShapes(on: connection) // the switches aside, built exactly alike
            try await connection.withTransaction { try await shadow.restoreAutovacuum(on: $0) }
            #expect(try await storageOptions(tables, in: ShadowTables.schema, owner) == before)
            try await ShadowTables.dropLeftovers(on: connection)
        }

        _ = try await ProjectionReplay(projection: Notebooks.projection, database: owner).run(.replace)
        #expect(try await storageOptions(tables, in: "public", owner) == before)
        try await owner.withConnection { try await $0.execute(simple: "ALTER TABLE notebooks RESET (toast.autovacuum_enabled)") }
        _ = try await ProjectionReplay(projection: Notebooks.projection, database: owner, configuration: .init(bulkLoad: false)).run(.replace)
        #expect(try await storageOptions(tables, in: "public", owner)["notebooks"] == ["autovacuum_vacuum_scale_factor=0.05", "fillfactor=90"])
    }

    /// A TOAST table's storage parameter the copy lacks is a difference in shape, like any other.
    @Test func aToastStorageParameterTheCopyLacksIsADifferenceInShape() async throws {
        let (owner, service, _) = try await notebooks(1)
        defer { owner.shutdown(); service.shutdown() }
        let tables = Notebooks.projection.tables
        try await owner.withConnection { connection in
            try await ShadowTables.dropLeftovers(on: connection)
            let shadow = try await ShadowTables.locate(tables, on: connection)
            try await shadow.create(on: connection)
            try await connection.execute(simple: "ALTER TABLE notebooks SET (toast.vacuum_truncate = false)")
            await #expect { try await shadow.verifyShapes(on: connection) } throws: { error in
                "\(error)".contains("cannot reproduce table notebooks exactly") && "\(error)".contains("toast.vacuum_truncate=false")
            }
            try await ShadowTables.dropLeftovers(on: connection)
        }
    }

    // MARK: Upcasting

    /// `UserRegistered` as an imagined older build stored it: flat, before personal data
    /// moved into `personal`. The test plays a later build in which today's shape is
    /// schema 2, so events stored at schema 1 are the old ones.
    private struct FlatUserRegistered: EventUpcaster {
        let eventType = "UserRegistered"
        let fromSchema = 1

        func upcast(_ data: Data, metadata: EventMetadata) throws -> Data {
            struct Flat: Decodable { var userId: UUID; var email: String?; var emailVerified: Bool; var name: String? }
            struct Today: Encodable { var userId: UUID; var emailVerified: Bool; var personal: PersonalData }
            let flat = try JSONDecoder().decode(Flat.self, from: data)
            return try JSONEncoder().encode(Today(
                userId: flat.userId, emailVerified: flat.emailVerified, personal: PersonalData(email: flat.email, displayName: flat.name)))
        }
    }

    @Test(arguments: [true, false])
    func replayUpcastsAnOldSchemaEventIntoTodaysReadModel(bulkLoad: Bool) async throws {
        let database = try await TestDatabase.make()
        let owner = database.client(asServiceRole: false, maxConnections: 4)
        defer { owner.shutdown() }
        let store = PostgresEventStore(client: owner)
        let old = UUID(), current = UUID()
        let oldPayload = #"{"userId":"\#(old.uuidString)","email":"Old@Example.com","emailVerified":true,"name":"Old Timer"}"#
        try await store.append(
            [NewEvent(type: "UserRegistered", schema: 1, data: Data(oldPayload.utf8), userId: old)],
            to: .user(old), expected: .noStream, metadata: EventMetadata())
        let todayPayload = #"{"userId":"\#(current.uuidString)","emailVerified":false,"personal":{"email":"new@example.com","displayName":"New"}}"#
        try await store.append(
            [NewEvent(type: "UserRegistered", schema: 2, data: Data(todayPayload.utf8), userId: current)],
            to: .user(current), expected: .noStream, metadata: EventMetadata())

        // Without the upcaster the old payload does not decode, and nothing changes.
        let configuration = ProjectionReplay.Configuration(bulkLoad: bulkLoad)
        await #expect(throws: DecodingError.self) {
            try await ProjectionReplay(projection: .accounts, database: owner, configuration: configuration).run(.replace)
        }
        #expect(try await owner.query("SELECT count(*) AS n FROM users")[0].decode("n", as: Int.self) == 0)

        var upcasting = Projection.accounts
        upcasting.upcasters = UpcasterChain([FlatUserRegistered()])
        let outcome = try await ProjectionReplay(projection: upcasting, database: owner, configuration: configuration).run(.replace)
        #expect(bulkLoad || outcome.bulkEvents == 0, "off, every event goes through the statements")

        let seal = try await owner.readModelSeal()
        let users = try await owner.query("""
            SELECT id, email, email_normalized, email_verified, display_name, version FROM users ORDER BY id = \(old)
            """)
        #expect(users.count == 2)
        #expect(try users[1].decode("id", as: UUID.self) == old)
        #expect(try users[1].decode("email", openedWith: seal) == "Old@Example.com")
        #expect(try users[1].decode("email_normalized", openedWith: seal) == "old@example.com")
        #expect(try users[1].decode("email_verified", as: Bool.self))
        #expect(try users[1].decode("display_name", openedWith: seal) == "Old Timer")
        #expect(try users[1].decode("version", as: Int.self) == 1)
        #expect(try users[0].decode("display_name", openedWith: seal) == "New")
        #expect(try users[0].decode("display_name", as: String?.self) != "New", "sealed in the table")
    }
}
