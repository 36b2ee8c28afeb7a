import Foundation
import Testing
@testable import TetherPostgres
import TetherTesting

@Suite("PostgresClient against a real server")
struct PostgresClientTests {
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
