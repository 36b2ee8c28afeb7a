import Foundation
import Synchronization
import TetherHTTP

/// Work that runs beside the server in every instance (webhook deliveries, the provider-call outbox):
/// `work` runs again at once while it finds something to do, and after `idle` when it did not. A
/// failure is logged and waited out like an idle round; cancellation (``stop()``) ends the loop.
final class BackgroundLoop: Sendable {
    private let task = Mutex<Task<Void, Never>?>(nil)
    /// The logger and name of ``start(idle:logger:name:_:)``, for ``stop(within:)``.
    private let named = Mutex<(logger: Logger, name: String)?>(nil)

    /// Starts the loop (once); `name` says what failed in the log.
    func start(idle: Duration, logger: Logger, name: String, _ work: @escaping @Sendable () async throws -> Bool) {
        named.withLock { $0 = (logger, name) }
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

    /// Stops the loop after the round in flight, waiting at most `limit` for it: a round that does not
    /// heed cancellation (a network call past its own timeout) must not hold a shutdown. Its leases then
    /// expire by themselves.
    func stop(within limit: Duration = .seconds(5)) async {
        guard let running = task.withLock({ task in
            defer { task = nil }
            return task
        }) else { return }
        running.cancel()
        let finished: Bool = await withCheckedContinuation { continuation in
            let resumed = Mutex(false)
            let resume: @Sendable (Bool) -> Void = { value in
                if resumed.withLock({ done in defer { done = true }; return !done }) { continuation.resume(returning: value) }
            }
            Task { await running.value; resume(true) }
            Task { try? await Task.sleep(for: limit); resume(false) }
        }
        if !finished, let named = named.withLock({ $0 }) {
            named.logger.warn("\(named.name) did not stop within \(limit) of the shutdown; going on without it")
        }
    }
}
