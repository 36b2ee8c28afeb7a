import Foundation
import TetherAPI
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres
import TetherProviders
import TetherTesting

/// The support suites' name for the one API harness, with the helpers they share.
typealias SupportHarness = DevService

extension DevService {
    /// A pool as the database owner, for looking at the log and tables behind the API.
    var owner: PostgresClient { admin }

    /// A new admin key, made as `tether admin-keys create` makes it.
    func adminKey(_ role: AdminRole, name: String? = nil) async throws -> (key: AdminKey, secret: String) {
        try await AdminKeyStore(database: owner).create(
            role: role, name: name ?? "test \(role.rawValue)", metadata: EventMetadata(actor: .operator("tester"), surface: "cli"))
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
        let minted = try await idp.post(
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

    /// `DELETE` with an admin key, and a `{"reason"}` body and an `Idempotency-Key` when given.
    func adminDelete(_ target: String, key: String, reason: String? = nil, idempotencyKey: String? = nil) async throws -> HTTPTestClient.Response {
        var headers: [(key: String, value: String)] = [("Authorization", "Bearer \(key)")]
        if let idempotencyKey { headers.append(("Idempotency-Key", idempotencyKey)) }
        var body: [UInt8] = []
        if let reason {
            headers.append(("Content-Type", "application/json"))
            body = try JSONEncoder().encode(["reason": reason]).map { $0 }
        }
        return try await client.send("DELETE", target, fields: headers, body: body)
    }

    /// The actions the admin key `keyId` was asked for, as its stream records them (`AdminActionRequested`), in order.
    func actionRecords(of keyId: UUID) async throws -> [AdminEvent.ActionRequested] {
        try await events(inStream: .adminKey(keyId)).filter { $0.type == "AdminActionRequested" }.map {
            try JSONDecoder().decode(AdminEvent.ActionRequested.self, from: $0.data)
        }
    }

    /// The `summary` of every event of `userId`'s history, as `key` reads it (a page of 500).
    func historySummaries(of userId: String, key: String) async throws -> [String] {
        let history = try await adminGet("/v1/admin/users/\(userId)/history?limit=500", key: key)
        return try history.json["events"]?.elements.compactMap { $0["summary"]?.string } ?? []
    }

    /// `pg_dump` of the service's database as plain SQL: what someone who copied the database holds.
    func dump() throws -> String {
        let binaries = try FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql").sorted().reversed()
            .map { "/usr/lib/postgresql/\($0)/bin/pg_dump" }
        guard let pgDump = binaries.first(where: FileManager.default.isExecutableFile) else { throw HarnessError("pg_dump is missing") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: pgDump)
        process.arguments = ["--no-owner", database.url]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw HarnessError("pg_dump failed") }
        return String(decoding: data, as: UTF8.self)
    }

    /// The events of a stream, as the owner reads them.
    func events(inStream stream: StreamName) async throws -> [RecordedEvent] {
        try await PostgresEventStore(client: owner).readStream(stream, after: 0)
    }
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
