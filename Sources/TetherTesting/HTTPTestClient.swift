import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A small HTTP/1.1 client over one blocking POSIX socket, for tests against a real server.
///
/// It shares no code with the server (not even header types), so a parsing
/// bug on one side cannot hide the same bug on the other.
///
/// It keeps its socket between requests, so tests can see whether the server
/// keeps connections alive (``connectionsOpened``), and it can send raw bytes
/// to exercise what a well-behaved client would not send. The blocking I/O runs
/// on the client's own serial queue, never on the concurrency pool, and every
/// read and write gives up after `timeout`, so a test never hangs.
///
/// ```swift
/// let client = HTTPTestClient(port: server.boundPort)
/// let response = try await client.post("/v1/sign-in", json: ["provider": "password"])
/// #expect(response.status == 200)
/// ```
public final class HTTPTestClient: Sendable {
    /// Header fields in wire order, looked up case-insensitively.
    public struct Headers: Sendable, Sequence {
        /// The fields in the order they were received.
        public var fields: [(name: String, value: String)] = []

        /// The first value of the field named `name`, ignoring case.
        public subscript(name: String) -> String? {
            fields.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        /// Every value of the fields named `name`, ignoring case.
        public func values(for name: String) -> [String] {
            fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }

        /// Iterates the fields in wire order.
        public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
            fields.makeIterator()
        }
    }

    /// One response as read from the socket.
    public struct Response: Sendable {
        /// The status code.
        public var status: Int
        /// The reason phrase of the status line.
        public var reason: String
        /// The response headers.
        public var headers: Headers
        /// The body, de-chunked.
        public var body: [UInt8]
        /// Whether the server closed the connection after this response (or said it would).
        public var isConnectionClosed: Bool

        /// The body decoded as UTF-8.
        public var bodyText: String {
            String(decoding: body, as: UTF8.self)
        }

        /// Decodes the body as JSON.
        public func decodeJSON<T: Decodable>(_ type: T.Type = T.self) throws -> T {
            try JSONDecoder().decode(T.self, from: Data(body))
        }
    }

    /// The server's host, numeric (`127.0.0.1`, `::1`).
    public let host: String
    /// The server's port.
    public let port: Int
    /// How long one read or write may block.
    public let timeout: Duration

    private let queue: DispatchQueue
    private let connection: Connection

    /// Creates a client; it connects on the first request.
    public init(host: String = "127.0.0.1", port: Int, timeout: Duration = .seconds(30)) {
        self.host = host
        self.port = port
        self.timeout = timeout
        self.queue = DispatchQueue(label: "tether.http-test-client")
        self.connection = Connection()
    }

    deinit {
        // Every queued block retains `self`, so none can be running now.
        connection.close()
    }

    /// How many sockets this client has opened so far; 1 after many requests proves keep-alive.
    public var connectionsOpened: Int {
        queue.sync { connection.opened }
    }

    /// Whether a socket is open for the next request.
    public var isConnected: Bool {
        queue.sync { connection.descriptor != nil }
    }

    /// Opens the socket now instead of at the first request.
    ///
    /// - Throws: ``HTTPTestClientError/connectFailed(errno:)``, with
    ///   `ECONNREFUSED` when nothing listens.
    public func connect() async throws {
        try await onQueue { client, connection in try client.ensureConnected(connection) }
    }

    /// Sends one request and reads its response; the socket stays open unless the server closes it.
    ///
    /// Adds `Host`, and `Content-Length` when there is a body (or the method usually has one).
    public func send(
        _ method: String, _ target: String, headers: KeyValuePairs<String, String> = [:], body: [UInt8] = []
    ) async throws -> Response {
        try await send(method, target, fields: Array(headers), body: body)
    }

    /// Sends a request whose body goes as `Transfer-Encoding: chunked`, one chunk per element.
    public func sendChunked(
        _ method: String, _ target: String, headers: KeyValuePairs<String, String> = [:], chunks: [[UInt8]]
    ) async throws -> Response {
        var message = requestHead(method, target, Array(headers) + [("Transfer-Encoding", "chunked")])
        for chunk in chunks where !chunk.isEmpty {
            message += Array((String(chunk.count, radix: 16) + "\r\n").utf8) + chunk + Array("\r\n".utf8)
        }
        message += Array("0\r\n\r\n".utf8)
        return try await exchange(message, method: method)
    }

    /// `GET` a target.
    public func get(_ target: String, headers: KeyValuePairs<String, String> = [:]) async throws -> Response {
        try await send("GET", target, headers: headers)
    }

    /// `DELETE` a target.
    public func delete(_ target: String, headers: KeyValuePairs<String, String> = [:]) async throws -> Response {
        try await send("DELETE", target, headers: headers)
    }

    /// `POST` raw bytes.
    public func post(_ target: String, headers: KeyValuePairs<String, String> = [:], body: [UInt8]) async throws -> Response {
        try await send("POST", target, headers: headers, body: body)
    }

    /// `POST` a value encoded as JSON, with `Content-Type: application/json`.
    public func post(_ target: String, headers: KeyValuePairs<String, String> = [:], json: some Encodable) async throws -> Response {
        try await sendJSON("POST", target, headers: headers, json: json)
    }

    /// `PUT` a value encoded as JSON.
    public func put(_ target: String, headers: KeyValuePairs<String, String> = [:], json: some Encodable) async throws -> Response {
        try await sendJSON("PUT", target, headers: headers, json: json)
    }

    /// `PATCH` a value encoded as JSON.
    public func patch(_ target: String, headers: KeyValuePairs<String, String> = [:], json: some Encodable) async throws -> Response {
        try await sendJSON("PATCH", target, headers: headers, json: json)
    }

    /// Writes `bytes` exactly as given, connecting first if needed; pair with ``readResponse(method:)``.
    public func sendRaw(_ bytes: [UInt8]) async throws {
        try await onQueue { client, connection in
            try client.ensureConnected(connection)
            try client.write(bytes, to: connection)
        }
    }

    /// Reads one response; `method` tells whether a body follows (`HEAD` has none).
    public func readResponse(method: String = "GET") async throws -> Response {
        try await onQueue { client, connection in
            guard connection.descriptor != nil else { throw HTTPTestClientError.connectionClosed }
            return try client.readResponse(from: connection, method: method)
        }
    }

    /// Closes the socket; the next request opens a new one.
    public func close() async {
        try? await onQueue { _, connection in connection.close() }
    }

    // MARK: - Private

    private func sendJSON(
        _ method: String, _ target: String, headers: KeyValuePairs<String, String>, json: some Encodable
    ) async throws -> Response {
        var fields = Array(headers)
        if !fields.contains(named: "Content-Type") {
            fields.append(("Content-Type", "application/json"))
        }
        return try await send(method, target, fields: fields, body: Array(try JSONEncoder().encode(json)))
    }

    /// Sends one request with header fields built at run time (a list, not literal pairs).
    ///
    /// Adds `Content-Length` when there is a body (or the method usually has one), then exchanges.
    public func send(
        _ method: String, _ target: String, fields: [(key: String, value: String)], body: [UInt8] = []
    ) async throws -> Response {
        var fields = fields
        if !fields.contains(named: "Content-Length") && !fields.contains(named: "Transfer-Encoding")
            && (!body.isEmpty || ["POST", "PUT", "PATCH"].contains(method))
        {
            fields.append(("Content-Length", String(body.count)))
        }
        return try await exchange(requestHead(method, target, fields) + body, method: method)
    }

    /// Writes a whole request and reads its response, connecting first if needed.
    private func exchange(_ message: [UInt8], method: String) async throws -> Response {
        try await onQueue { client, connection in
            try client.ensureConnected(connection)
            do {
                try client.write(message, to: connection)
            } catch HTTPTestClientError.sendFailed(let code) where code == EPIPE || code == ECONNRESET {
                // The answer the server sent before it stopped reading, if it is still there; else the send's failure.
                guard let early = try? client.readResponse(from: connection, method: method) else {
                    connection.close()
                    throw HTTPTestClientError.sendFailed(errno: code)
                }
                return early
            }
            return try client.readResponse(from: connection, method: method)
        }
    }

    private func requestHead(_ method: String, _ target: String, _ headers: [(key: String, value: String)]) -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\n"
        if !headers.contains(named: "Host") {
            head += "Host: \(host.contains(":") ? "[\(host)]" : host):\(port)\r\n"
        }
        for (name, value) in headers {
            head += "\(name): \(value)\r\n"
        }
        head += "\r\n"
        return Array(head.utf8)
    }

    private func onQueue<T: Sendable>(
        _ body: @escaping @Sendable (HTTPTestClient, Connection) throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try body(self, self.connection) })
            }
        }
    }

    private func ensureConnected(_ connection: Connection) throws {
        guard connection.descriptor == nil else { return }
        connection.descriptor = try Self.openSocket(host: host, port: port, timeout: timeout)
        connection.opened += 1
        connection.buffer.removeAll()
    }

    private static func openSocket(host: String, port: Int, timeout: Duration) throws -> Int32 {
        var storage = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        var ipv4 = sockaddr_in()
        var ipv6 = sockaddr_in6()
        if inet_pton(AF_INET, host, &ipv4.sin_addr) == 1 {
            ipv4.sin_family = sa_family_t(AF_INET)
            ipv4.sin_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: withUnsafeBytes(of: ipv4) { $0 }) }
            (family, length) = (AF_INET, socklen_t(MemoryLayout<sockaddr_in>.size))
        } else if inet_pton(AF_INET6, host, &ipv6.sin6_addr) == 1 {
            ipv6.sin6_family = sa_family_t(AF_INET6)
            ipv6.sin6_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: withUnsafeBytes(of: ipv6) { $0 }) }
            (family, length) = (AF_INET6, socklen_t(MemoryLayout<sockaddr_in6>.size))
        } else {
            throw HTTPTestClientError.malformedResponse("host \(host) is not a numeric IP address")
        }
        #if canImport(Glibc)
            let descriptor = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(family, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw HTTPTestClientError.connectFailed(errno: errno) }
        var limit = timeval(
            tv_sec: Int(timeout.components.seconds),
            tv_usec: .init(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var noDelay: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        let result = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connectSocket(descriptor, $0, length) }
        }
        guard result == 0 else {
            let code = errno
            closeSocket(descriptor)
            throw HTTPTestClientError.connectFailed(errno: code)
        }
        return descriptor
    }

    private func write(_ bytes: [UInt8], to connection: Connection) throws {
        guard let descriptor = connection.descriptor else { throw HTTPTestClientError.connectionClosed }
        var offset = 0
        while offset < bytes.count {
            // MSG_NOSIGNAL: a server that closed early must fail this call, not kill the test process.
            let sent = bytes.withUnsafeBytes { sendWithoutSignal(descriptor, $0.baseAddress! + offset, bytes.count - offset) }
            if sent > 0 {
                offset += sent
            } else if sent < 0 && errno == EINTR {
                continue
            } else {
                let code = errno
                // A server that answered early and stopped reading (a 413 before the body) may have its answer waiting:
                // the caller reads it before closing (RFC 9112 §9.5).
                if code != EPIPE && code != ECONNRESET { connection.close() }
                throw code == EAGAIN || code == EWOULDBLOCK ? HTTPTestClientError.timedOut : HTTPTestClientError.sendFailed(errno: code)
            }
        }
    }

    private func readResponse(from connection: Connection, method: String) throws -> Response {
        var response: Response
        repeat {
            response = try readHead(from: connection)
        } while (100...199).contains(response.status) && response.status != 101
        let hasNoBody =
            method.uppercased() == "HEAD" || response.status == 204 || response.status == 304
            || (100...199).contains(response.status)
        if hasNoBody {
            // Nothing to read.
        } else if response.headers["Transfer-Encoding"]?.lowercased().contains("chunked") == true {
            response.body = try readChunkedBody(from: connection)
        } else if let length = response.headers["Content-Length"].flatMap(Int.init) {
            response.body = try read(count: length, from: connection)
        } else {
            response.body = try readToEnd(from: connection)
            response.isConnectionClosed = true
        }
        if response.headers["Connection"]?.lowercased() == "close" {
            response.isConnectionClosed = true
        }
        if response.isConnectionClosed {
            connection.close()
        }
        return response
    }

    private func readHead(from connection: Connection) throws -> Response {
        let head = try readLine(from: connection, terminator: [13, 10, 13, 10])
        var lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        let firstLine = lines.removeFirst()
        let statusLine = firstLine.split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            throw HTTPTestClientError.malformedResponse("status line \(firstLine)")
        }
        var headers = Headers()
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else {
                throw HTTPTestClientError.malformedResponse("header line \(line)")
            }
            headers.fields.append(
                (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return Response(
            status: status, reason: statusLine.count > 2 ? String(statusLine[2]) : "", headers: headers, body: [],
            isConnectionClosed: false)
    }

    private func readChunkedBody(from connection: Connection) throws -> [UInt8] {
        var body: [UInt8] = []
        while true {
            let sizeLine = String(decoding: try readLine(from: connection, terminator: [13, 10]), as: UTF8.self)
            guard let size = Int(sizeLine.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw HTTPTestClientError.malformedResponse("chunk size \(sizeLine)")
            }
            if size == 0 {
                // Trailer fields, if any, end with an empty line.
                while try !readLine(from: connection, terminator: [13, 10]).isEmpty {}
                return body
            }
            body += try read(count: size, from: connection)
            _ = try read(count: 2, from: connection)
        }
    }

    /// The bytes before `terminator`, consuming the terminator too.
    private func readLine(from connection: Connection, terminator: [UInt8]) throws -> [UInt8] {
        var searchFrom = 0
        while true {
            if let end = connection.buffer[searchFrom...].firstRange(of: terminator) {
                let line = Array(connection.buffer[..<end.lowerBound])
                connection.buffer.removeSubrange(..<end.upperBound)
                return line
            }
            searchFrom = max(0, connection.buffer.count - terminator.count + 1)
            guard try fill(connection) else { throw HTTPTestClientError.connectionClosed }
        }
    }

    private func read(count: Int, from connection: Connection) throws -> [UInt8] {
        while connection.buffer.count < count {
            guard try fill(connection) else { throw HTTPTestClientError.connectionClosed }
        }
        defer { connection.buffer.removeSubrange(..<count) }
        return Array(connection.buffer[..<count])
    }

    private func readToEnd(from connection: Connection) throws -> [UInt8] {
        while try fill(connection) {}
        defer { connection.buffer.removeAll() }
        return connection.buffer
    }

    /// Reads what is available into the buffer; `false` at end of stream (the socket is then closed).
    private func fill(_ connection: Connection) throws -> Bool {
        guard let descriptor = connection.descriptor else { return false }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received > 0 {
                connection.buffer += chunk[..<received]
                return true
            }
            if received < 0 && errno == EINTR {
                continue
            }
            let code = errno
            connection.close()
            if received == 0 || code == ECONNRESET {
                return false
            }
            throw code == EAGAIN || code == EWOULDBLOCK ? HTTPTestClientError.timedOut : HTTPTestClientError.receiveFailed(errno: code)
        }
    }

    /// The socket and read buffer.
    ///
    /// Invariant: touched only on the client's serial queue (or in `deinit`,
    /// when no block can be queued), hence `@unchecked Sendable`.
    private final class Connection: @unchecked Sendable {
        var descriptor: Int32?
        var buffer: [UInt8] = []
        var opened = 0

        func close() {
            if let descriptor {
                closeSocket(descriptor)
            }
            descriptor = nil
            buffer.removeAll()
        }
    }
}

extension [(key: String, value: String)] {
    fileprivate func contains(named name: String) -> Bool {
        contains { $0.key.lowercased() == name.lowercased() }
    }
}

// File-scope wrappers: inside the client, `connect`, `send` and `close` name its own methods.

private func connectSocket(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(descriptor, address, length)
}

private func closeSocket(_ descriptor: Int32) {
    _ = close(descriptor)
}

private func sendWithoutSignal(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    send(descriptor, bytes, count, Int32(MSG_NOSIGNAL))
}

/// Why an ``HTTPTestClient`` request failed.
public enum HTTPTestClientError: Error, Equatable, Sendable {
    /// `connect(2)` failed; `ECONNREFUSED` means nothing listens.
    case connectFailed(errno: Int32)
    /// `send(2)` failed.
    case sendFailed(errno: Int32)
    /// `recv(2)` failed.
    case receiveFailed(errno: Int32)
    /// A read or write took longer than the client's timeout.
    case timedOut
    /// The server closed the connection before a complete response.
    case connectionClosed
    /// The bytes received are not an HTTP/1.1 response.
    case malformedResponse(String)
}
