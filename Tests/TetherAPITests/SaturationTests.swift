import Foundation
import Synchronization
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

/// The database pool exhausted from outside: requests are answered 503 while the holder still holds,
/// within their deadline, and nothing of theirs is written.
@Suite("Saturation: a held lock exhausts the pool")
struct SaturationTests {
    @Test func requestsBehindAHeldLockGet503WhileItIsHeldAndWriteNothing() async throws {
        try await DevService.run(settings: ["TETHER_DATABASE_STATEMENT_TIMEOUT": "2s"]) { app in
            let ada = try await app.signedIn(try await app.apple("apple-saturated"))
            var credentials: [Credential] = []
            for _ in 0..<24 { credentials.append(try await app.apple("apple-saturated")) }
            let before = try await app.eventCount("SignedIn", userId: ada.user.id)

            // An operator's transaction holds the identities table: every sign-in's first statement waits on it,
            // more sign-ins than the pool has connections (16) arrive, and the rest wait for a connection.
            let released = Mutex(false)
            let holder = Task {
                try await app.admin.withTransaction { connection in
                    try await connection.execute(simple: "LOCK TABLE identities IN ACCESS EXCLUSIVE MODE")
                    while !released.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(20)) }
                }
            }
            try await Task.sleep(for: .milliseconds(200))
            let started = ContinuousClock.now
            let answers = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                for credential in credentials {
                    group.addTask {
                        let response = try await app.withNewClient { try await app.signIn(credential, on: $0) }
                        return (response.status, response.headers["Retry-After"])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let waited = ContinuousClock.now - started
            let stillHeld = !released.withLock { $0 }
            released.withLock { $0 = true }
            try await holder.value
            #expect(stillHeld, "every request was answered while the lock was still held")
            #expect(answers.allSatisfy { $0.0 == 503 && $0.1 != nil }, "\(answers.map(\.0))")
            #expect(waited < .seconds(30), "within the request deadline: \(waited)")
            #expect(try await app.eventCount("SignedIn", userId: ada.user.id) == before, "none of them wrote anything")
            // Once the lock goes, sign-ins work again.
            #expect(try await app.signIn(try await app.apple("apple-saturated")).status == 200)
        }
    }
}
