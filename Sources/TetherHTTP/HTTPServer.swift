import Glibc
import Synchronization

/// An HTTP/1.1 server on libmicrohttpd that runs async handlers.
///
/// libmicrohttpd's threads parse requests and write responses; each complete
/// request is handed to the router on the Swift concurrency pool. Keep-alive
/// connections stay open across requests, bodies are limited, every handler
/// has a deadline, and ``shutdown()`` drains in-flight requests.
///
/// ```swift
/// var router = Router()
/// router.get("/health") { _ in .text("ok") }
/// let server = HTTPServer(configuration: .init(port: 0), router: router)
/// try server.start()
/// // ...
/// await server.shutdown()
/// ```
public final class HTTPServer: Sendable {
    /// The configuration the server was created with.
    public let configuration: Configuration

    private let core: Core
    private let lifecycle = Mutex(Lifecycle.idle)
    private let listeningPort = Atomic<Int>(0)

    private enum Lifecycle: Sendable {
        case idle
        case running(Running)
        case stopping(Task<Void, Never>)
        case stopped
    }

    private struct Running: Sendable {
        let daemon: DaemonHandle
        let deadlineSweep: Task<Void, Never>
    }

    /// Raises this process's soft limit of open files to its hard limit (Debian's default soft limit,
    /// 1024, is below twice ``Configuration/connectionLimit`` plus the database pool: each connection
    /// holds its socket and the duplicate its header and body timeouts keep); answers the new soft limit.
    @discardableResult
    public static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// Creates a server; nothing listens until ``start()``.
    public init(configuration: Configuration = Configuration(), router: Router) {
        self.configuration = configuration
        self.core = Core(configuration: configuration, router: router)
    }

    /// Binds the configured address and starts serving.
    ///
    /// - Throws: ``HTTPServerError`` naming the address when it cannot be
    ///   bound (in use, not an IP address) or when the server was started before.
    public func start() throws {
        try lifecycle.withLock { lifecycle in
            guard case .idle = lifecycle else { throw HTTPServerError.alreadyStarted }
            let daemon = try core.startDaemon()
            listeningPort.store(daemon.port, ordering: .relaxed)
            lifecycle = .running(Running(daemon: daemon, deadlineSweep: sweepDeadlines()))
        }
        core.logEvent(
            "listening",
            [("address", HTTPServerError.formatAddress(host: configuration.host, port: boundPort))])
    }

    /// The routes the server answers, in registration order: each method and path
    /// pattern as registered (`POST`, `/v1/users/me/identities/{provider}`).
    ///
    /// Contract tests compare this list with `schema/openapi.yaml`.
    public var routes: [(method: String, pattern: String)] {
        core.router.routes
    }

    /// The port the server listens on (picked by the system when configured as 0); 0 before ``start()``.
    public var boundPort: Int {
        listeningPort.load(ordering: .relaxed)
    }

    /// Stops gracefully: refuses new connections, lets in-flight requests finish, then stops.
    ///
    /// Requests still running after ``Configuration/shutdownGracePeriod`` are
    /// answered 503 and their handlers cancelled. Responses sent while draining
    /// carry `Connection: close`. Calling it again, or concurrently, waits for the same stop.
    public func shutdown() async {
        let stopping: Task<Void, Never>? = lifecycle.withLock { lifecycle in
            switch lifecycle {
            case .idle, .stopped:
                lifecycle = .stopped
                return nil
            case .stopping(let task):
                return task
            case .running(let running):
                let task = Task { [core, configuration] in
                    core.isDraining.store(true, ordering: .relaxed)
                    let listenSocket = core.stopAccepting(running.daemon)
                    let graceEnd = ContinuousClock.now.advanced(by: configuration.shutdownGracePeriod)
                    while core.inFlightRequests.load(ordering: .relaxed) > 0 && ContinuousClock.now < graceEnd {
                        try? await Task.sleep(for: .milliseconds(5))
                    }
                    await core.stopDaemon(running.daemon, listenSocket: listenSocket)
                    running.deadlineSweep.cancel()
                    core.logEvent("stopped")
                }
                lifecycle = .stopping(task)
                return task
            }
        }
        guard let stopping else { return }
        await stopping.value
        lifecycle.withLock { $0 = .stopped }
    }

    deinit {
        // A server dropped while running is stopped without grace; the task keeps the core,
        // which the polling threads use, alive until the daemon is gone.
        guard case .running(let running) = lifecycle.withLock({ $0 }) else { return }
        Task { [core] in
            await core.stopDaemon(running.daemon, listenSocket: core.stopAccepting(running.daemon))
            running.deadlineSweep.cancel()
        }
    }

    /// Answers overdue handlers (suspended connections never time out in libmicrohttpd, so this is their
    /// only guard), and closes connections past their header or body timeout.
    private func sweepDeadlines() -> Task<Void, Never> {
        let interval = min(max(configuration.requestTimeout / 8, .milliseconds(1)), .milliseconds(100))
        return Task { [core] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                core.expireOverdueRequests()
                core.closeSlowConnections()
            }
        }
    }
}
