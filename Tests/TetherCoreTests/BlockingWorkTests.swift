import Dispatch
import Testing
@testable import TetherCore

@Suite("Blocking work started now and awaited later")
struct BlockingWorkTests {
    struct Refused: Error, Equatable {}

    /// The result reaches a caller that waits before the work has finished, and one that waits after.
    @Test func theResultReachesAWaiterWhetherItWaitsBeforeOrAfterTheWorkFinishes() async throws {
        let held = DispatchQueue(label: "held")
        held.suspend()
        let early = BlockingWork.start(on: held) { 6 * 7 }
        async let waited = early.value
        while !early.isAwaited { await Task.yield() }
        held.resume()
        #expect(try await waited == 42)

        let serial = DispatchQueue(label: "serial")
        let late = BlockingWork.start(on: serial) { "done" }
        serial.sync {}  // the work and its finish ran before this
        #expect(late.isFinished)
        #expect(try await late.value == "done")
    }

    /// The work starts when it is started, not when it is awaited: a synchronous caller goes on meanwhile.
    @Test func theWorkRunsBeforeAnyoneWaits() async throws {
        let ran = DispatchSemaphore(value: 0)
        let pending = BlockingWork.start { _ = ran.signal() }
        #expect(ran.wait(timeout: .now() + 10) == .success)
        try await pending.value
    }

    @Test func anErrorIsThrownToTheWaiter() async {
        let pending = BlockingWork.start { () throws -> Int in throw Refused() }
        await #expect(throws: Refused.self) { try await pending.value }
    }
}
