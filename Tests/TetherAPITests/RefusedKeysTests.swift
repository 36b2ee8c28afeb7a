import Foundation
import Testing
@testable import TetherAPI
import TetherCore
import TetherTesting

/// An instance answers a refused address's provider attempts 429 before verifying them, until the refusal's
/// `Retry-After` is over, and not a moment longer: each such answer noted the key again with the time left
/// rounded up, so an address that kept trying more than once a second stayed refused for as long as it tried.
@Suite("Sign-in limits: the addresses an instance refused lately")
struct RefusedKeysTests {
    @Test func aRefusedAddressIsFreeOnceItsRetryAfterIsOverWhileItKeepsTrying() async throws {
        let database = try await TestDatabase.make()
        let client = database.client(asServiceRole: true, maxConnections: 2)
        defer { client.shutdown() }
        let limits = SignInLimits(database: client, configuration: .init(failures: 1, windowSeconds: 2))
        let attempt = SignInLimits.Attempt(
            provider: "facebook", email: nil, metadata: EventMetadata(clientIP: "198.51.100.23", surface: "v1"))
        try await limits.recordFailure(attempt, reason: "invalid_credential")
        await #expect(throws: AccountError.self) { _ = try await limits.reserve(attempt) }
        let started = ContinuousClock.now
        var refusedFor = Duration.zero
        while ContinuousClock.now - started < .seconds(5) {
            do {
                try await limits.refuseIfRefusedLately(attempt)
                break
            } catch let error as AccountError where error.reason == .rateLimited {
                refusedFor = ContinuousClock.now - started
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(refusedFor > .milliseconds(500), "refused at first: \(refusedFor)")
        #expect(refusedFor < .seconds(3), "refused for \(refusedFor), past the 2 s window")
    }
}
