import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 (ephemeral port) for key-set cache tests.
///
/// It answers every request with one configurable response, counts requests,
/// and closes each connection after answering. Connections are served on
/// their own threads so a delayed answer does not hold up the next request.
/// The accept thread keeps the server alive until ``stop()`` is called.
///
/// `@unchecked Sendable` invariant: `response`, `requests` and `isStopped`
/// are only touched while `lock` is held; the listening descriptor is closed
/// only by the accept thread, after its last `accept`.
final class TestHTTPServer: @unchecked Sendable {
    struct Response {
        var status = 200
        var headers: [String: String] = [:]
        var body: [UInt8] = []
        var delay: TimeInterval = 0
    }

    private let lock = NSLock()
    private var response = Response()
    private var requests = 0
    private var isStopped = false
    private let listener: Int32
    let port: Int

    /// The key-set URL on this server.
    var url: URL { URL(string: "http://127.0.0.1:\(port)/.well-known/jwks.json")! }

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let isListening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && listen(descriptor, 128) == 0
                    && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard isListening else {
            close(descriptor)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptConnections() }
    }

    /// What the next requests get.
    func respond(with response: Response) {
        lock.withLock { self.response = response }
    }

    /// Requests answered or being answered so far.
    var requestCount: Int { lock.withLock { requests } }

    /// Stops accepting; later connections are refused.
    func stop() {
        let wasRunning = lock.withLock { () -> Bool in
            defer { isStopped = true }
            return !isStopped
        }
        // Wakes the accept loop, which closes the descriptor itself: closing it here could let
        // another test's new socket reuse the number while this loop still calls accept on it.
        if wasRunning { shutdown(listener, Int32(SHUT_RDWR)) }
    }

    private func acceptConnections() {
        defer { close(listener) }
        while !lock.withLock({ isStopped }) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            Thread.detachNewThread { [self] in serve(client) }
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let endOfHeaders = Array("\r\n\r\n".utf8)
        while !received.ends(with: endOfHeaders) {
            let count = read(client, &buffer, buffer.count)
            guard count > 0 else { return }
            received += buffer[..<count]
        }
        let reply = lock.withLock { () -> Response in
            requests += 1
            return response
        }
        if reply.delay > 0 { Thread.sleep(forTimeInterval: reply.delay) }
        var head = "HTTP/1.1 \(reply.status) Test\r\nContent-Type: application/json\r\n"
        head += "Content-Length: \(reply.body.count)\r\nConnection: close\r\n"
        for (name, value) in reply.headers { head += "\(name): \(value)\r\n" }
        let bytes = Array((head + "\r\n").utf8) + reply.body
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            sent += written
        }
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
