import Foundation
import Testing
import TetherHTTP
import TetherJOSE
import TetherProviders

@Suite("Outbound HTTP for providers")
struct URLSessionProviderHTTPClientTests {
    /// Runs a loopback server whose routes echo the Authorization header, redirect, and stall.
    private func withServer(_ body: (Int) async throws -> Void) async throws {
        var router = Router()
        router.get("/echo") { request in .text(request.headers["Authorization"] ?? "none") }
        router.get("/redirect") { _ in HTTPResponse(status: 302, headers: ["Location": "/echo"]) }
        router.get("/slow") { _ in
            try await Task.sleep(for: .milliseconds(1500))
            return .text("late")
        }
        router.get("/large") { _ in .text(String(repeating: "x", count: 10_000)) }
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: router)
        try server.start()
        do {
            try await body(server.boundPort)
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }

    let client = URLSessionProviderHTTPClient()

    @Test func headersAreSentAndRedirectsAreNotFollowed() async throws {
        try await withServer { port in
            let echo = try await client.get(
                url: URL(string: "http://127.0.0.1:\(port)/echo")!, headers: ["Authorization": "Bearer app|secret"],
                timeout: 30, maxBytes: 1024)
            #expect(String(decoding: echo.body, as: UTF8.self) == "Bearer app|secret")
            for headers in [["Authorization": "Bearer x"], [:]] {
                let redirect = try await client.get(
                    url: URL(string: "http://127.0.0.1:\(port)/redirect")!, headers: headers, timeout: 30, maxBytes: 1024)
                #expect(redirect.status == 302)
            }
        }
    }

    @Test(arguments: [["Authorization": "Bearer x"], [:]])
    func slowAndOversizedAnswersAreErrors(headers: [String: String]) async throws {
        try await withServer { port in
            await #expect(throws: HTTPClientError.transport) {
                try await client.get(url: URL(string: "http://127.0.0.1:\(port)/slow")!, headers: headers, timeout: 0.3, maxBytes: 1024)
            }
            await #expect(throws: HTTPClientError.responseTooLarge) {
                try await client.get(url: URL(string: "http://127.0.0.1:\(port)/large")!, headers: headers, timeout: 30, maxBytes: 1024)
            }
        }
    }
}
