import TetherCore
import Foundation
import Synchronization
import TetherHTTP
import TetherTesting

/// Collects the server's log lines so tests can read them.
final class LogCollector: Sendable {
    private let lines = Mutex<[String]>([])

    var sink: LogSink {
        LogSink { line in self.lines.withLock { $0.append(line) } }
    }

    /// The log lines parsed as JSON objects; a line that is not a JSON object fails the caller.
    func records() throws -> [[String: Any]] {
        try lines.withLock { $0 }.map { line in
            guard let record = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw FixtureError("log line is not a JSON object: \(line)")
            }
            return record
        }
    }

    /// Waits up to a second for a record matching `predicate`: the access line is written
    /// when libmicrohttpd reports completion, which can be just after the client has the response.
    func record(where predicate: ([String: Any]) -> Bool) async throws -> [String: Any]? {
        for _ in 0..<200 {
            if let found = try records().first(where: predicate) {
                return found
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Starts a server on a free loopback port, runs `body`, and always shuts the server down.
func withServer(
    _ router: Router,
    configure: (inout HTTPServer.Configuration) -> Void = { _ in },
    _ body: (HTTPServer, HTTPTestClient, LogCollector) async throws -> Void
) async throws {
    let logs = LogCollector()
    var configuration = HTTPServer.Configuration(port: 0, log: logs.sink)
    configure(&configuration)
    let server = HTTPServer(configuration: configuration, router: router)
    try server.start()
    let client = HTTPTestClient(port: server.boundPort, timeout: .seconds(10))
    do {
        try await body(server, client, logs)
    } catch {
        await server.shutdown()
        throw error
    }
    await server.shutdown()
}

/// A one-way signal from a handler to the test: `wait()` returns after the first `signal()`.
final class Checkpoint: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Void.self)
    }

    func signal() {
        continuation.yield()
    }

    /// Returns once signalled, or after `limit` (so a broken server fails the test instead of hanging it).
    func wait(limit: Duration = .seconds(10)) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { [stream] in
                for await _ in stream { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}

extension HTTPTestClient.Response {
    /// The `code` member of a problem+json body.
    var problemCode: String? {
        guard case .string(let code)? = (try? decodeJSON([String: JSONValue].self))?["code"] else { return nil }
        return code
    }
}
