import Synchronization
import Testing
import TetherHTTP

#if canImport(Glibc)
    import Glibc
#endif

@Suite("ShutdownSignal")
struct ShutdownSignalTests {
    @Test func sigtermIsReportedToTheWaiter() async throws {
        let listener = ShutdownSignal.listen()
        // libdispatch registers a signal source asynchronously; a signal sent in the first
        // instant could go unseen (never fatal: the default action is already suspended).
        try await Task.sleep(for: .milliseconds(100))
        kill(getpid(), SIGTERM)
        // wait() is not cancellable, so it runs unstructured and the test polls with a limit.
        let received = ReceivedSignal()
        Task { received.number.withLock { [number = await listener.wait()] in $0 = number } }
        for _ in 0..<500 where received.number.withLock({ $0 }) == nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(received.number.withLock { $0 } == SIGTERM)
    }
}

private final class ReceivedSignal: Sendable {
    let number = Mutex<Int32?>(nil)
}
