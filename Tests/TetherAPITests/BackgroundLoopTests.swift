import Foundation
import Testing
@testable import TetherAPI
import Synchronization
import TetherHTTP

/// The loops beside the server (webhook deliveries, the provider-call outbox, the failure tallies) stop
/// with the server, and a round that does not heed cancellation cannot hold the shutdown.
@Suite("Background loops stop with the server")
struct BackgroundLoopTests {
    @Test func aRoundThatIgnoresCancellationHoldsTheStopOnlyForItsLimit() async throws {
        let loop = BackgroundLoop()
        let (started, startedNow) = AsyncStream<Void>.makeStream()
        loop.start(idle: .seconds(60), logger: Logger(sink: .discarding), name: "stuck loop") {
            startedNow.yield()
            // A wait that cancellation does not end, like a network call past its own timeout.
            await withCheckedContinuation { continuation in
                DispatchQueue.global().asyncAfter(deadline: .now() + 5) { continuation.resume() }
            }
            return false
        }
        for await _ in started { break }
        let clock = ContinuousClock()
        let took = await clock.measure { await loop.stop(within: .milliseconds(300)) }
        #expect(took < .seconds(2), "the stop waited \(took)")
    }

    @Test func aLoopThatHeedsCancellationStopsAtOnce() async throws {
        let loop = BackgroundLoop()
        let rounds = Counter()
        loop.start(idle: .seconds(60), logger: Logger(sink: .discarding), name: "idle loop") {
            rounds.add()
            return false
        }
        while rounds.value == 0 { try await Task.sleep(for: .milliseconds(5)) }
        let took = await ContinuousClock().measure { await loop.stop(within: .seconds(10)) }
        #expect(took < .seconds(1), "the idle wait is cancelled: \(took)")
    }

    private final class Counter: Sendable {
        private let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }
}
