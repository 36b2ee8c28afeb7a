import Foundation
import Synchronization
import Testing
import TetherJOSE
import TetherProviders

/// Outbound requests share one pool of libcurl handles: kept-alive connections are reused, and nothing one answer
/// sets (a cookie) rides along on a later request.
@Suite("Outbound HTTP reuses connections and keeps no cookies")
struct CurlConnectionReuseTests {
    /// A loopback HTTP/1.1 server on raw sockets that counts the connections it accepts and answers every
    /// request with a cookie to set and, in the body, the `Cookie` header it received ("-" when none).
    private final class CountingServer: Sendable {
        private let listener: LoopbackSocket
        var port: Int { listener.port }
        private let accepted = Atomic<Int>(0)
        var connections: Int { accepted.load(ordering: .relaxed) }

        init() throws {
            let listening = try LoopbackSocket(backlog: 16)
            listener = listening
            Thread.detachNewThread { [self] in
                while true {
                    let connection = accept(listening.descriptor, nil, nil)
                    guard connection >= 0 else { return }
                    accepted.add(1, ordering: .relaxed)
                    Thread.detachNewThread { Self.serve(connection) }
                }
            }
        }

        /// Answers each request head on `connection` until the client closes it.
        private static func serve(_ connection: Int32) {
            defer { close(connection) }
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { return }
                pending += buffer[0..<count]
                while let end = pending.firstRange(of: Array("\r\n\r\n".utf8)) {
                    let head = String(decoding: pending[..<end.lowerBound], as: UTF8.self)
                    pending.removeSubrange(..<end.upperBound)
                    let cookie = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("cookie:") }
                        .map { String($0.dropFirst("cookie:".count)).trimmingCharacters(in: .whitespaces) } ?? "-"
                    let answer = "HTTP/1.1 200 OK\r\nContent-Length: \(cookie.utf8.count)\r\nSet-Cookie: session=secret; Path=/\r\n\r\n\(cookie)"
                    guard answer.utf8.withContiguousStorageIfAvailable({ write(connection, $0.baseAddress, $0.count) }) == answer.utf8.count
                    else { return }
                }
            }
        }

        func stop() {
            listener.close()
        }
    }

    @Test func sequentialRequestsToAHostShareOneConnectionAndSendNoCookie() async throws {
        let server = try CountingServer()
        defer { server.stop() }
        let client = CurlProviderHTTPClient()
        let url = URL(string: "http://127.0.0.1:\(server.port)/")!
        for round in 0..<5 {
            let answer = round % 2 == 0
                ? try await client.get(url: url, headers: [:], timeout: 10, maxBytes: 1024)
                : try await client.post(url: url, headers: [:], body: Array("{}".utf8), timeout: 10, maxBytes: 1024)
            #expect(answer.status == 200)
            #expect(answer.headers["set-cookie"] == "session=secret; Path=/")
            #expect(String(decoding: answer.body, as: UTF8.self) == "-", "a cookie from an earlier answer was sent")
        }
        #expect(server.connections == 1, "each request opened a connection of its own")
        // The plain client (key sets) shares the same pool and connection.
        _ = try await CurlHTTPClient().get(url: url, timeout: 10, maxBytes: 1024)
        #expect(server.connections == 1)
    }

    @Test func aTimeoutBelowOneSecondIsKeptToTheFraction() async throws {
        // Accepts and never answers: only the client's own deadline ends the request.
        let listening = try LoopbackSocket(backlog: 16)
        defer { listening.close() }
        let url = URL(string: "http://127.0.0.1:\(listening.port)/")!
        let started = ContinuousClock.now
        await #expect(throws: HTTPClientError.transport) {
            try await CurlProviderHTTPClient().get(url: url, headers: [:], timeout: 0.4, maxBytes: 1024)
        }
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(390), "the request gave up after \(elapsed), before its 0.4 s")
        #expect(elapsed < .seconds(1), "the request waited \(elapsed), past its 0.4 s (rounded up to whole seconds?)")
    }
}
