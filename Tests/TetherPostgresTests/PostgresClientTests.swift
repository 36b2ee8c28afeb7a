import Foundation
import Synchronization
import Testing
@testable import TetherPostgres
import TetherTesting

@Suite("PostgresClient against a real server")
struct PostgresClientTests {
    /// A connection string in an error or a log line never shows a password, in any of the forms libpq takes,
    /// nor when it does not parse as a URL (a bad port, an unclosed bracket).
    @Test(arguments: [
        ("postgresql://tether:TopSecret1@db.example:5432/tether", "postgresql://tether:***@db.example:5432/tether"),
        ("postgresql://postgres@127.0.0.1:1/tether?password=TopSecret1", "postgresql://postgres@127.0.0.1:1/tether?password=***"),
        ("postgresql://u@h/db?sslmode=require&PASSWORD=TopSecret1&x=1", "postgresql://u@h/db?sslmode=require&PASSWORD=***&x=1"),
        ("postgresql://postgres:TopSecret1@127.0.0.1:abc/tether", "postgresql://postgres:***@127.0.0.1:abc/tether"),
        ("postgresql://postgres:TopSecret1@[::1/tether", "postgresql://postgres:***@[::1/tether"),
        ("host=db user=tether password='Top Secret1' dbname=tether", "host=db user=tether password=*** dbname=tether"),
        ("host=db password = TopSecret1 dbname=tether", "host=db password = *** dbname=tether"),
        ("postgresql://postgres@127.0.0.1:5432/tether", "postgresql://postgres@127.0.0.1:5432/tether"),
        ("postgresql://db.example:5432/tether?user=t&password=p@ss@wordSecret", "postgresql://db.example:5432/tether?user=t&password=***"),
        ("postgresql://tether:p@ssSecret@db.example/tether", "postgresql://tether:***@db.example/tether"),
        ("host=db password=Top&Secret1 dbname=x", "host=db password=*** dbname=x"),
        (#"host=db password=abc\ TailSecret dbname=x"#, "host=db password=*** dbname=x"),
    ])
    func aShownConnectionStringHoldsNoPassword(_ url: String, _ shown: String) {
        #expect(PostgresConnection.redacted(url) == shown)
        #expect(!PostgresConnection.redacted(url).contains("Secret"))
    }

    @Test func everySupportedTypeRoundTrips() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false)
        defer { client.shutdown() }
        let id = UUID()
        let when = Date(timeIntervalSince1970: 1_795_958_985.123456)
        let bytes: [UInt8] = [0, 1, 0x7f, 0x80, 0xff]
        let json = try PostgresJSON(encoding: ["name": "Zoë", "quote": "\"'"])
        let rows = try await client.query("""
            SELECT \(String?("text ✓"))::text AS text, \(Int32(-42))::int AS int, \(Int64.max)::bigint AS big,
                   \(true)::bool AS yes, \(false)::bool AS no, \(id)::uuid AS id, \(when)::timestamptz AS at,
                   \(json)::jsonb AS doc, \(bytes)::bytea AS raw, pg_current_xact_id() AS tx, NULL::text AS nothing
            """)
        let row = try #require(rows.first)
        #expect(try row.decode("text", as: String.self) == "text ✓")
        #expect(try row.decode("int", as: Int32.self) == -42)
        #expect(try row.decode("big", as: Int64.self) == .max)
        #expect(try row.decode("yes", as: Bool.self) == true)
        #expect(try row.decode("no", as: Bool.self) == false)
        #expect(try row.decode("id", as: UUID.self) == id)
        #expect(try row.decode("at", as: Date.self).timeIntervalSince1970 == when.timeIntervalSince1970)
        #expect(try row.decode("doc", as: PostgresJSON.self).decode([String: String].self) == ["name": "Zoë", "quote": "\"'"])
        #expect(try row.decode("raw", as: [UInt8].self) == bytes)
        #expect(try row.decode("tx", as: UInt64.self) > 0)
        #expect(try row.decode("nothing", as: String?.self) == nil)
        #expect(throws: PostgresError.self) { try row.decode("nothing", as: String.self) }
        #expect(throws: PostgresError.self) { try row.decode("no such column", as: String.self) }
    }

    /// Parameters side by side in one statement, sent unnamed and then prepared: NULL, empty and long texts
    /// (past any stack allocation), empty and binary byte strings each arrive as themselves.
    @Test func parametersOfEveryKindArriveAsThemselvesSideBySide() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false, maxConnections: 1)
        defer { client.shutdown() }
        let long = String(repeating: "Zoë ✓ ", count: 2_000)
        let bytes: [UInt8] = [0, 0xff, 0, 1]
        for _ in 0..<3 {
            let row = try #require(try await client.query("""
                SELECT \(String?.none)::text AS nothing, \("")::text AS empty, \(long)::text AS long, \([UInt8]())::bytea AS none,
                       \(bytes)::bytea AS raw, \("après")::text AS after
                """).first)
            #expect(try row.decode("nothing", as: String?.self) == nil)
            #expect(try row.decode("empty", as: String.self) == "")
            #expect(try row.decode("long", as: String.self) == long)
            #expect(try row.decode("none", as: [UInt8].self) == [])
            #expect(try row.decode("raw", as: [UInt8].self) == bytes)
            #expect(try row.decode("after", as: String.self) == "après")
        }
    }

    /// Cells are read from libpq's result where it put them: NULL and empty cells side by side, first and
    /// last in a row and across rows, each read back as itself; numbers, ids, times and JSON read from the
    /// bytes answer as their `String` parsers would, refusals included.
    @Test func cellsReadBackExactlyFromLibpqsResult() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false)
        defer { client.shutdown() }
        let rows = try await client.query("""
            SELECT * FROM (VALUES
                (NULL::text, ''::text, NULL::text, 'é'::text, ''::text),
                ('', NULL, 'last', NULL, NULL),
                (NULL, NULL, NULL, NULL, '')) AS v(a, b, c, d, e)
            """)
        let cells = try rows.map { row in try ["a", "b", "c", "d", "e"].map { try row.decode($0, as: String?.self) } }
        #expect(cells == [[nil, "", nil, "é", ""], ["", nil, "last", nil, nil], [nil, nil, nil, nil, ""]])

        let id = UUID()
        let numbers = try #require(try await client.query("""
            SELECT '-9223372036854775808'::int8 AS min, '9223372036854775807'::int8 AS max, '-2147483648'::int4 AS min32,
                   '18446744073709551615' AS umax, '18446744073709551616' AS past, '12a' AS junk, '-' AS sign, '' AS empty,
                   \(id)::uuid AS id, 'not-a-uuid' AS badid, '2026-12-04 05:17:08.123456+00'::timestamptz AS at,
                   '{"b": [1, "x"], "a": null}'::jsonb AS doc, NULL::jsonb AS nodoc
            """).first)
        #expect(try numbers.decode("min", as: Int64.self) == .min)
        #expect(try numbers.decode("max", as: Int64.self) == .max)
        #expect(try numbers.decode("max", as: Int.self) == .max)
        #expect(try numbers.decode("min32", as: Int32.self) == .min)
        #expect(try numbers.decode("umax", as: UInt64.self) == .max)
        for (column, type) in [("past", UInt64.self), ("junk", UInt64.self), ("sign", UInt64.self), ("empty", UInt64.self)] as [(String, UInt64.Type)] {
            #expect(throws: PostgresError.self, "\(column)") { try numbers.decode(column, as: type) }
        }
        #expect(throws: PostgresError.self) { try numbers.decode("max", as: Int32.self) }
        #expect(throws: PostgresError.self) { try numbers.decode("min", as: UInt64.self) }
        #expect(try numbers.decode("id", as: UUID.self) == id)
        #expect(throws: PostgresError.self) { try numbers.decode("badid", as: UUID.self) }
        #expect(try numbers.decode("at", as: Date.self) == Date(timeIntervalSince1970: 1_796_361_428.123456))
        #expect(try numbers.decode("doc", as: PostgresJSON.self).data == Data(#"{"a": null, "b": [1, "x"]}"#.utf8))
        #expect(try numbers.decode("nodoc", as: PostgresJSON?.self) == nil)
    }

    /// A column is found by its name whether the names are scanned (a result of up to 16 columns) or hashed
    /// (a wider one): a name given twice is its first column, and a name not there is an error that says so.
    @Test(arguments: [1, 14, 15, 40])
    func columnsAreFoundByNameTheFirstOfANameGivenTwice(count: Int) async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false)
        defer { client.shutdown() }
        let list = (0..<count).map { "\($0) AS c\($0)" } + ["-1 AS c0", "'Zz' AS \"C0\""]
        let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT " + list.joined(separator: ", ")))
        #expect((PostgresRows.index(of: rows.columns) == nil) == (count + 2 <= PostgresRows.scannedColumns))
        let row = try #require(rows.first)
        for column in 0..<count {
            #expect(try row.decode("c\(column)", as: Int.self) == column)
        }
        #expect(try row.decode("C0", as: String.self) == "Zz")
        #expect(rows.column(named: "c0") == 0)
        #expect(rows.column(named: "C0") == count + 1)
        #expect { try row.decode("c\(count)", as: Int.self) } throws: { "\($0)".contains("no column \"c\(count)\"") }
    }

    /// The race of the pool's waiters, forced: the only connection comes back after an acquirer found
    /// the pool full but before it registered as a waiter. It must still get that connection, at once,
    /// rather than sleep until another release or its timeout (a 503 for the request waiting on it).
    @Test func aConnectionReleasedWhileAnAcquirerPreparesToWaitReachesThatAcquirer() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let (holding, isHolding) = AsyncStream<Void>.makeStream()
        let (inGap, isInGap) = AsyncStream<Void>.makeStream()
        let (released, isReleased) = AsyncStream<Void>.makeStream()
        let configuration = PostgresClient.Configuration(
            url: database.url, maxConnections: 1, acquireTimeout: .seconds(5))
        let client = PostgresClient(configuration: configuration, beforeWaiting: {
            isInGap.yield()
            for await _ in released { break }
        })
        defer { client.shutdown() }
        let holder = Task {
            try await client.withConnection { _ in
                isHolding.yield()
                for await _ in inGap { break }
            }
            isReleased.yield()
        }
        for await _ in holding { break }
        let rows = try await client.query("SELECT 1 AS one")
        #expect(try rows[0].decode("one", as: Int.self) == 1)
        try await holder.value
    }

    /// A statement seen twice on a connection is prepared there; later uses run it without parsing it again.
    @Test func aRepeatedStatementIsPreparedOnceAndStaysCorrect() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false, maxConnections: 1)
        defer { client.shutdown() }
        try await client.query("CREATE TABLE notes (id int PRIMARY KEY, body text, raw bytea)")
        try await client.withConnection { connection in
            for id in 1...4 {
                try await connection.query("INSERT INTO notes VALUES (\(id), \("note \(id)"), \([UInt8(id), 0]))")
            }
            let prepared = try await connection.query("""
                SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE 'INSERT INTO notes%'
                """)
            #expect(try prepared[0].decode("n", as: Int.self) == 1, "one statement prepared for the four inserts")
            // A failing use leaves it usable (statements outlive the transaction that failed).
            await #expect(throws: PostgresError.self) {
                try await connection.query("INSERT INTO notes VALUES (\(1), \("again"), \([UInt8(9)]))")
            }
            try await connection.query("INSERT INTO notes VALUES (\(5), \("note 5"), \([UInt8(5), 0]))")
            // A table replaced under it (as tether replay swaps read models) is planned anew.
            try await connection.execute(simple: """
                CREATE TABLE notes_new (id int PRIMARY KEY, body text, raw bytea);
                INSERT INTO notes_new SELECT * FROM notes; DROP TABLE notes; ALTER TABLE notes_new RENAME TO notes
                """)
            try await connection.query("INSERT INTO notes VALUES (\(6), \("note 6"), \([UInt8(6), 0]))")
        }
        let rows = try await client.query("SELECT id, body, raw FROM notes ORDER BY id")
        #expect(try rows.map { try $0.decode("id", as: Int.self) } == [1, 2, 3, 4, 5, 6])
        #expect(try rows[5].decode("raw", as: [UInt8].self) == [6, 0])
    }

    /// One text, parameters of other kinds: each kind is prepared apart and answered as itself, including a
    /// binary parameter past the 64th (the key's bit mask ends there).
    @Test func statementsAlikeButForTheirParametersKindsArePreparedApart() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false, maxConnections: 1)
        defer { client.shutdown() }
        let count = 70
        func typesOf(binaryAt binary: Int?) -> PostgresQuery {
            var text = PostgresQuery.StringInterpolation(literalCapacity: 40 * count, interpolationCount: count)
            text.appendLiteral("SELECT concat_ws(','")
            for index in 0..<count {
                text.appendLiteral(", pg_typeof(")
                if index == binary { text.appendInterpolation([UInt8]([7])) } else { text.appendInterpolation("7") }
                text.appendLiteral(" || '')") // an untyped parameter resolves to text here, a binary one is bytea
            }
            text.appendLiteral(") AS types")
            return PostgresQuery(stringInterpolation: text)
        }
        func expected(binaryAt binary: Int?) -> String {
            (0..<count).map { $0 == binary ? "bytea" : "text" }.joined(separator: ",")
        }
        try await client.withConnection { connection in
            for _ in 0..<3 {
                for binary in [nil, 3, 66, 69] {
                    let rows = try await connection.query(typesOf(binaryAt: binary))
                    #expect(try rows[0].decode("types", as: String.self) == expected(binaryAt: binary), "binary at \(String(describing: binary))")
                }
            }
            let prepared = try await connection.query("""
                SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE 'SELECT concat_ws(%'
                """)
            #expect(try prepared[0].decode("n", as: Int.self) == 4, "one prepared statement for each kind")
        }
    }

    @Test func injectionAttemptsStayValues() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false)
        defer { client.shutdown() }
        let hostile = "x'); DROP TABLE pg_class; --"
        let rows = try await client.query("SELECT \(hostile)::text AS value")
        #expect(try rows[0].decode("value", as: String.self) == hostile)
    }

    @Test func aTransactionThatThrowsIsRolledBack() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false)
        defer { client.shutdown() }
        try await client.query("CREATE TABLE notes (body text)")
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await client.withTransaction { connection in
                try await connection.query("INSERT INTO notes VALUES (\("lost"))")
                throw Abort()
            }
        }
        try await client.withTransaction { connection in
            try await connection.query("INSERT INTO notes VALUES (\("kept"))")
        }
        let rows = try await client.query("SELECT body FROM notes")
        #expect(try rows.map { try $0.decode("body", as: String.self) } == ["kept"])
    }

    /// A transaction job whose task is cancelled while its commit waits behind a lock is stopped then: it throws at
    /// once, and nothing it wrote commits when the lock goes. The HTTP server cancels a handler it answers 503 at its
    /// deadline or at the shutdown's, so that answer is not followed by a commit. The connection is fine afterwards,
    /// and work the cancelled task starts later (a cleanup) runs.
    @Test func aJobCancelledWhileItsCommitWaitsCommitsNothing() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(asServiceRole: false, maxConnections: 1)
        let holder = database.client(asServiceRole: false, maxConnections: 1)
        defer {
            client.shutdown()
            holder.shutdown()
        }
        try await client.query("CREATE TABLE notes (body text)")
        try await client.query("CREATE TABLE gate (id int)")
        let (locked, lockedNow) = AsyncStream<Void>.makeStream()
        let holding = Task {
            try await holder.withTransaction { connection in
                try await connection.query("LOCK TABLE gate IN ACCESS EXCLUSIVE MODE")
                lockedNow.yield()
                try await Task.sleep(for: .seconds(3))  // without the cancel, the writer waits this long, then commits
            }
        }
        for await _ in locked { break }
        let backend = Mutex<Int32?>(nil)
        let writer = Task {
            try await client.withTransactionJob { job in
                let rows = try job.begin(["INSERT INTO notes VALUES ('lost')", "SELECT pg_backend_pid() AS pid"])
                backend.withLock { $0 = try? rows[1][0].decode("pid", as: Int32.self) }
                try job.commit(["SELECT count(*) AS n FROM gate"])
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let cancelled = ContinuousClock.now
        writer.cancel()
        let outcome = await writer.result
        let stopped = ContinuousClock.now - cancelled
        try await holding.value
        #expect((try? outcome.get()) == nil, "the cancelled job finished")
        #expect(stopped < .seconds(2), "stopped \(stopped) after its cancellation")
        #expect(try await client.query("SELECT count(*)::int AS n FROM notes")[0].decode("n", as: Int.self) == 0)
        #expect(backend.withLock { $0 } != nil)
        // A cancelled task's later statements run whole (a cleanup), on the same connection, with nothing cancelled in them.
        let cleanup = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await client.query("INSERT INTO notes VALUES ('cleanup')")
            try await client.query("SELECT pg_sleep(0.2)")
            return try await client.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int32.self)
        }
        #expect(try await cleanup.value == backend.withLock { $0 }, "the pool kept the connection")
        #expect(try await client.query("SELECT body FROM notes").map { try $0.decode("body", as: String.self) } == ["cleanup"])
    }

    /// A task cancelled before its transaction (a request answered 503 while it still verified a token or hashed a
    /// password) begins none, in either form; its plain statements, such as giving a nonce back, still run.
    @Test func aTransactionOfACancelledTaskNeverBegins() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(asServiceRole: false, maxConnections: 1)
        defer { client.shutdown() }
        try await client.query("CREATE TABLE notes (body text)")
        let outcomes = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            let job = await Result { try await client.withTransactionJob { try $0.runAlone(["INSERT INTO notes VALUES ('job')"]) } }
            let begun = await Result { try await client.withTransactionJob { try $0.begin(["INSERT INTO notes VALUES ('begun')"]) } }
            let body = await Result { try await client.withTransaction { try await $0.query("INSERT INTO notes VALUES ('body')") } }
            let plain = await Result { try await client.query("INSERT INTO notes VALUES ('plain')") }
            return [job.isCancellation, begun.isCancellation, body.isCancellation, (try? plain.get()) != nil]
        }.value
        #expect(outcomes == [true, true, true, true])
        #expect(try await client.query("SELECT body FROM notes").map { try $0.decode("body", as: String.self) } == ["plain"])
        #expect(try await client.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'")[0]
            .decode("n", as: Int.self) == 0)
    }

    /// A task cancelled between its transaction's statements (no statement running for the server to stop) does
    /// not commit: the job's next step and the transaction's `COMMIT` are refused, and what it wrote is rolled back.
    @Test func aTransactionCancelledBetweenItsStatementsCommitsNothing() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(asServiceRole: false, maxConnections: 1)
        defer { client.shutdown() }
        try await client.query("CREATE TABLE notes (body text)")
        // A job: begun with its first write, then held on its queue until the task is cancelled.
        let (begun, begunNow) = AsyncStream<Void>.makeStream()
        let resume = DispatchSemaphore(value: 0)
        let job = Task {
            try await client.withTransactionJob { transaction in
                try transaction.begin(["INSERT INTO notes VALUES ('job')"])
                begunNow.yield()
                resume.wait()
                try transaction.commit(["INSERT INTO notes VALUES ('job, later')"])
            }
        }
        for await _ in begun { break }
        job.cancel()
        resume.signal()
        #expect(await job.result.isCancellation)
        // The same with the transaction's statements sent one by one from the task.
        let (written, writtenNow) = AsyncStream<Void>.makeStream()
        let (cancelled, cancelledNow) = AsyncStream<Void>.makeStream()
        let statements = Task {
            try await client.withTransaction { connection in
                try await connection.query("INSERT INTO notes VALUES ('statements')")
                writtenNow.yield()
                for await _ in cancelled { break }
            }
        }
        for await _ in written { break }
        statements.cancel()
        cancelledNow.yield()
        #expect(await statements.result.isCancellation)
        #expect(try await client.query("SELECT count(*)::int AS n FROM notes")[0].decode("n", as: Int.self) == 0)
        #expect(try await client.withTransaction { try await $0.query("SELECT 1 AS one")[0].decode("one", as: Int.self) } == 1)
    }

    @Test func serverErrorsCarrySQLStateAndConstraint() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false)
        defer { client.shutdown() }
        try await client.query("CREATE TABLE things (name text CONSTRAINT things_name_key UNIQUE)")
        try await client.query("INSERT INTO things VALUES (\("a"))")
        let error = await #expect(throws: PostgresError.self) {
            try await client.query("INSERT INTO things VALUES (\("a"))")
        }
        #expect(error?.isUniqueViolation == true)
        #expect(error?.constraint == "things_name_key")
        #expect(error?.isUnavailable == false)
        // The connection survives a statement error.
        #expect(try await client.query("SELECT 1 AS one")[0].decode("one", as: Int.self) == 1)
    }

    @Test func thePoolNeverOpensMoreThanItsLimit() async throws {
        let database = try await TestDatabase.make(migrated: false)
        let client = database.client(asServiceRole: false, maxConnections: 2)
        defer { client.shutdown() }
        let pids = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<12 {
                group.addTask {
                    try await client.query("SELECT pg_backend_pid() AS pid, pg_sleep(0.02)")[0].decode("pid", as: Int.self)
                }
            }
            var pids = Set<Int>()
            for try await pid in group { pids.insert(pid) }
            return pids
        }
        #expect(pids.count >= 1 && pids.count <= 2)
    }

    @Test func waitingForAConnectionTimesOutClearly() async throws {
        let database = try await TestDatabase.make(migrated: false)
        var configuration = database.configuration(asServiceRole: false, maxConnections: 1)
        configuration.acquireTimeout = .milliseconds(100)
        let client = PostgresClient(configuration: configuration)
        defer { client.shutdown() }
        let holder = Task { try await client.query("SELECT pg_sleep(1)") }
        try await Task.sleep(for: .milliseconds(100))
        let error = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
        #expect(error?.isUnavailable == true)
        #expect(error?.message.contains("no PostgreSQL connection became free") == true)
        _ = try await holder.value
    }

    @Test func anUnreachableServerGivesAClearMessage() async throws {
        let port = try LocalPostgresServer.freeLoopbackPort()
        let client = PostgresClient(configuration: .init(
            url: "postgresql://tether:secret@127.0.0.1:\(port)/tether", connectTimeoutSeconds: 2))
        defer { client.shutdown() }
        let error = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
        let message = try #require(error?.message)
        #expect(message.contains("could not connect to PostgreSQL at"))
        #expect(message.contains("127.0.0.1:\(port)"))
        #expect(!message.contains("secret"))
        #expect(error?.isUnavailable == true)
    }
}

extension Result {
    /// Whether it failed with `CancellationError`.
    fileprivate var isCancellation: Bool {
        if case .failure(let error) = self { error is CancellationError } else { false }
    }
}

extension Result where Failure == any Error {
    /// The outcome of `body`, thrown errors included.
    fileprivate init(_ body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
