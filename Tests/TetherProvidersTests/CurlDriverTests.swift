import Foundation
import Synchronization
import Testing
import TetherJOSE
import TetherProviders

/// Every outbound transfer runs on one libcurl multi handle driven by one thread: a request waiting for its answer
/// holds no thread, so many slow ones wait side by side, and a cancelled one ends at once.
@Suite("Outbound HTTP waits without holding threads")
struct CurlDriverTests {
    @Test func fortyEightRequestsAnsweredAfterASecondEachTakeAboutASecondTogether() async throws {
        // Each connection has a thread of its own at the server: the server is never what makes requests wait.
        let server = try RawHTTPServer(backlog: 128) { _ in
            Thread.sleep(forTimeInterval: 1)
            return "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate"
        }
        defer { server.stop() }
        let client = CurlProviderHTTPClient()
        let url = URL(string: "http://127.0.0.1:\(server.port)/slow")!
        let started = ContinuousClock.now
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<48 {
                group.addTask { try await client.get(url: url, headers: [:], timeout: 20, maxBytes: 1024).status }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        let elapsed = ContinuousClock.now - started
        #expect(statuses == Array(repeating: 200, count: 48))
        // Requests that each held a thread while they waited would queue behind the threads the system grants.
        #expect(elapsed < .milliseconds(2500), "48 requests of a second each took \(elapsed): they did not wait side by side")
    }

    @Test func aCancelledRequestEndsAtOnceWhileThePeerSaysNothing() async throws {
        // Connections complete in the kernel's backlog and are never read: nothing but the cancel ends a request.
        let listening = try LoopbackSocket(backlog: 16)
        defer { listening.close() }
        let client = CurlProviderHTTPClient()
        let url = URL(string: "http://127.0.0.1:\(listening.port)/")!
        for round in 0..<5 {
            let request = Task { try await client.get(url: url, headers: ["X-Round": "\(round)"], timeout: 30, maxBytes: 1024) }
            try await Task.sleep(for: .milliseconds(150))
            let cancelled = ContinuousClock.now
            request.cancel()
            await #expect(throws: HTTPClientError.transport) { try await request.value }
            let took = ContinuousClock.now - cancelled
            #expect(took < .milliseconds(250), "round \(round): the cancelled request ended \(took) after the cancel")
        }
    }
}
