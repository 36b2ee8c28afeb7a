internal import CMicroHTTPD

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Every libmicrohttpd callback and call lives in this file.
//
// One request goes through the access handler several times (DESIGN.md, appendix):
//   1. head: read method and headers into a `RequestState` (created earlier by the
//      URI callback, stored in `*con_cls`) and return YES without answering, because
//      libmicrohttpd closes keep-alive connections answered in the first call;
//   2. body chunks: append, set `*upload_data_size = 0`;
//   3. final call (size 0): suspend the connection and start a task for the handler;
//   4. after the task resumes the connection: queue the stored response.
// The completion callback releases the state and writes the access log line.

/// A connection pointer that may cross to the handler task.
///
/// Invariant: it is used only for `MHD_resume_connection`, which libmicrohttpd
/// allows from any thread, and only once (``HTTPServer/PendingResponse`` lets
/// exactly one caller resume); a suspended connection stays allocated until resumed.
struct SuspendedConnection: @unchecked Sendable {
    let pointer: OpaquePointer

    func resume() {
        MHD_resume_connection(pointer)
    }
}

/// A running daemon and its listening socket.
///
/// Invariant: the daemon is quiesced and stopped only by the shutdown path,
/// which runs once (``HTTPServer`` hands the handle out of its lifecycle mutex once).
struct DaemonHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    let port: Int
}

/// Per-request state; lives from the request line to the completion callback.
///
/// Only the connection's polling thread touches it, so it needs no lock;
/// the handler task gets an `HTTPRequest` value and a `PendingResponse`, never this.
final class RequestState {
    enum Phase {
        case awaitingHead
        case receivingBody
        case dispatched(HTTPServer.PendingResponse)
        case answered
    }

    let target: String
    let startedAt = ContinuousClock.now
    var phase = Phase.awaitingHead
    var method: String?
    var headers = HTTPHeaders()
    /// A `Content-Length` or `Transfer-Encoding` value with white space after it, which libmicrohttpd reads as it
    /// is (`chunked ` is no chunked coding to it) and a proxy may trim: refused as a framing it could read otherwise.
    var hasPaddedFraming = false
    var body: [UInt8] = []
    var isBodyTooLarge = false
    var requestID: String?
    var remoteAddress: String?
    var status: Int?
    /// The connection's header and body deadlines; `nil` if it could not be given any.
    var clock: HTTPServer.ConnectionClock?

    init(target: String) {
        self.target = target
    }
}

// MARK: - C callbacks

private func core(_ closure: UnsafeMutableRawPointer?) -> HTTPServer.Core {
    Unmanaged<HTTPServer.Core>.fromOpaque(closure!).takeUnretainedValue()
}

/// Runs at the request line, before libmicrohttpd unescapes the target; its result becomes `*con_cls`.
private let beginRequest: CMicroHTTPD_URILogCallback = { closure, uri, connection in
    core(closure).inFlightRequests.add(1, ordering: .relaxed)
    let state = RequestState(target: uri.map { String(cString: $0) } ?? "/")
    // libmicrohttpd 0.9.75 parses the query right after this callback into records in the connection's memory
    // pool; when they do not fit (a few hundred `a=b` pairs, or fewer long ones beside a long target) it queues
    // a 431 and then loses the connection: never answered, never closed, its descriptor held for good, until
    // enough such requests use up the process's descriptors. Tether reads the query from its own copy of the
    // target (above) and never asks libmicrohttpd for it, so the query is cut off in libmicrohttpd's buffer
    // (where it parses the request line in place): it has nothing to parse.
    if let uri, let question = strchr(uri, 0x3F) {
        UnsafeMutablePointer(mutating: question + 1).pointee = 0
    }
    state.clock = connection.flatMap { CMicroHTTPD_get_connection_info($0, .CONNECTION_INFO_SOCKET_CONTEXT)?.pointee.socket_context }
        .map { Unmanaged<HTTPServer.ConnectionClock>.fromOpaque($0).takeUnretainedValue() }
    let address = Unmanaged.passRetained(state).toOpaque()
    state.clock?.openRequest.store(UInt(bitPattern: address), ordering: .sequentiallyConsistent)
    return address
}

/// A connection opened or closed: gives it a clock for its header and body deadlines, or drops it.
private let notifyConnection: MHD_NotifyConnectionCallback = { closure, connection, socketContext, notice in
    guard let connection, let socketContext else { return }
    let clocks = core(closure).connectionClocks
    if notice == .CONNECTION_NOTIFY_STARTED {
        // A duplicate of the socket, so that the sweep's shutdown can never reach a descriptor that
        // libmicrohttpd has closed and the kernel handed to another connection.
        guard let descriptor = CMicroHTTPD_get_connection_info(connection, .CONNECTION_INFO_CONNECTION_FD)?.pointee.connect_fd
        else { return }
        // Close-on-exec, as libmicrohttpd's own sockets are: a child process must not keep the connection open.
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { return }  // out of descriptors: this connection keeps only the idle timeout
        let peer = CMicroHTTPD_get_connection_info(connection, .CONNECTION_INFO_CLIENT_ADDRESS)?.pointee.client_addr.flatMap(numericHost)
        let clock = HTTPServer.ConnectionClock(socket: duplicate, peer: peer)
        socketContext.pointee = Unmanaged.passRetained(clock).toOpaque()
        clocks.add(clock)
    } else if let address = socketContext.pointee {
        socketContext.pointee = nil
        let clock = Unmanaged<HTTPServer.ConnectionClock>.fromOpaque(address).takeRetainedValue()
        clocks.remove(clock)
        // A request libmicrohttpd never completed ends with its connection: kept, its state would hold this
        // clock's socket open for good (a descriptor each, past every connection limit) and count as in flight.
        if let dropped = UnsafeMutableRawPointer(bitPattern: clock.openRequest.exchange(0, ordering: .sequentiallyConsistent)) {
            core(closure).complete(
                Unmanaged<RequestState>.fromOpaque(dropped).takeRetainedValue(), on: nil, termination: .REQUEST_TERMINATED_WITH_ERROR)
        }
    }
}

private let accessHandler: MHD_AccessHandlerCallback = {
    closure, connection, _, method, _, uploadData, uploadDataSize, requestContext in
    guard let connection, let uploadDataSize, let stateAddress = requestContext?.pointee else { return .NO }
    let state = Unmanaged<RequestState>.fromOpaque(stateAddress).takeUnretainedValue()
    return core(closure).handle(state, on: connection, method: method, upload: uploadData, uploadSize: uploadDataSize)
}

private let completeRequest: MHD_RequestCompletedCallback = { closure, connection, requestContext, termination in
    guard let requestContext, let stateAddress = requestContext.pointee else { return }
    requestContext.pointee = nil
    let state = Unmanaged<RequestState>.fromOpaque(stateAddress).takeRetainedValue()
    state.clock?.openRequest.store(0, ordering: .sequentiallyConsistent)
    core(closure).complete(state, on: connection, termination: termination)
}

private let collectHeader: MHD_KeyValueIteratorN = { closure, _, key, keySize, value, valueSize in
    let state = Unmanaged<RequestState>.fromOpaque(closure!).takeUnretainedValue()
    let name = string(key, count: keySize)
    if let value, valueSize > 0, value[valueSize - 1] == 0x20 || value[valueSize - 1] == 0x09,
       ["content-length", "transfer-encoding"].contains(name.lowercased()) {
        state.hasPaddedFraming = true
    }
    state.headers.add(name: name, value: fieldValue(value, count: valueSize))
    return .YES
}

/// A header field's value without the white space (spaces, tabs) around it, which RFC 9110 §5.5 says is
/// not part of it: libmicrohttpd drops the leading white space only.
private func fieldValue(_ characters: UnsafePointer<CChar>?, count: Int) -> String {
    guard let characters else { return "" }
    let bytes = UnsafeRawBufferPointer(start: characters, count: count)
    let isWhiteSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
    let start = bytes.firstIndex { !isWhiteSpace($0) } ?? bytes.endIndex
    let end = bytes.lastIndex { !isWhiteSpace($0) }.map { $0 + 1 } ?? start
    return String(decoding: bytes[start..<end], as: UTF8.self)
}

private let logLibraryMessage: MHD_LogCallback = { closure, format, arguments in
    guard let format, let arguments else { return }
    var buffer = [CChar](repeating: 0, count: 512)
    _ = vsnprintf(&buffer, buffer.count, format, arguments)
    let message = string(nullTerminated: buffer)
    core(closure).libraryMessage(message.hasSuffix("\n") ? String(message.dropLast()) : message)
}

private func string(nullTerminated buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

private func string(_ characters: UnsafePointer<CChar>?, count: Int) -> String {
    guard let characters else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: characters, count: count), as: UTF8.self)
}

// MARK: - Request handling

extension HTTPServer.Core {
    fileprivate func handle(
        _ state: RequestState, on connection: OpaquePointer, method: UnsafePointer<CChar>?,
        upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>
    ) -> MHD_Result {
        switch state.phase {
        case .awaitingHead:
            readHead(of: state, on: connection, method: method)
            connectionClocks.headReceived(on: state.clock)
            // libmicrohttpd keeps a request's head and the answer's head in one 32 KiB pool per connection: a head that
            // leaves no room for the answer's would run its handler (a sign-in made) and lose the answer. Refused first.
            // libmicrohttpd keeps a record of about 64 bytes a header beside its text, and copies a Cookie's value again.
            let headBytes = state.target.utf8.count + state.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 68 }
                + state.headers.values(for: "Cookie").reduce(0) { $0 + $1.utf8.count + 64 * ($1.split(separator: ";").count) }
            if headBytes > Self.maxHeadBytes {
                // The target alone too long is 414, as libmicrohttpd answers a longer one; else the headers are, 431.
                let problem: Problem = state.target.utf8.count > Self.maxHeadBytes
                    ? .uriTooLong(limit: Self.maxHeadBytes) : .headerFieldsTooLarge(limit: Self.maxHeadBytes)
                return queue(configuration.response(for: problem, target: state.target), for: state, on: connection, closing: true)
            }
            if let problem = state.hasPaddedFraming ? "Content-Length and Transfer-Encoding carry no white space after their value."
                : Self.framingProblem(state.headers) {
                // A body this server would frame otherwise than a proxy in front may (request smuggling): refused
                // unread, and the connection closed, as RFC 9112 §6.1 and §6.3 ask.
                return queue(configuration.response(for: .badRequest(detail: problem), target: state.target), for: state,
                             on: connection, closing: true)
            }
            if let declared = state.headers["Content-Length"].flatMap(Int.init), declared > configuration.maxBodyBytes {
                // Answering before the body is the one early answer allowed: the body will not be read,
                // so the connection cannot be reused and says so.
                return queue(
                    configuration.response(for: .payloadTooLarge(limit: configuration.maxBodyBytes), target: state.target), for: state,
                    on: connection, closing: true)
            }
            state.phase = .receivingBody
            return .YES
        case .receivingBody:
            guard uploadSize.pointee == 0 else {
                append(UnsafeRawBufferPointer(start: upload, count: uploadSize.pointee), to: state)
                uploadSize.pointee = 0
                return .YES
            }
            if state.isBodyTooLarge {
                return queue(
                    configuration.response(for: .payloadTooLarge(limit: configuration.maxBodyBytes), target: state.target), for: state,
                    on: connection)
            }
            // The body arrived just as the sweep closed the connection for it: no handler runs.
            if let clock = state.clock, !clock.expectNothing() { return .NO }
            dispatch(state, on: connection)
            return .YES
        case .dispatched(let pending):
            suspendedConnections.subtract(1, ordering: .relaxed)
            return queue(pending.takeResponse() ?? configuration.response(for: .internal, target: state.target), for: state, on: connection)
        case .answered:
            uploadSize.pointee = 0
            return .YES
        }
    }

    /// The largest request line and headers answered (431 above): well inside libmicrohttpd's 32 KiB connection pool,
    /// which must still hold the answer's head.
    static let maxHeadBytes = 24 * 1024

    /// Why a request head's body framing is refused, or nil: one `Content-Length` of digits, or `Transfer-Encoding:
    /// chunked` alone, or neither. Anything else (both, two lengths, another coding, a header name with white space
    /// in it, such as `Content-Length :`) is framed differently by different servers, and is refused whole; so is a
    /// second `Host` or `Authorization`, which they may each read another of.
    static func framingProblem(_ headers: HTTPHeaders) -> String? {
        let lengths = headers.values(for: "Content-Length"), codings = headers.values(for: "Transfer-Encoding")
        // A name is a token (RFC 9110 §5.6.2). libmicrohttpd glues a folded line onto the name before it, so one such
        // as `X-A` then ` Content-Length:5` arrives as `X-AContent-Length:5`, which a lenient proxy reads as a length.
        if headers.contains(where: { field in field.name.isEmpty || !field.name.utf8.allSatisfy(Self.isTokenCharacter) }) {
            return "A header name is empty or holds a character other than a token's (white space, a colon, a control character)."
        }
        // An empty `Content-Length:` or `Transfer-Encoding:` folded onto the next line (obs-fold, RFC 9112 §5.2) comes
        // out of libmicrohttpd as a longer name with no value (`Content-Length2`): no framing here, one to a proxy that
        // unfolds it.
        if headers.contains(where: { field in
            let name = field.name.lowercased()
            return name != "content-length" && name != "transfer-encoding" && (name.hasPrefix("content-length") || name.hasPrefix("transfer-encoding"))
        }) {
            return "Content-Length and Transfer-Encoding are sent on one line, unfolded."
        }
        // Fields of one value each, which a proxy in front may read the last of where this server reads the first: the
        // host a request is for (RFC 9112 §3.2 asks a 400 for two) and the credential it comes with.
        for name in ["Host", "Authorization"] where headers.values(for: name).count > 1 {
            return "Send \(name) once."
        }
        if !lengths.isEmpty, !codings.isEmpty { return "Send Content-Length or Transfer-Encoding, not both." }
        if lengths.count > 1 { return "Send Content-Length once." }
        if let length = lengths.first, !(1...18).contains(length.utf8.count) || !length.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
            return "Content-Length is a decimal number of bytes."
        }
        if codings.count > 1 || codings.first.map({ $0.lowercased() != "chunked" }) == true {
            return "The only Transfer-Encoding taken is chunked, alone."
        }
        return nil
    }

    /// A `tchar` of RFC 9110 §5.6.2: a letter, a digit or one of ``!#$%&'*+-.^_`|~`` (every byte of every header
    /// name of every request is looked up here: a table made once).
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        byte < 128 && tokenCharacters[Int(byte)]
    }

    private static let tokenCharacters: [Bool] = (0..<128).map { byte in
        let character = UInt8(byte)
        return (0x61...0x7A).contains(character) || (0x41...0x5A).contains(character) || (0x30...0x39).contains(character)
            || "!#$%&'*+-.^_`|~".utf8.contains(character)
    }

    private func readHead(of state: RequestState, on connection: OpaquePointer, method: UnsafePointer<CChar>?) {
        state.method = method.map { String(cString: $0) }
        MHD_get_connection_values_n(connection, .HEADER_KIND, collectHeader, Unmanaged.passUnretained(state).toOpaque())
        state.requestID = state.headers["X-Request-Id"].flatMap { RequestIDGenerator.isAcceptable($0) ? $0 : nil } ?? requestIDs.next()
        let peer = CMicroHTTPD_get_connection_info(connection, .CONNECTION_INFO_CLIENT_ADDRESS)?
            .pointee.client_addr.flatMap(numericHost)
        state.remoteAddress = Self.clientAddress(
            peer: peer, forwardedFor: state.headers.values(for: "X-Forwarded-For"), trustedProxies: configuration.trustedProxies)
    }

    /// The client's address: the socket's peer, or, behind trusted proxies, the rightmost address
    /// of `X-Forwarded-For` that no trusted proxy claims.
    static func clientAddress(peer: String?, forwardedFor: [String], trustedProxies: [IPAddressRange]) -> String? {
        let isTrusted = { (address: String) in trustedProxies.contains { $0.contains(address) } }
        guard let peer, isTrusted(peer) else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { forwardedAddress($0.trimmingCharacters(in: .whitespaces)) }
        guard let client = hops.last(where: { !isTrusted($0) }) else { return peer }
        // Whatever a proxy passed on from the client is only believed when it is an address at all.
        return isIPAddress(client) ? client : peer
    }

    /// An `X-Forwarded-For` entry's address without the port some proxies append (`198.51.100.7:1234`,
    /// `[2001:db8::1]:1234`) or the brackets of an IPv6 address (`[2001:db8::1]`): the port says nothing about
    /// the client, and read as part of the address it made every client a stranger falling back to the proxy's.
    static func forwardedAddress(_ entry: String) -> String {
        let isPort = { (text: Substring) in !text.isEmpty && text.count <= 5 && text.utf8.allSatisfy { (0x30...0x39).contains($0) } }
        if entry.hasPrefix("["), let close = entry.firstIndex(of: "]") {
            let rest = entry[entry.index(after: close)...]
            guard rest.isEmpty || rest.first == ":" && isPort(rest.dropFirst()) else { return entry }
            return String(entry[entry.index(after: entry.startIndex)..<close])
        }
        let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
        // One colon only: an IPv6 address has two at least.
        return parts.count == 2 && isPort(parts[1]) ? String(parts[0]) : entry
    }

    private static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    private func append(_ chunk: UnsafeRawBufferPointer, to state: RequestState) {
        guard !state.isBodyTooLarge else { return }
        guard state.body.count + chunk.count <= configuration.maxBodyBytes else {
            // A chunked body has no declared length: read it to the end, keep none of it, answer 413 then.
            state.isBodyTooLarge = true
            state.body = []
            return
        }
        if state.body.isEmpty, let declared = state.headers["Content-Length"].flatMap(Int.init) {
            state.body.reserveCapacity(declared)
        }
        state.body.append(contentsOf: chunk)
    }

    /// Suspends the connection and runs the handler on the concurrency pool; the task resumes the connection.
    private func dispatch(_ state: RequestState, on connection: OpaquePointer) {
        let deadline = ContinuousClock.now.advanced(by: configuration.requestTimeout)
        let request = HTTPRequest(
            method: state.method ?? "GET", target: state.target, headers: state.headers, body: state.body,
            requestID: state.requestID, remoteAddress: state.remoteAddress, deadline: deadline)
        state.body = []
        let pending = HTTPServer.PendingResponse(
            connection: SuspendedConnection(pointer: connection), deadline: deadline, target: state.target)
        // Counted before suspending, so that shutdown never sees zero while a suspension is under way;
        // suspended before registering, because the deadline sweep or shutdown may resume it from then on.
        suspendedConnections.add(1, ordering: .relaxed)
        MHD_suspend_connection(connection)
        state.phase = .dispatched(pending)
        guard register(pending) else {
            finish(pending, with: configuration.response(for: .serviceUnavailable(detail: "The server is shutting down."), target: state.target))
            return
        }
        pending.attach(
            Task {
                let response = await self.respond(to: request)
                self.finish(pending, with: response)
            })
    }

    private func queue(
        _ response: HTTPResponse, for state: RequestState, on connection: OpaquePointer, closing: Bool = false
    ) -> MHD_Result {
        let response = (100...599).contains(response.status) ? response : invalidStatus(response.status, state)
        let created = response.body.withUnsafeBytes { body in
            MHD_create_response_from_buffer(body.count, UnsafeMutableRawPointer(mutating: body.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let mhdResponse = created else { return .NO }
        defer { MHD_destroy_response(mhdResponse) }
        for (name, value) in response.headers where !name.equalsIgnoringASCIICase("Content-Length") {
            if MHD_add_response_header(mhdResponse, name, value) == .NO {
                logEvent(level: "warning", "response header dropped", [("requestId", state.requestID ?? ""), ("header", name)])
            }
        }
        if let requestID = state.requestID {
            MHD_add_response_header(mhdResponse, "X-Request-Id", requestID)
        }
        if closing || isDraining.load(ordering: .relaxed) {
            MHD_add_response_header(mhdResponse, "Connection", "close")
        }
        state.status = response.status
        state.phase = .answered
        _ = state.clock?.expectNothing()
        return MHD_queue_response(connection, UInt32(response.status), mhdResponse)
    }

    private func invalidStatus(_ status: Int, _ state: RequestState) -> HTTPResponse {
        logEvent(level: "error", "handler returned an invalid status", [("requestId", state.requestID ?? ""), ("status", String(status))])
        return Problem.internal.response()
    }

    fileprivate func complete(_ state: RequestState, on connection: OpaquePointer?, termination: MHD_RequestTerminationCode) {
        if case .dispatched = state.phase {
            // Resumed but closed before the answer was queued (the client went away).
            suspendedConnections.subtract(1, ordering: .relaxed)
        }
        let libraryStatus = connection.flatMap { CMicroHTTPD_get_connection_info($0, .CONNECTION_INFO_HTTP_STATUS) }
            .map { Int($0.pointee.http_status) }
        // A connection the sweep closed for being slow is logged as 408, the status its client earned.
        let slow = state.clock?.closedReason
        logRequest(
            requestID: state.requestID ?? requestIDs.next(), method: state.method, target: state.target,
            status: state.status ?? (slow == nil ? libraryStatus.flatMap { $0 == 0 ? nil : $0 } : 408),
            duration: state.startedAt.duration(to: .now), remoteAddress: state.remoteAddress ?? state.clock?.peer,
            failure: slow.map(describe) ?? (termination == .REQUEST_TERMINATED_COMPLETED_OK ? nil : describe(termination)))
        connectionClocks.requestEnded(on: state.clock)
        inFlightRequests.subtract(1, ordering: .relaxed)
    }

    private func describe(_ termination: MHD_RequestTerminationCode) -> String {
        switch termination {
        case .REQUEST_TERMINATED_TIMEOUT_REACHED: "connection timed out"
        case .REQUEST_TERMINATED_DAEMON_SHUTDOWN: "server shut down"
        case .REQUEST_TERMINATED_READ_ERROR: "read error"
        case .REQUEST_TERMINATED_CLIENT_ABORT: "client closed the connection"
        default: "connection error"
        }
    }
}

/// Ends both directions of `socket`: its peer reads end-of-stream, and a thread reading it fails.
/// (Here, where the C module that brings `SHUT_RDWR` into scope is imported.)
func shutDownSocket(_ socket: Int32) {
    _ = shutdown(socket, Int32(SHUT_RDWR))
}

/// The numeric form of an IPv4 or IPv6 socket address.
private func numericHost(_ address: UnsafeMutablePointer<sockaddr>) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
    let written: UnsafePointer<CChar>?
    switch Int32(address.pointee.sa_family) {
    case AF_INET:
        written = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { ipv4 in
            inet_ntop(AF_INET, &ipv4.pointee.sin_addr, &buffer, socklen_t(buffer.count))
        }
    case AF_INET6:
        written = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { ipv6 in
            inet_ntop(AF_INET6, &ipv6.pointee.sin6_addr, &buffer, socklen_t(buffer.count))
        }
    default:
        return nil
    }
    return written == nil ? nil : string(nullTerminated: buffer)
}

// MARK: - Daemon lifecycle

extension HTTPServer.Core {
    /// Binds and starts the polling threads; the core must outlive the daemon (the server owns both).
    func startDaemon() throws -> DaemonHandle {
        let host = configuration.host, port = configuration.port
        guard (0...65535).contains(port) else { throw HTTPServerError.invalidPort(port) }
        guard var address = SocketAddress(host: host, port: UInt16(port)) else { throw HTTPServerError.invalidHost(host) }
        // poll(2), not epoll: libmicrohttpd 0.9.75 (Debian 12) aborts the process when a daemon with
        // a thread pool on epoll is quiesced while a polling thread drops the listen socket from its
        // epoll set at the same moment (daemon.c, MHD_quiesce_daemon vs MHD_epoll). With poll each
        // thread rebuilds its set every round and checks the quiesce flag, so stopping cannot race.
        var flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_ITC.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
            | MHD_USE_ERROR_LOG.rawValue | MHD_USE_POLL.rawValue
        if address.isIPv6 {
            flags |= MHD_USE_IPv6.rawValue
        }
        let closure = Unmanaged.passUnretained(self).toOpaque()
        let idleSeconds = max(1, configuration.connectionTimeout.components.seconds + (configuration.connectionTimeout.components.attoseconds > 0 ? 1 : 0))
        _ = captureLibraryMessages(true)
        let daemon = address.withSocketAddress { socketAddress in
            CMicroHTTPD_start_daemon(
                flags, socketAddress, UInt32(clamping: configuration.threadCount), UInt32(clamping: idleSeconds),
                UInt32(clamping: configuration.connectionLimit), UInt32(clamping: configuration.perAddressConnectionLimit),
                accessHandler, closure, completeRequest, closure, beginRequest, closure, notifyConnection, closure,
                logLibraryMessage, closure)
        }
        let messages = captureLibraryMessages(false)
        guard let daemon else {
            // libmicrohttpd's own line names the port argument it was not given (0, beside the socket address).
            let inUse = messages.contains { $0.contains("Address already in use") }
            throw HTTPServerError.cannotListen(
                host: host, port: port,
                reason: inUse ? "another server already listens there (address in use)"
                    : messages.isEmpty ? "libmicrohttpd could not start"
                    // Its "Failed to bind to port 0: " names the port argument, not this address's: the system's reason alone.
                    : messages.map { $0.replacingOccurrences(of: #"^Failed to bind to port \d+: "#, with: "", options: .regularExpression) }
                        .joined(separator: "; "))
        }
        let boundPort = CMicroHTTPD_get_daemon_info(daemon, .DAEMON_INFO_BIND_PORT).map { Int($0.pointee.port) } ?? port
        return DaemonHandle(pointer: daemon, port: boundPort)
    }

    /// Stops accepting: new connections are refused at once, open ones keep being served.
    func stopAccepting(_ daemon: DaemonHandle) -> Int32? {
        let listenSocket = MHD_quiesce_daemon(daemon.pointer)
        guard listenSocket >= 0 else { return nil }
        // libmicrohttpd's threads may still hold the descriptor until MHD_stop_daemon, so it is
        // shut down (which makes Linux refuse new connections) and closed only after the stop.
        shutDownSocket(listenSocket)
        return listenSocket
    }

    /// Answers what is still waiting, waits for those answers to be queued, then stops the daemon.
    ///
    /// libmicrohttpd aborts the process when stopped with a suspended connection,
    /// so if a resumed connection is not processed within a few seconds the daemon is left running.
    func stopDaemon(_ daemon: DaemonHandle, listenSocket: Int32?) async {
        isDraining.store(true, ordering: .relaxed)
        let stragglers = answerStragglers()
        if stragglers > 0 {
            logEvent(level: "warning", "answered unfinished requests 503 at shutdown", [("count", String(stragglers))])
        }
        // Resumed connections must be processed before the stop (libmicrohttpd requires it), and
        // the answers just queued should reach the wire: wait for suspended connections to be
        // gone, and briefly for in-flight requests, of which some may be stuck uploading.
        let start = ContinuousClock.now
        while start.duration(to: .now) < .seconds(5) {
            let isSettled =
                inFlightRequests.load(ordering: .relaxed) == 0 || start.duration(to: .now) > .seconds(1)
            if suspendedConnections.load(ordering: .relaxed) == 0 && isSettled {
                break
            }
            try? await Task.sleep(for: .milliseconds(1))
        }
        guard suspendedConnections.load(ordering: .relaxed) == 0 else {
            logEvent(level: "error", "libmicrohttpd left running: connections still suspended")
            return
        }
        MHD_stop_daemon(daemon.pointer)
        if let listenSocket {
            close(listenSocket)
        }
    }
}

extension HTTPServer.Configuration {
    /// Whether the server can listen on `host`: `localhost`, or an IPv4 or IPv6 address (in brackets or not), the rule
    /// ``HTTPServer/start()`` applies; for a configuration to check before it gets there.
    public static func canListen(on host: String) -> Bool {
        SocketAddress(host: host, port: 0) != nil
    }
}

/// An IPv4 or IPv6 socket address parsed from a numeric host.
private struct SocketAddress {
    private var storage = sockaddr_storage()
    let isIPv6: Bool

    init?(host: String, port: UInt16) {
        let numericHost = host == "localhost" ? "127.0.0.1" : host.trimmingBrackets
        var ipv4 = sockaddr_in()
        var ipv6 = sockaddr_in6()
        if inet_pton(AF_INET, numericHost, &ipv4.sin_addr) == 1 {
            ipv4.sin_family = sa_family_t(AF_INET)
            ipv4.sin_port = port.bigEndian
            isIPv6 = false
            store(ipv4)
        } else if inet_pton(AF_INET6, numericHost, &ipv6.sin6_addr) == 1 {
            ipv6.sin6_family = sa_family_t(AF_INET6)
            ipv6.sin6_port = port.bigEndian
            isIPv6 = true
            store(ipv6)
        } else {
            return nil
        }
    }

    private mutating func store<Address>(_ address: Address) {
        withUnsafeBytes(of: address) { source in
            withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) }
        }
    }

    mutating func withSocketAddress<Result>(_ body: (UnsafePointer<sockaddr>) -> Result) -> Result {
        withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1, body)
        }
    }
}

extension String {
    /// `::1` from `[::1]`, as hosts are often written in URLs.
    fileprivate var trimmingBrackets: String {
        hasPrefix("[") && hasSuffix("]") ? String(dropFirst().dropLast()) : self
    }
}
