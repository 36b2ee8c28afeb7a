import Foundation
import Synchronization
import TetherHTTP

/// Work that runs beside the server in every instance (webhook deliveries, the provider-call outbox):
/// `work` runs again at once while it finds something to do, and after `idle` when it did not. A
/// failure is logged and waited out like an idle round; cancellation (``stop()``) ends the loop.
final class BackgroundLoop: Sendable {
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Starts the loop (once); `name` says what failed in the log.
    func start(idle: Duration, logger: Logger, name: String, _ work: @escaping @Sendable () async throws -> Bool) {
        task.withLock { task in
            guard task == nil else { return }
            task = Task {
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
        }
    }

    /// Stops the loop after the round in flight.
    func stop() async {
        let running = task.withLock { task in
            defer { task = nil }
            return task
        }
        running?.cancel()
        await running?.value
    }
}
