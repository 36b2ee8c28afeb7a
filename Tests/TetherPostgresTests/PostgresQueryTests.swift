import Foundation
import Testing
@testable import TetherPostgres
import TetherTesting

@Suite("PostgresQuery")
struct PostgresQueryTests {
    @Test func interpolatedValuesBecomeNumberedParameters() {
        let stream = "user-1'; DROP TABLE events; --"
        let query: PostgresQuery = "SELECT * FROM events WHERE stream = \(stream) AND version > \(3)"
        #expect(query.sql == "SELECT * FROM events WHERE stream = $1 AND version > $2")
        #expect(query.parameters == [.text(stream), .text("3")])
    }

    @Test func unsafeSQLIsSplicedVerbatimAndBindsNothing() {
        let query: PostgresQuery = "SELECT \(unsafeSQL: "position, tx") FROM events WHERE user_id = \(UUID?.none)"
        #expect(query.sql == "SELECT position, tx FROM events WHERE user_id = $1")
        #expect(query.parameters == [.null])
    }

    @Test func nestedQueriesAreRenumberedOutsideQuotes() {
        let inner: PostgresQuery = "version = \(7) AND type <> '$1'"
        let outer: PostgresQuery = "SELECT 1 WHERE stream = \("s") AND \(inner)"
        #expect(outer.sql == "SELECT 1 WHERE stream = $1 AND version = $2 AND type <> '$1'")
        #expect(outer.parameters == [.text("s"), .text("7")])
    }

    @Test func appendingQueriesKeepsPlaceholdersInOrder() {
        var query: PostgresQuery = "INSERT INTO t VALUES (\(1))"
        query.append(", (\(2))")
        query.append(", (\(3))")
        #expect(query.sql == "INSERT INTO t VALUES ($1), ($2), ($3)")
        #expect(query.parameters.count == 3)
    }

    @Test func renumberingShiftsManyDigitPlaceholdersAndKeepsQuotedAndWideText() {
        var query: PostgresQuery = "SELECT \(1), \(2), \(3), \(4), \(5), \(6), \(7), \(8), \(9), \(10) FROM t"
        query.append(" WHERE note = 'Zoë $1 ☃' AND \"col$2\" = \("x") AND name = \("é") AND n IN ($1, $2)")
        #expect(query.sql == """
            SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 FROM t WHERE note = 'Zoë $1 ☃' AND "col$2" = $11 AND name = $12 AND n IN ($11, $12)
            """)
        #expect(query.parameters.count == 12)
        #expect(query.parameters.suffix(2) == [.text("x"), .text("é")])
    }

    /// Array literals as the Foundation-escaped form made them, and as PostgreSQL reads them back.
    @Test func arrayLiteralsEscapeQuotesAndBackslashesAndReadBackWhole() async throws {
        let elements = ["", "plain", #"a"b"#, #"back\slash"#, #"\""#, "ünï ☃ 𝄞", "{,}", "NULL", "  spaced  ", "'single'"]
        let literal = PostgresArray(elements).literal
        let foundationForm = "{" + elements.map {
            "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }.joined(separator: ",") + "}"
        #expect(literal == foundationForm)
        #expect(PostgresArray([String]()).literal == "{}")

        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 1)
        defer { client.shutdown() }
        let rows = try await client.query(
            "SELECT ordinality::int AS i, e FROM unnest(\(PostgresArray(elements))::text[]) WITH ORDINALITY AS t(e, ordinality) ORDER BY 1")
        #expect(try rows.map { try $0.decode("e", as: String.self) } == elements)
        try await database.drop()
    }

    @Test(arguments: [
        ("2026-11-29 13:29:45.123456+00", 1_795_958_985.123456),
        ("1970-01-01 00:00:00+00", 0.0),
        ("2000-02-29 23:59:59.5+02", 951_861_599.5),
        ("1969-12-31 23:59:59+00", -1.0),
    ])
    func timestampsParseInUTC(text: String, seconds: Double) throws {
        let date = try #require(PostgresTimestamp.parse(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_001)
    }

    @Test func timestampsFormatAndParseBack() throws {
        for seconds in [0.0, 1_795_958_985.123456, -86_400.25, 4_102_444_800.000001] {
            let date = Date(timeIntervalSince1970: seconds)
            let parsed = try #require(PostgresTimestamp.parse(PostgresTimestamp.format(date)))
            #expect(abs(parsed.timeIntervalSince1970 - seconds) < 0.000_001)
        }
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 1_795_958_985.5)) == "2026-11-29 13:29:45.500000+00")
    }

    @Test func malformedTimestampsAreRejected() {
        #expect(PostgresTimestamp.parse("2026-13-01 00:00:00+00") == nil)
        #expect(PostgresTimestamp.parse("yesterday") == nil)
        #expect(PostgresTimestamp.parse("2026-11-29 13:29:45+00 trailing") == nil)
    }
}

@Suite("Writes combined into one statement")
struct CombiningWritesTests {
    @Test func writesToDistinctTablesBecomeOneStatementWithTheirParametersInOrder() {
        let statements: [PostgresQuery] = [
            "INSERT INTO events (stream, version) VALUES (\("user-a"), \(1)), (\("user-a"), \(2))",
            "UPDATE users SET last_sign_in_at = now(), version = \(2) WHERE id = \("a")",
            "INSERT INTO sessions (id) VALUES (\("s"))",
            "COMMIT",
        ]
        let combined = PostgresQuery.combiningWrites(statements)
        #expect(combined.count == 2)
        #expect(combined[0].sql == """
            WITH w0 AS (INSERT INTO events (stream, version) VALUES ($1, $2), ($3, $4)), \
            w1 AS (UPDATE users SET last_sign_in_at = now(), version = $5 WHERE id = $6) INSERT INTO sessions (id) VALUES ($7)
            """)
        #expect(combined[0].parameters == [.text("user-a"), .text("1"), .text("user-a"), .text("2"), .text("2"), .text("a"), .text("s")])
        #expect(combined[1].sql == "COMMIT")
    }

    @Test func aSecondWriteToOneTableStartsANewStatement() {
        // One statement's parts do not see each other's rows: the update must see the insert.
        let statements: [PostgresQuery] = [
            "INSERT INTO users (id) VALUES (\("a"))",
            "INSERT INTO identities (user_id) VALUES (\("a"))",
            "UPDATE users SET display_name = \("Ada") WHERE id = \("a")",
            "SELECT 1",
            "DELETE FROM sms_sends WHERE user_id = \("a")",
        ]
        let combined = PostgresQuery.combiningWrites(statements)
        #expect(combined.map(\.sql) == [
            "WITH w0 AS (INSERT INTO users (id) VALUES ($1)) INSERT INTO identities (user_id) VALUES ($2)",
            "UPDATE users SET display_name = $1 WHERE id = $2",
            "SELECT 1",
            "DELETE FROM sms_sends WHERE user_id = $1",
        ])
    }

    @Test(arguments: [
        ("INSERT INTO events (stream) VALUES ($1)", "events"),
        ("insert into events(stream) VALUES ($1)", "events"),
        ("  DELETE\nFROM\tsms_sends WHERE user_id = $1", "sms_sends"),
        ("Update users SET version = 2", "users"),
        ("UPDATE", nil),
        ("INSERT INTO", nil),
        ("INSERT users VALUES (1)", nil),
        ("DELETE INTO users", nil),
        ("INSERTS INTO users VALUES (1)", nil),
        ("WITH w0 AS (INSERT INTO users (id) VALUES ($1)) SELECT 1", nil),
        ("SELECT * FROM users", nil),
        ("", nil),
    ] as [(String, String?)])
    func theTableAWriteWritesIsItsThirdWordOrSecondForAnUpdate(sql: String, table: String?) {
        #expect(PostgresQuery.writtenTable(of: sql).map(String.init) == table)
    }
}
