import Foundation
import Synchronization
import TetherHTTP
import TetherJOSE

/// A key-set endpoint served by Tether's own HTTP server on a free loopback port.
///
/// Every request gets the currently configured response; requests are counted
/// so tests can see how often the cache went to the network.
final class JWKSEndpoint: Sendable {
    struct Response: Sendable {
        var status = 200
        var headers: HTTPHeaders = ["Content-Type": "application/json"]
        var body: [UInt8] = []
        var delay: Duration = .zero
    }

    private struct State {
        var response = Response()
        var requestCount = 0
    }

    private let state = Mutex(State())
    private let port: Int

    private init(port: Int) {
        self.port = port
    }

    /// The `jwks_uri` of this endpoint.
    var url: URL { URL(string: "http://127.0.0.1:\(port)/.well-known/jwks.json")! }

    /// Requests received so far.
    var requestCount: Int { state.withLock { $0.requestCount } }

    /// Sets what the following requests get.
    func respond(with response: Response) {
        state.withLock { $0.response = response }
    }

    /// Serves the public halves of `keys`, with extra `headers`.
    func publish(_ keys: [JWK], headers: HTTPHeaders = [:]) throws {
        var response = Response(body: try JWKSet(keys: keys.compactMap(\.publicJWK)).publicJSONObject().jsonBytes)
        for (name, value) in headers { response.headers[name] = value }
        respond(with: response)
    }

    /// Starts an endpoint, runs `body`, and always shuts the server down.
    static func run(_ body: (JWKSEndpoint) async throws -> Void) async throws {
        let holder = Mutex<JWKSEndpoint?>(nil)
        var router = Router()
        router.get("/.well-known/jwks.json") { _ in
            let response = holder.withLock { $0 }!.state.withLock { state -> Response in
                state.requestCount += 1
                return state.response
            }
            if response.delay > .zero { try await Task.sleep(for: response.delay) }
            return HTTPResponse(status: response.status, headers: response.headers, body: response.body)
        }
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: router)
        try server.start()
        let endpoint = JWKSEndpoint(port: server.boundPort)
        holder.withLock { $0 = endpoint }
        do {
            try await body(endpoint)
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }

    /// A URL on loopback where nothing listens any more.
    static func closedURL() async throws -> URL {
        var url: URL?
        try await run { url = $0.url }
        return url!
    }
}
