import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// libmicrohttpd's only timeout is an idle one, reset by every byte: a client that sends a header
// line (or a body byte) every few seconds holds its connection forever. Each connection therefore
// has a deadline for the part of a request it is sending, kept here and enforced by the server's
// sweep, which shuts the socket down so that libmicrohttpd closes the connection itself.

extension HTTPServer {
    /// What a connection is being waited for, and until when; written by the polling thread that
    /// owns the connection, read by the sweep.
    ///
    /// What it waits for, whether the sweep closed it, and a generation that every change bumps are
    /// one atomic word, so the polling thread and the sweep settle a race with a compare-and-swap:
    /// the sweep closes only the state it found overdue, and a request the sweep has claimed is
    /// never handed to a handler (``expectNothing()`` answers false).
    final class ConnectionClock: Sendable {
        enum Wait: Int64 {
            case nothing = 0
            case head = 1
            case body = 2
        }

        private static let waitBits: Int64 = 0b11
        private static let closedBit: Int64 = 0b100
        private static let generationUnit: Int64 = 0b1000

        /// Our own duplicate of the connection's socket: shutting it down ends the connection even if
        /// libmicrohttpd has closed (and the kernel reused) its descriptor in the meantime.
        let socket: Int32
        let peer: String?
        /// The request libmicrohttpd began on the connection and has not completed (its retained `*con_cls`).
        /// libmicrohttpd 0.9.75 can drop a connection without completing its request (one whose query it could
        /// not hold, when a NUL hid the `?` from the URI callback): the request's state, which holds this clock
        /// and so this socket, is then ended when the connection closes.
        /// Its address's bit pattern; 0 for none.
        let openRequest = Atomic<UInt>(0)
        private let deadline = Atomic<Int64>(.max)
        /// `generation << 3 | closed << 2 | wait`.
        private let state = Atomic<Int64>(Wait.nothing.rawValue)

        init(socket: Int32, peer: String?) {
            self.socket = socket
            self.peer = peer
        }

        deinit {
            close(socket)
        }

        /// From now on the connection owes `wait` by `deadline` (nanoseconds on the core's clock);
        /// false if the sweep has closed it already.
        @discardableResult
        func expect(_ wait: Wait, by deadline: Int64) -> Bool {
            // The deadline first: a sweep that reads the new state reads this deadline too.
            if wait != .nothing { self.deadline.store(deadline, ordering: .sequentiallyConsistent) }
            var current = state.load(ordering: .sequentiallyConsistent)
            while current & Self.closedBit == 0 {
                let next = ((current & ~(Self.waitBits | Self.closedBit)) &+ Self.generationUnit) | wait.rawValue
                let (exchanged, original) = state.compareExchange(
                    expected: current, desired: next, ordering: .sequentiallyConsistent)
                if exchanged { return true }
                current = original
            }
            return false
        }

        /// The connection owes nothing: a handler is about to have it, or it is answering. False if the
        /// sweep has closed it already (then it must not be handed to a handler).
        func expectNothing() -> Bool {
            expect(.nothing, by: .max)
        }

        /// Why the sweep closed the connection, or `nil`.
        var closedReason: Wait? {
            let current = state.load(ordering: .sequentiallyConsistent)
            return current & Self.closedBit == 0 ? nil : Wait(rawValue: current & Self.waitBits)
        }

        /// Shuts the socket down if what it owes is past its deadline at `now`; says what that was.
        fileprivate func closeIfOverdue(now: Int64) -> Wait? {
            let current = state.load(ordering: .sequentiallyConsistent)
            guard current & Self.closedBit == 0, let wait = Wait(rawValue: current & Self.waitBits), wait != .nothing,
                  deadline.load(ordering: .sequentiallyConsistent) < now,
                  state.compareExchange(expected: current, desired: current | Self.closedBit, ordering: .sequentiallyConsistent).exchanged
            else { return nil }
            shutDownSocket(socket)
            return wait
        }
    }

    /// The open connections' clocks; entries come and go with libmicrohttpd's connection notices.
    final class ConnectionClocks: Sendable {
        private let clocks = Mutex<[ObjectIdentifier: ConnectionClock]>([:])
        private let epoch = ContinuousClock.now
        let headerTimeout: Int64
        let bodyTimeout: Int64
        let idleTimeout: Int64

        init(configuration: Configuration) {
            headerTimeout = Self.nanoseconds(configuration.headerTimeout)
            bodyTimeout = Self.nanoseconds(configuration.bodyTimeout)
            idleTimeout = Self.nanoseconds(configuration.connectionTimeout)
        }

        /// Nanoseconds since this registry was made.
        var now: Int64 { Self.nanoseconds(epoch.duration(to: .now)) }

        func add(_ clock: ConnectionClock) {
            // A new connection owes its first request's head within the header timeout.
            clock.expect(.head, by: now &+ headerTimeout)
            clocks.withLock { $0[ObjectIdentifier(clock)] = clock }
        }

        func remove(_ clock: ConnectionClock) {
            _ = clocks.withLock { $0.removeValue(forKey: ObjectIdentifier(clock)) }
        }

        /// A request was answered and the connection stays open: the next request may wait for the
        /// idle timeout (libmicrohttpd closes a silent connection then), and its head must be
        /// complete within the header timeout after that, however its bytes trickle in.
        func requestEnded(on clock: ConnectionClock?) {
            clock?.expect(.head, by: now &+ idleTimeout &+ headerTimeout)
        }

        /// The head is complete: the body, if any, is owed within the body timeout.
        func headReceived(on clock: ConnectionClock?) {
            clock?.expect(.body, by: now &+ bodyTimeout)
        }

        /// Shuts down every connection past its deadline; returns each one's peer and what it owed.
        func closeOverdue() -> [(peer: String?, owed: ConnectionClock.Wait)] {
            let now = now
            return clocks.withLock { clocks in
                clocks.values.compactMap { clock in clock.closeIfOverdue(now: now).map { (clock.peer, $0) } }
            }
        }

        static func nanoseconds(_ duration: Duration) -> Int64 {
            let (seconds, attoseconds) = duration.components
            return seconds.multipliedReportingOverflow(by: 1_000_000_000).overflow
                ? .max / 4 : seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        }
    }
}

extension HTTPServer.Core {
    /// Closes the connections that owe a head or a body past its timeout, and logs each.
    func closeSlowConnections() {
        for (peer, owed) in connectionClocks.closeOverdue() {
            logEvent(level: "warning", "slow connection closed", [
                ("remote", peer ?? ""), ("reason", describe(owed)),
            ])
        }
    }

    /// The access log's words for a connection closed by the sweep.
    func describe(_ owed: HTTPServer.ConnectionClock.Wait) -> String {
        switch owed {
        case .head: "request head not complete within \(configuration.headerTimeout)"
        case .body: "request body not complete within \(configuration.bodyTimeout)"
        case .nothing: "connection closed"
        }
    }
}
