import Foundation
import TetherAPI
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres
import TetherProviders
import TetherTesting

/// A real `TetherService` on a free loopback port with its identity providers pointed at a
/// dev identity provider on another port, over a fresh migrated database of the test cluster.
final class SupportHarness: Sendable {
    let database: TestDatabase
    /// A pool as the database owner, for looking at the log and tables behind the API.
    let owner: PostgresClient
    let service: TetherService
    let devIdP: HTTPServer
    let client: HTTPTestClient

    private init(database: TestDatabase, owner: PostgresClient, service: TetherService, devIdP: HTTPServer) {
        self.database = database
        self.owner = owner
        self.service = service
        self.devIdP = devIdP
        self.client = HTTPTestClient(port: service.server.boundPort)
    }

    /// Starts everything, runs `body`, and stops everything whatever `body` does.
    static func run(
        metricsCollectors: [any MetricsCollector] = [], _ body: (SupportHarness) async throws -> Void
    ) async throws {
        let database = try await TestDatabase.make()
        let idp = try DevIdPServer.start()
        let devIdP = idp.server
        var values = idp.configuration
        values["TETHER_LISTEN"] = "127.0.0.1:0"
        let service = try TetherService(
            configuration: try TetherConfiguration(values: values), databaseURL: database.url, logger: Logger(sink: .discarding),
            passwords: ScryptPasswordHasher(parameters: .init(logN: 10, blockSize: 8, parallelism: 1)),
            metricsCollectors: metricsCollectors)
        try service.start()
        let harness = SupportHarness(
            database: database, owner: database.client(asServiceRole: false, maxConnections: 2), service: service, devIdP: devIdP)
        do {
            try await body(harness)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    private func stop() async {
        await client.close()
        await service.stop()
        await devIdP.shutdown()
        owner.shutdown()
    }

    /// A new admin key, made as `tether admin-keys create` makes it.
    func adminKey(_ role: AdminRole, name: String? = nil) async throws -> (key: AdminKey, secret: String) {
        try await AdminKeyStore(database: owner).create(
            role: role, name: name ?? "test \(role.rawValue)", metadata: EventMetadata(actor: .operator("tester"), surface: "cli"))
    }

    struct SignedIn: Decodable {
        struct User: Decodable { var id: String }
        struct Session: Decodable { var accessToken: String }
        var user: User
        var session: Session
    }

    /// Signs a password user up over `/v1`; answers their id and access token.
    func signUp(_ email: String, displayName: String = "Ada") async throws -> (id: UUID, accessToken: String) {
        let response = try await client.post(
            "/v1/sign-up", headers: ["User-Agent": "support-tests/1"],
            json: ["email": email, "password": "correct horse battery", "displayName": displayName])
        guard response.status == 201 else { throw HarnessError("sign-up answered \(response.status): \(response.bodyText)") }
        let body = try response.decodeJSON(SignedIn.self)
        return (UUID(uuidString: body.user.id)!, body.session.accessToken)
    }

    /// Links a Facebook identity (classic token from the dev Graph API) to the user of `accessToken`.
    func linkFacebook(_ accessToken: String, facebookUserID: String, email: String) async throws {
        let minted = try await HTTPTestClient(port: devIdP.boundPort).post(
            "/dev-idp/facebook/access-token", json: ["userId": facebookUserID, "email": email])
        guard minted.status == 200, let token = try minted.decodeJSON([String: String].self)["accessToken"] else {
            throw HarnessError("the dev identity provider answered \(minted.status): \(minted.bodyText)")
        }
        let linked = try await client.post(
            "/v1/users/me/identities", headers: ["Authorization": "Bearer \(accessToken)"],
            json: ["provider": JSONValue.string("facebook"), "credential": ["accessToken": .string(token)]])
        guard linked.status == 200 else { throw HarnessError("link answered \(linked.status): \(linked.bodyText)") }
    }

    /// `GET` with an admin key.
    func adminGet(_ target: String, key: String) async throws -> HTTPTestClient.Response {
        try await client.get(target, headers: ["Authorization": "Bearer \(key)"])
    }

    /// `POST` with an admin key and an optional JSON body.
    func adminPost(_ target: String, key: String, json: [String: String]? = nil) async throws -> HTTPTestClient.Response {
        if let json {
            return try await client.post(target, headers: ["Authorization": "Bearer \(key)"], json: json)
        }
        return try await client.post(target, headers: ["Authorization": "Bearer \(key)"], body: [])
    }

    /// The events of a stream, as the owner reads them.
    func events(inStream stream: StreamName) async throws -> [RecordedEvent] {
        try await PostgresEventStore(client: owner).readStream(stream, after: 0)
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A response body as loose JSON, for reading members the tests check.
extension HTTPTestClient.Response {
    var json: JSONValue {
        get throws { try decodeJSON(JSONValue.self) }
    }
}

extension JSONValue {
    /// The member `key` of an object (nil otherwise).
    subscript(_ key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    /// The elements of an array (empty otherwise).
    var elements: [JSONValue] {
        guard case .array(let values) = self else { return [] }
        return values
    }

    /// The string inside, if it is one.
    var string: String? {
        guard case .string(let text) = self else { return nil }
        return text
    }

    /// The integer inside, if it is one.
    var int: Int? {
        guard case .int(let number) = self else { return nil }
        return number
    }
}
