import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Waits for the signals that ask a server to stop: `SIGTERM` and `SIGINT`.
///
/// ```swift
/// try server.start()
/// _ = await ShutdownSignal.wait()
/// await server.shutdown()
/// ```
public enum ShutdownSignal {
    /// Returns the number of the first `SIGTERM` or `SIGINT` received from now on.
    public static func wait() async -> Int32 {
        await listen().wait()
    }

    /// Starts listening at once, so that a signal sent before the first ``Listener/wait()`` is not lost.
    ///
    /// The default actions of both signals are suspended while listening and
    /// restored after the first one arrives, so a second Ctrl-C during a slow
    /// shutdown ends the process.
    public static func listen() -> Listener {
        Listener()
    }

    /// A one-shot subscription to `SIGTERM` and `SIGINT`.
    public final class Listener: Sendable {
        private let queue = DispatchQueue(label: "tether.shutdown-signal")
        private let state = Mutex(State())
        private let sources: Sources

        private struct State {
            var received: Int32?
            var waiters: [CheckedContinuation<Int32, Never>] = []
        }

        /// The dispatch sources of both signals.
        ///
        /// Invariant: filled and read on `queue` only, except in `deinit`,
        /// which cannot overlap an event handler (a running handler holds `self`).
        private final class Sources: @unchecked Sendable {
            var all: [any DispatchSourceSignal] = []
        }

        fileprivate init() {
            sources = Sources()
            queue.sync {
                for signalNumber in [SIGTERM, SIGINT] {
                    // Without ignoring the default action first, the signal would end the process before dispatch sees it.
                    signal(signalNumber, SIG_IGN)
                    let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
                    source.setEventHandler { [weak self] in self?.receive(signalNumber) }
                    source.resume()
                    sources.all.append(source)
                }
            }
        }

        deinit {
            // A listener dropped before any signal gives the default actions back.
            if state.withLock({ $0.received == nil }) {
                stopListening()
            }
        }

        /// Returns the signal number once one has arrived.
        public func wait() async -> Int32 {
            await withCheckedContinuation { continuation in
                let received = state.withLock { state in
                    if state.received == nil {
                        state.waiters.append(continuation)
                    }
                    return state.received
                }
                if let received {
                    continuation.resume(returning: received)
                }
            }
        }

        private func stopListening() {
            for source in sources.all {
                source.cancel()
            }
            signal(SIGTERM, SIG_DFL)
            signal(SIGINT, SIG_DFL)
        }

        private func receive(_ signalNumber: Int32) {
            let waiters = state.withLock { state -> [CheckedContinuation<Int32, Never>] in
                guard state.received == nil else { return [] }
                state.received = signalNumber
                defer { state.waiters = [] }
                return state.waiters
            }
            stopListening()
            for waiter in waiters {
                waiter.resume(returning: signalNumber)
            }
        }
    }
}
