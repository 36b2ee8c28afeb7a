import Foundation
import Synchronization
import TetherCore
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders
import TetherTesting

/// The dev identity provider served by TetherHTTP on a free loopback port, and the
/// identity providers configured against it as `tether dev` would configure them.
///
/// Nonces are recorded in a fresh database of the real test cluster.
final class DevIdPFixture: Sendable {
    let devIdP: DevIdentityProvider
    let server: HTTPServer
    let database: TestDatabase
    let databaseClient: PostgresClient
    let providers: IdentityProviders
    let nonceStore: PostgresNonceStore
    let configuration: ProvidersConfiguration
    let clock: any WallClock

    /// One fixture shared by tests that neither move the clock nor rotate keys; started on first use.
    static let shared = SharedFixture()

    private init(
        devIdP: DevIdentityProvider, server: HTTPServer, database: TestDatabase, databaseClient: PostgresClient,
        providers: IdentityProviders, nonceStore: PostgresNonceStore, configuration: ProvidersConfiguration,
        clock: any WallClock
    ) {
        self.devIdP = devIdP
        self.server = server
        self.database = database
        self.databaseClient = databaseClient
        self.providers = providers
        self.nonceStore = nonceStore
        self.configuration = configuration
        self.clock = clock
    }

    /// Starts a dev identity provider and providers configured from `DevIdentityProvider.configuration(baseURL:)`.
    static func start(
        clock: any WallClock = SystemWallClock(), adjust: (inout ProvidersConfiguration) -> Void = { _ in }
    ) async throws -> DevIdPFixture {
        let devIdP = try DevIdentityProvider(keyDirectory: nil, clock: clock)
        var router = Router()
        router.mount("/dev-idp", devIdP.routes(baseURL: URL(string: "http://127.0.0.1/dev-idp")!))
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: router)
        try server.start()
        let baseURL = URL(string: "http://127.0.0.1:\(server.boundPort)/dev-idp")!
        var configuration = try ProvidersConfiguration.fromEnvironment(DevIdentityProvider.configuration(baseURL: baseURL))
        // Test machines are shared and busy; only tests about timeouts shorten these.
        configuration.facebook.graphTimeout = 30
        configuration.jwksTimeout = 30
        adjust(&configuration)
        let database = try await TestDatabase.make()
        let client = database.client(maxConnections: 4)
        let nonceStore = PostgresNonceStore(client: client)
        let providers = try IdentityProviders(configuration: configuration, nonceStore: nonceStore, clock: clock)
        return DevIdPFixture(
            devIdP: devIdP, server: server, database: database, databaseClient: client, providers: providers,
            nonceStore: nonceStore, configuration: configuration, clock: clock)
    }

    /// Starts a fixture, runs `body`, and always shuts the server and pool down.
    static func run(
        clock: any WallClock = SystemWallClock(), adjust: (inout ProvidersConfiguration) -> Void = { _ in },
        _ body: (DevIdPFixture) async throws -> Void
    ) async throws {
        let fixture = try await start(clock: clock, adjust: adjust)
        do {
            try await body(fixture)
        } catch {
            await fixture.stop()
            throw error
        }
        await fixture.stop()
    }

    func stop() async {
        await server.shutdown()
        databaseClient.shutdown()
    }

    /// `http://127.0.0.1:<port>/dev-idp`.
    var baseURL: URL { URL(string: "http://127.0.0.1:\(server.boundPort)/dev-idp")! }

    /// POSTs `json` to a dev identity provider route and returns the response.
    func post(_ path: String, _ json: [String: JSONValue] = [:]) async throws -> HTTPTestClient.Response {
        try await HTTPTestClient(port: server.boundPort).post("/dev-idp" + path, json: json)
    }

    /// GETs a dev identity provider route.
    func get(_ path: String, headers: KeyValuePairs<String, String> = [:]) async throws -> HTTPTestClient.Response {
        try await HTTPTestClient(port: server.boundPort).get("/dev-idp" + path, headers: headers)
    }

    /// Mints a token at `path` and returns the string member `member` of the answer.
    func mint(_ path: String, _ member: String, _ json: [String: JSONValue]) async throws -> String {
        let response = try await post(path, json)
        guard response.status == 200, let value = try response.decodeJSON([String: String].self)[member] else {
            throw FixtureError("\(path) answered \(response.status): \(response.bodyText)")
        }
        return value
    }

    /// An ID token from the dev identity provider for `provider` (`apple`, `facebook` Limited Login, `google`).
    func idToken(_ provider: ProviderName, _ json: [String: JSONValue] = [:]) async throws -> String {
        switch provider {
        case .apple: try await mint("/apple/token", "identityToken", json)
        case .facebook: try await mint("/facebook/limited-token", "authenticationToken", json)
        default: try await mint("/google/token", "idToken", json)
        }
    }

    /// A classic Facebook access token from the fake Graph API.
    func facebookAccessToken(_ json: [String: JSONValue]) async throws -> String {
        try await mint("/facebook/access-token", "accessToken", json)
    }
}

/// The process-wide fixture, started once by whichever test needs it first.
final class SharedFixture: Sendable {
    private let task = Mutex<Task<DevIdPFixture, any Error>?>(nil)

    func get() async throws -> DevIdPFixture {
        let task = task.withLock { task in
            if let task { return task }
            let started = Task { try await DevIdPFixture.start() }
            task = started
            return started
        }
        return try await task.value
    }
}

/// The credential carrying `token` for `provider`'s ID-token form.
func idTokenCredential(_ provider: ProviderName, _ token: String, rawNonce: String? = nil) -> ProviderCredential {
    switch provider {
    case .apple: .apple(identityToken: token, rawNonce: rawNonce, fullName: nil)
    case .facebook: .facebookLimitedLogin(authenticationToken: token, rawNonce: rawNonce)
    default: .google(idToken: token, rawNonce: rawNonce)
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
