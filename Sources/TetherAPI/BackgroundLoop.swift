import Foundation
import Synchronization
import TetherHTTP

/// Work that runs beside the server in every instance (webhook deliveries, the provider-call outbox):
/// `work` runs again at once while it finds something to do, and after `idle` when it did not. A
/// failure is logged and waited out like an idle round; cancellation (``stop(within:)``) ends the loop.
final class BackgroundLoop: Sendable {
    /// The running loop, with the logger and name it was started with.
    private let running = Mutex<(task: Task<Void, Never>, logger: Logger, name: String)?>(nil)

    /// Starts the loop (once); `name` says what failed in the log. Its first round runs after `firstAfter`.
    func start(
        idle: Duration, firstAfter: Duration = .zero, logger: Logger, name: String, _ work: @escaping @Sendable () async throws -> Bool
    ) {
        running.withLock { running in
            guard running == nil else { return }
            let task = Task {
                if firstAfter > .zero {
                    do { try await Task.sleep(for: firstAfter) } catch { return }
                }
                while !Task.isCancelled {
                    let worked: Bool
                    do {
                        worked = try await work()
                    } catch is CancellationError {
                        return
                    } catch {
                        logger.warn("\(name) failed; retrying", [("error", String(describing: error))])
                        worked = false
                    }
                    if !worked {
                        do { try await Task.sleep(for: idle) } catch { return }
                    }
                }
            }
            running = (task, logger, name)
        }
    }

    /// Stops the loop after the round in flight, waiting at most `limit` for it: a round that does not
    /// heed cancellation (a network call past its own timeout) must not hold a shutdown. Its leases then
    /// expire by themselves.
    func stop(within limit: Duration = .seconds(5)) async {
        guard let stopping = running.withLock({ running in
            defer { running = nil }
            return running
        }) else { return }
        stopping.task.cancel()
        let finished: Bool = await withCheckedContinuation { continuation in
            let resumed = Mutex(false)
            let resume: @Sendable (Bool) -> Void = { value in
                if resumed.withLock({ done in defer { done = true }; return !done }) { continuation.resume(returning: value) }
            }
            Task { await stopping.task.value; resume(true) }
            Task { try? await Task.sleep(for: limit); resume(false) }
        }
        if !finished {
            stopping.logger.warn("\(stopping.name) did not stop within \(limit) of the shutdown; going on without it")
        }
    }
}
