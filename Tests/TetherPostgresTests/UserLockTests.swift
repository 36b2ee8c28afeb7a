import Foundation
import Testing
import TetherCore
import TetherPostgres
import TetherTesting

/// Every event about a user is written under that user's stream lock, wherever its stream is, so a
/// user's events become visible in position order (history pages by position never pass one).
@Suite("Events about a user wait for the user's lock")
struct UserLockTests {
    @Test func anAdminRecordAboutAUserWaitsForTheUsersCommandInFlight() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 4)
        defer { client.shutdown() }
        let store = PostgresEventStore(client: client)
        let user = UUID()
        let (held, holding) = AsyncStream.makeStream(of: Void.self)
        let (release, releasing) = AsyncStream.makeStream(of: Void.self)
        // A command of the user, in flight: it holds the user's lock until released.
        let command = Task {
            try await client.withTransaction { connection in
                try await connection.query(PostgresEventStore.streamLockStatement(.user(user)))
                holding.yield()
                for await _ in release { break }
            }
        }
        for await _ in held { break }
        let record = NewEvent(type: "AdminUserViewed", data: Data(#"{"status":200}"#.utf8), userId: user)
        let appending = Task {
            try await store.appendAtEnd([record], to: .adminKey(UUID()), metadata: EventMetadata(surface: "admin"))
        }
        func visible() async throws -> Int {
            try await client.query("SELECT count(*)::int AS n FROM events WHERE user_id = \(user)")[0].decode("n")
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await visible() == 0, "the record waits while the user's command holds the lock")
        releasing.yield()
        try await command.value
        try await appending.value
        #expect(try await visible() == 1)
        // A list of no events is a caller's mistake, refused; only a decision of none commits without writing.
        await #expect(throws: AppendAtEndError.self) {
            try await store.appendAtEnd([], to: .adminKey(UUID()), metadata: EventMetadata(surface: "admin"))
        }
        let decidedNothing: Int = try await store.appendAtEnd(to: .adminKey(UUID()), about: user, metadata: EventMetadata(surface: "admin")) { _ in
            ([], 7)
        }
        #expect(decidedNothing == 7)
        #expect(try await visible() == 1)
    }

    @Test func theLocksAreTheStreamsThenEachOtherUsersInIdOrder() {
        let (first, second) = (UUID(), UUID())
        let events = [second, first, second].map { NewEvent(type: "X", data: Data("{}".utf8), userId: $0) }
        let key = StreamName.adminKey(UUID())
        let ordered = [first, second].sorted { $0.uuidString.lowercased() < $1.uuidString.lowercased() }
        let locks = PostgresEventStore.lockStatements(for: key, events: events)
        let expected = ([key] + ordered.map(StreamName.user)).map(PostgresEventStore.streamLockStatement)
        #expect(locks.map(\.sql) == expected.map(\.sql))
        #expect(locks.map(\.parameters) == expected.map(\.parameters))
        // A user's own stream is locked once.
        #expect(PostgresEventStore.lockStatements(for: .user(first), events: [events[1]]).count == 1)
    }
}
