import Foundation
import TetherAPI
import TetherCore
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
    let running = try await RunningService.start(databaseURL: databaseURL, values: values, devIdP: false)
    do {
        try await body(running.service, running.client)
    } catch {
        await running.stop()
        throw error
    }
    await running.stop()
}

/// A started service (and dev identity provider) of the API suites: made in one place for every harness.
struct RunningService: Sendable {
    let service: TetherService
    let client: HTTPTestClient
    let idp: DevIdPServer?

    /// Starts a service over `databaseURL` with `values`; with `devIdP`, its providers trust a dev identity
    /// provider on a server of its own, as `tether dev` wires them (and, like `tether dev`, in development
    /// mode, unless `values` holds `TETHER_TEST_PRODUCTION`). Passwords are hashed by `passwords`.
    static func start(
        databaseURL: String, values: [String: String], devIdP: Bool, sms: (any SMSSender)? = nil, mail: (any MailSender)? = nil,
        metricsCollectors: [any MetricsCollector] = [], webhookDelivery: WebhookDeliverer.Configuration = RunningService.fastWebhooks,
        providerCalls: ProviderCallWorker.Configuration = RunningService.quietProviderCalls,
        appleRevalidateMinimum: TimeInterval = GrantRevalidation.appleMinimum, passwords: any PasswordHashing = RunningService.quickPasswords
    ) async throws -> RunningService {
        let idp = devIdP ? try DevIdPServer.start() : nil
        var configuration = idp?.configuration ?? [:]
        configuration.merge(values) { _, given in given }
        configuration["TETHER_LISTEN"] = "127.0.0.1:0"
        do {
            let service = try TetherService(
                configuration: try TetherConfiguration(values: configuration), databaseURL: databaseURL,
                logger: Logger(sink: .discarding),
                passwords: passwords,
                sms: sms ?? idp?.devIdP.smsOutbox, mail: mail ?? idp?.devIdP.mailOutbox, metricsCollectors: metricsCollectors,
                development: devIdP && values["TETHER_TEST_PRODUCTION"] == nil, webhookDelivery: webhookDelivery,
                providerCallsConfiguration: providerCalls, appleRevalidateMinimum: appleRevalidateMinimum)
            try service.start()
            return RunningService(service: service, client: HTTPTestClient(port: service.server.boundPort, timeout: .seconds(30)), idp: idp)
        } catch {
            await idp?.server.shutdown()
            throw error
        }
    }

    /// scrypt at a small work factor: the suites test the flows, not the work factor.
    static var quickPasswords: ScryptPasswordHasher { ScryptPasswordHasher(parameters: .init(logN: 10, blockSize: 8, parallelism: 1)) }

    /// Webhook delivery as tests want it: looking for work every 50 ms, retrying after 50 ms.
    static let fastWebhooks: WebhookDeliverer.Configuration = {
        var configuration = WebhookDeliverer.Configuration()
        configuration.pollInterval = .milliseconds(50)
        configuration.initialBackoff = 0.05
        configuration.maximumBackoff = 0.2
        configuration.timeout = 5
        return configuration
    }()

    /// The provider-call outbox as tests want it: looking for work every 50 ms, retrying after 50 ms.
    static let fastProviderCalls: ProviderCallWorker.Configuration = {
        var configuration = ProviderCallWorker.Configuration()
        configuration.pollInterval = .milliseconds(50)
        configuration.initialBackoff = 0.05
        configuration.maximumBackoff = 0.2
        return configuration
    }()

    /// The outbox looking for work once an hour: suites that are not about provider calls see no
    /// revocation events appear while they count events (``ProviderGrantTests`` takes the fast one).
    static let quietProviderCalls: ProviderCallWorker.Configuration = {
        var configuration = ProviderCallWorker.Configuration()
        // Not even a first look at start: on a busy machine it could come after a test's unlink and revoke its grant.
        configuration.pollInterval = .seconds(3600)
        configuration.firstLookAfter = .seconds(3600)
        return configuration
    }()

    func stop() async {
        await client.close()
        await service.stop()
        await idp?.server.shutdown()
    }
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
    let running = try await RunningService.start(databaseURL: databaseURL, values: [:], devIdP: true)
    do {
        try await body(running.service, running.idp!, running.client)
    } catch {
        await running.stop()
        throw error
    }
    await running.stop()
}
