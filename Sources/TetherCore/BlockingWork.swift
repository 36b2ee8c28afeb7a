import Dispatch
import Synchronization

/// Runs CPU-heavy synchronous work (a memory-hard password hash) on a dispatch thread.
///
/// A scrypt call takes hundreds of milliseconds; on one of Swift's few cooperative
/// threads it would stall every other request and deadline sweep meanwhile.
public enum BlockingWork {
    /// Runs `work` off the cooperative pool and returns its result.
    public static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(with: Result { try work() })
            }
        }
    }

    /// Starts `work` on `queue` and returns at once, for a caller that goes on with something else
    /// meanwhile (a synchronous one too: a transaction's job that commits while a page is written out)
    /// and waits for the result later with ``Pending/value``.
    public static func start<T: Sendable>(
        on queue: DispatchQueue = .global(qos: .userInitiated), _ work: @escaping @Sendable () throws -> T
    ) -> Pending<T> {
        let pending = Pending<T>()
        queue.async { pending.finish(Result { try work() }) }
        return pending
    }

    /// The result of work ``start(on:_:)`` started: waited for by one caller at most.
    public final class Pending<T: Sendable>: Sendable {
        private enum State {
            case running
            case awaited(CheckedContinuation<T, any Error>)
            case finished(Result<T, any Error>)
        }

        private let state = Mutex(State.running)

        fileprivate init() {}

        fileprivate func finish(_ result: Result<T, any Error>) {
            let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
                defer { state = .finished(result) }
                guard case .awaited(let continuation) = state else { return nil }
                return continuation
            }
            waiter?.resume(with: result)
        }

        /// Whether a caller waits for the result (for tests that order a wait before the work's end).
        var isAwaited: Bool {
            state.withLock { if case .awaited = $0 { true } else { false } }
        }

        /// Whether the work has finished (for tests that order a wait after it).
        var isFinished: Bool {
            state.withLock { if case .finished = $0 { true } else { false } }
        }

        /// The work's result, once it has finished (at once if it has).
        public var value: T {
            get async throws {
                try await withCheckedThrowingContinuation { continuation in
                    let finished = state.withLock { state -> Result<T, any Error>? in
                        switch state {
                        case .finished(let result):
                            return result
                        case .running:
                            state = .awaited(continuation)
                            return nil
                        case .awaited:
                            preconditionFailure("BlockingWork.Pending.value is awaited by one caller at most")
                        }
                    }
                    if let finished { continuation.resume(with: finished) }
                }
            }
        }
    }
}
