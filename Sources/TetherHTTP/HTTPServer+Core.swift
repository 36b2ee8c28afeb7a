import Synchronization

extension HTTPServer {
    /// The state shared by the libmicrohttpd callbacks, the handler tasks and the server object.
    ///
    /// Everything mutable is an atomic or behind a mutex: callbacks run on
    /// libmicrohttpd's polling threads, handlers on the Swift concurrency pool.
    final class Core: Sendable {
        let configuration: Configuration
        let router: Router
        let requestIDs = RequestIDGenerator()
        /// Each open connection's deadline for the head or body it is sending (header and body timeouts).
        let connectionClocks: ConnectionClocks

        /// Requests between their request line and their completion callback; shutdown waits for zero.
        let inFlightRequests = Atomic<Int>(0)
        /// Connections suspended for a handler and not yet answered; libmicrohttpd must not stop while any remain.
        let suspendedConnections = Atomic<Int>(0)
        /// Set once shutdown begins, so that every response asks the client to close.
        let isDraining = Atomic<Bool>(false)

        private let pendingTable = Mutex(PendingTable())
        /// Library messages captured while starting, to explain a failed start; `nil` once started.
        private let startupMessages = Mutex<[String]?>(nil)

        private struct PendingTable {
            var isClosed = false
            var entries: [ObjectIdentifier: PendingResponse] = [:]
        }

        init(configuration: Configuration, router: Router) {
            self.configuration = configuration
            self.router = router
            self.connectionClocks = ConnectionClocks(configuration: configuration)
        }

        // MARK: Handler dispatch

        /// Records `pending` so that deadlines and shutdown can answer it; `false` once shutdown has closed the table.
        func register(_ pending: PendingResponse) -> Bool {
            pendingTable.withLock { table in
                guard !table.isClosed else { return false }
                table.entries[ObjectIdentifier(pending)] = pending
                return true
            }
        }

        /// Runs the handler for `request` and turns whatever it throws into a response.
        func respond(to request: HTTPRequest) async -> HTTPResponse {
            do {
                return try await router.respond(to: request)
            } catch {
                return configuration.response(for: problem(for: error, from: request), target: request.path)
            }
        }

        /// Answers `pending` unless something answered it first, and resumes its connection exactly once.
        func finish(_ pending: PendingResponse, with response: HTTPResponse, cancellingHandler: Bool = false) {
            guard pending.complete(with: response, cancellingHandler: cancellingHandler) else { return }
            _ = pendingTable.withLock { $0.entries.removeValue(forKey: ObjectIdentifier(pending)) }
            pending.connection.resume()
        }

        /// Answers every request whose handler is past its deadline; handlers that ignore cancellation cannot hold a connection.
        func expireOverdueRequests(now: ContinuousClock.Instant = .now) {
            let overdue = pendingTable.withLock { table in table.entries.values.filter { $0.deadline <= now } }
            guard !overdue.isEmpty else { return }
            let problem = Problem.deadlineExceeded(timeout: configuration.requestTimeout)
            for pending in overdue {
                finish(pending, with: configuration.response(for: problem, target: pending.target), cancellingHandler: true)
            }
        }

        /// Closes the table to new handlers and answers every waiting request 503; returns how many were waiting.
        func answerStragglers() -> Int {
            let stragglers = pendingTable.withLock { table in
                table.isClosed = true
                return Array(table.entries.values)
            }
            let problem = Problem.serviceUnavailable(detail: "The server is shutting down.")
            for pending in stragglers {
                finish(pending, with: configuration.response(for: problem, target: pending.target), cancellingHandler: true)
            }
            return stragglers.count
        }

        /// Maps a thrown error once for every route (``Problem/init(converting:)``); anything else is logged and answered 500,
        /// and so is an error converted to a 500 (a database's refusal no other case names), whose cause the answer does not say.
        private func problem(for error: any Error, from request: HTTPRequest) -> Problem {
            let converted = Problem(converting: error)
            if let converted, converted.status != 500 {
                return converted
            }
            var line = LogLine(level: "error", message: "handler failed")
                line.add("requestId", request.requestID)
                line.add("method", request.method)
                line.add("path", request.path)
            line.add("error", String(reflecting: error))
            configuration.log.write(line.rendered)
            return converted ?? .internal
        }

        // MARK: Logging

        /// Writes the one access log line of a request.
        func logRequest(
            requestID: String, method: String?, target: String, status: Int?, duration: Duration,
            remoteAddress: String?, failure: String?
        ) {
            guard configuration.log.admitsInfo else { return }
            var line = LogLine(level: "info", message: "request")
            line.add("requestId", requestID)
            line.add("method", method)
            // The query is left out: it can carry tokens, and the path is what identifies the route.
            line.add("path", target.utf8.firstIndex(of: UInt8(ascii: "?")).map { String(target[..<$0]) } ?? target)
            line.add("status", status)
            line.add("durationMs", duration.fractionalMilliseconds)
            line.add("remote", remoteAddress)
            if let failure {
                line.add("error", failure)
            }
            configuration.log.write(line.rendered)
        }

        /// Writes a server lifecycle line (`listening`, `stopped`).
        func logEvent(level: String = "info", _ message: String, _ fields: [(String, String)] = []) {
            guard level != "info" || configuration.log.admitsInfo else { return }
            var line = LogLine(level: level, message: message)
            for (key, value) in fields {
                line.add(key, value)
            }
            configuration.log.write(line.rendered)
        }

        /// Receives a libmicrohttpd message: kept to explain a failed start, logged as a warning otherwise.
        func libraryMessage(_ message: String) {
            let isCaptured = startupMessages.withLock { messages in
                guard messages != nil else { return false }
                messages?.append(message)
                return true
            }
            if !isCaptured {
                logEvent(level: "warning", "libmicrohttpd", [("detail", message)])
            }
        }

        /// Starts or stops capturing library messages; stopping returns what was captured.
        func captureLibraryMessages(_ isCapturing: Bool) -> [String] {
            startupMessages.withLock { messages in
                defer { messages = isCapturing ? [] : nil }
                return messages ?? []
            }
        }
    }

    /// The answer slot of one suspended request: completed exactly once, by the handler, the deadline or shutdown.
    final class PendingResponse: Sendable {
        let connection: SuspendedConnection
        let deadline: ContinuousClock.Instant
        /// The request's target: what the server answers in its place (a deadline, a shutdown) is rendered for its
        /// surface, as a handler's own problems are (Parse's and Firebase's shapes, their cross-origin header).
        let target: String
        private let state = Mutex(State())

        private struct State {
            var isCompleted = false
            var response: HTTPResponse?
            var handler: Task<Void, Never>?
        }

        init(connection: SuspendedConnection, deadline: ContinuousClock.Instant, target: String) {
            self.connection = connection
            self.deadline = deadline
            self.target = target
        }

        /// Keeps the handler task so that a deadline can cancel it; cancels it at once if the deadline already won.
        func attach(_ handler: Task<Void, Never>) {
            let isLate = state.withLock { state in
                if !state.isCompleted {
                    state.handler = handler
                }
                return state.isCompleted
            }
            if isLate {
                handler.cancel()
            }
        }

        /// Stores `response` if nothing was stored before; only the caller that gets `true` may resume the connection.
        func complete(with response: HTTPResponse, cancellingHandler: Bool) -> Bool {
            let (isFirst, handler) = state.withLock { state -> (Bool, Task<Void, Never>?) in
                guard !state.isCompleted else { return (false, nil) }
                state.isCompleted = true
                state.response = response
                defer { state.handler = nil }
                return (true, state.handler)
            }
            if cancellingHandler {
                handler?.cancel()
            }
            return isFirst
        }

        /// The stored response, taken once by the resumed access-handler call.
        func takeResponse() -> HTTPResponse? {
            state.withLock { state in
                defer { state.response = nil }
                return state.response
            }
        }
    }
}
