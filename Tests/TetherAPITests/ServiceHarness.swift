import Foundation
import TetherAPI
import TetherCrypto
import TetherHTTP
import TetherProviders
import TetherTesting

/// Runs a real `TetherService` on 127.0.0.1 (any free port) against `databaseURL`,
/// hands `body` a client for it, and stops both whatever `body` does.
func withService(
    databaseURL: String, _ body: (HTTPTestClient) async throws -> Void
) async throws {
    try await withService(databaseURL: databaseURL, values: [:]) { _, client in try await body(client) }
}

/// Runs a real `TetherService` configured with `values` (beside a free loopback port) and hands `body` the service and a client.
func withService(
    databaseURL: String, values: [String: String], _ body: (TetherService, HTTPTestClient) async throws -> Void
) async throws {
    let service = try TetherService(
        configuration: try TetherConfiguration(values: values.merging(["TETHER_LISTEN": "127.0.0.1:0"]) { _, listen in listen }),
        databaseURL: databaseURL, logger: Logger(sink: .discarding),
        // A cheap scrypt: these suites test the flows, not the work factor.
        passwords: ScryptPasswordHasher(parameters: .init(logN: 10, blockSize: 8, parallelism: 1)))
    try service.start()
    let client = HTTPTestClient(port: service.server.boundPort)
    do {
        try await body(service, client)
    } catch {
        await client.close()
        await service.stop()
        throw error
    }
    await client.close()
    await service.stop()
}

/// A dev identity provider on a loopback server of its own, as `tether dev` mounts it.
struct DevIdPServer: Sendable {
    let devIdP: DevIdentityProvider
    let server: HTTPServer

    /// Starts one with in-memory keys on a free port.
    static func start() throws -> DevIdPServer {
        let devIdP = try DevIdentityProvider(keyDirectory: nil)
        var router = Router()
        router.mount("/dev-idp", devIdP.routes(baseURL: URL(string: "http://127.0.0.1/dev-idp")!))
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: router)
        try server.start()
        return DevIdPServer(devIdP: devIdP, server: server)
    }

    /// The `TETHER_*` values that point provider verification at it.
    var configuration: [String: String] {
        DevIdentityProvider.configuration(baseURL: URL(string: "http://127.0.0.1:\(server.boundPort)/dev-idp")!)
    }

    /// A client for its routes (`/dev-idp/…`).
    func client() -> HTTPTestClient { HTTPTestClient(port: server.boundPort) }
}

/// Runs a dev identity provider (in-memory keys) and a service whose providers trust it, as `tether dev` wires them.
func withDevService(
    databaseURL: String, _ body: (TetherService, DevIdPServer, HTTPTestClient) async throws -> Void
) async throws {
    let idp = try DevIdPServer.start()
    let server = idp.server
    do {
        try await withService(databaseURL: databaseURL, values: idp.configuration) { service, client in
            try await body(service, idp, client)
        }
    } catch {
        await server.shutdown()
        throw error
    }
    await server.shutdown()
}
