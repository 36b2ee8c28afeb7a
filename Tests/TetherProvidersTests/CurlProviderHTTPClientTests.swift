import Foundation
import Testing
import TetherHTTP
import TetherJOSE
import TetherProviders

@Suite("Outbound HTTP for providers")
struct CurlProviderHTTPClientTests {
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

    let client = CurlProviderHTTPClient()

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

    @Test func onlyHTTPIsSentAndAFieldIsOneLine() async throws {
        try await withServer { port in
            await #expect(throws: HTTPClientError.transport) {
                try await client.get(url: URL(string: "ftp://127.0.0.1:\(port)/echo")!, headers: [:], timeout: 5, maxBytes: 1024)
            }
            await #expect(throws: HTTPClientError.transport) {
                try await client.get(url: URL(string: "file:///etc/passwd")!, headers: [:], timeout: 5, maxBytes: 1024)
            }
            // A field holding a line break never becomes two fields: it is refused, or dropped before it is sent.
            let injected = try? await client.get(
                url: URL(string: "http://127.0.0.1:\(port)/echo")!, headers: ["X-Note": "x\r\nAuthorization: injected"],
                timeout: 5, maxBytes: 1024)
            #expect(injected.map { String(decoding: $0.body, as: UTF8.self) } != "injected")
            // An empty POST body is sent as such, and the echo of a clean field still works after the refusals.
            let answer = try await client.post(
                url: URL(string: "http://127.0.0.1:\(port)/echo")!, headers: [:], body: [], timeout: 5, maxBytes: 1024)
            #expect(answer.status == 404 || answer.status == 405)
            let echo = try await client.get(
                url: URL(string: "http://127.0.0.1:\(port)/echo")!, headers: ["Authorization": "Bearer y"], timeout: 5, maxBytes: 1024)
            #expect(String(decoding: echo.body, as: UTF8.self) == "Bearer y")
        }
    }
}
