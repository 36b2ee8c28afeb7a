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
    final class ConnectionClock: Sendable {
        enum Wait: UInt8 {
            case nothing = 0
            case head = 1
            case body = 2
        }

        /// Our own duplicate of the connection's socket: shutting it down ends the connection even if
        /// libmicrohttpd has closed (and the kernel reused) its descriptor in the meantime.
        let socket: Int32
        let peer: String?
        private let deadline = Atomic<Int64>(.max)
        private let waitingFor = Atomic<UInt8>(Wait.nothing.rawValue)
        /// Set once by the sweep that shut the socket down: why.
        private let closedFor = Atomic<UInt8>(Wait.nothing.rawValue)

        init(socket: Int32, peer: String?) {
            self.socket = socket
            self.peer = peer
        }

        deinit {
            close(socket)
        }

        /// From now on the connection owes `wait` by `deadline` (nanoseconds on the core's clock).
        func expect(_ wait: Wait, by deadline: Int64) {
            waitingFor.store(wait.rawValue, ordering: .relaxed)
            self.deadline.store(deadline, ordering: .relaxed)
        }

        /// The connection owes nothing: a handler has it, or it is answering.
        func expectNothing() {
            deadline.store(.max, ordering: .relaxed)
            waitingFor.store(Wait.nothing.rawValue, ordering: .relaxed)
        }

        /// Why the sweep closed the connection, or `nil`.
        var closedReason: Wait? {
            Wait(rawValue: closedFor.load(ordering: .relaxed)).flatMap { $0 == .nothing ? nil : $0 }
        }

        /// Shuts the socket down if its deadline is before `now`; says what it was waiting for.
        fileprivate func closeIfOverdue(now: Int64) -> Wait? {
            guard deadline.load(ordering: .relaxed) < now,
                  let wait = Wait(rawValue: waitingFor.load(ordering: .relaxed)), wait != .nothing,
                  closedFor.compareExchange(expected: Wait.nothing.rawValue, desired: wait.rawValue, ordering: .relaxed).exchanged
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

        var count: Int { clocks.withLock { $0.count } }

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
