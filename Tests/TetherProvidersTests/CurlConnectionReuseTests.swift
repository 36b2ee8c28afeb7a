import Foundation
import Synchronization
import Testing
import TetherJOSE
import TetherProviders

/// Outbound requests share one libcurl multi handle: kept-alive connections are reused, and nothing one answer
/// sets (a cookie) rides along on a later request.
@Suite("Outbound HTTP reuses connections and keeps no cookies")
struct CurlConnectionReuseTests {
    /// Answers every request with a cookie to set and, in the body, the `Cookie` header it received ("-" when none).
    private static func answerWithCookie(_ head: String) -> String {
        let cookie = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("cookie:") }
            .map { String($0.dropFirst("cookie:".count)).trimmingCharacters(in: .whitespaces) } ?? "-"
        return "HTTP/1.1 200 OK\r\nContent-Length: \(cookie.utf8.count)\r\nSet-Cookie: session=secret; Path=/\r\n\r\n\(cookie)"
    }

    @Test func sequentialRequestsToAHostShareOneConnectionAndSendNoCookie() async throws {
        let server = try RawHTTPServer(answer: Self.answerWithCookie)
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
