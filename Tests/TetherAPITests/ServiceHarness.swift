import Foundation
import TetherAPI
import TetherCrypto
import TetherHTTP
import TetherTesting

/// Runs a real `TetherService` on 127.0.0.1 (any free port) against `databaseURL`,
/// hands `body` a client for it, and stops both whatever `body` does.
func withService(
    databaseURL: String, _ body: (HTTPTestClient) async throws -> Void
) async throws {
    let service = try TetherService(
        configuration: try TetherConfiguration(values: ["TETHER_LISTEN": "127.0.0.1:0"]), databaseURL: databaseURL,
        logger: Logger(sink: .discarding),
        // A cheap scrypt: these suites test the flows, not the work factor.
        passwords: ScryptPasswordHasher(parameters: .init(logN: 10, blockSize: 8, parallelism: 1)))
    try service.start()
    let client = HTTPTestClient(port: service.server.boundPort)
    do {
        try await body(client)
    } catch {
        await client.close()
        await service.stop()
        throw error
    }
    await client.close()
    await service.stop()
}
