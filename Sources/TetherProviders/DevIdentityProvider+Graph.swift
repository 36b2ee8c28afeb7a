import TetherCore
import Foundation
import TetherCrypto

/// What the fake Graph API reads of a request: its query and its `Authorization` header.
public struct DevGraphRequest: Sendable {
    public var query: [String: String]
    public var authorization: String?

    public init(query: [String: String], authorization: String?) {
        self.query = query
        self.authorization = authorization
    }
}

/// The fake Graph API's answer: a status and a JSON body (the route adds the HTTP around it).
public struct DevGraphAnswer: Sendable {
    public var status: Int
    public var body: [UInt8]

    public init(status: Int, body: [UInt8]) {
        self.status = status
        self.body = body
    }

    static func json(_ value: [String: JSONValue], status: Int = 200) throws -> DevGraphAnswer {
        DevGraphAnswer(status: status, body: Array(try encoder.encode(JSONValue.object(value))))
    }

    /// Sorted keys make bodies byte-stable; unescaped slashes keep URLs readable.
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}

extension DevIdentityProvider {
    /// How long session-info tokens live, as in Facebook's documented example answer.
    static let sessionInfoLifetime = 5_183_924

    /// `GET /facebook/graph/debug_token?input_token=…` with the app token as a Bearer header.
    public func debugToken(_ request: DevGraphRequest) async throws -> DevGraphAnswer {
        if isGraphDown { return try Self.graphOutage() }
        guard request.query["access_token"] == nil else {
            return try Self.graphError(100, "The dev Graph API takes the app token only in the Authorization header.")
        }
        guard Self.bearer(request) == "\(Self.facebookAppID)|\(Self.facebookAppSecret)" else {
            return try Self.graphError(190, "Invalid OAuth access token signature.")
        }
        guard let token = request.query["input_token"], let record = graph.record(for: token) else {
            return try Self.graphError(190, "Invalid OAuth access token - Cannot parse access token")
        }
        if let response = try await Self.apply(record.fault) { return response }
        var data: [String: JSONValue] = [
            "app_id": .string(record.appID), "type": .string(record.type), "application": "Tether dev",
            "is_valid": .bool(record.isValid), "issued_at": .int(Int(record.issuedAt.timeIntervalSince1970)),
            "expires_at": .int(record.expiresAt.map { Int($0.timeIntervalSince1970) } ?? 0),
            "scopes": ["email", "public_profile"], "user_id": .string(record.userID),
        ]
        if !record.isValid {
            data["error"] = ["code": 190, "message": "Error validating access token: The session has been invalidated."]
        }
        return try .json(["data": JSONValue.object(data)] as [String: JSONValue])
    }

    /// `GET /facebook/graph/me?fields=…&appsecret_proof=…` with the user token as a Bearer header.
    public func me(_ request: DevGraphRequest) async throws -> DevGraphAnswer {
        if isGraphDown { return try Self.graphOutage() }
        guard let token = Self.bearer(request) ?? request.query["access_token"], let record = graph.record(for: token) else {
            return try Self.graphError(190, "Invalid OAuth access token - Cannot parse access token")
        }
        if let response = try await Self.apply(record.fault) { return response }
        let proof = HMAC.authenticationCode(for: Array(token.utf8), key: Array(Self.facebookAppSecret.utf8), digest: .sha256)
        guard let given = request.query["appsecret_proof"], ConstantTime.isEqual(Array(proof.hexString.utf8), Array(given.utf8)) else {
            return try Self.graphError(100, "Invalid appsecret_proof provided in the API argument")
        }
        guard !record.isSessionInfo else {
            return try Self.graphError(10, "A session info token cannot read the Graph API.", type: "OAuthException")
        }
        guard record.isValid, !isExpired(record) else {
            return try Self.graphError(190, "Error validating access token: The session has been invalidated.")
        }
        var profile: [String: JSONValue] = ["id": .string(record.profileID)]
        let fields = Set((request.query["fields"] ?? "id,name").split(separator: ",").map(String.init))
        let values: [(String, JSONValue?)] = [
            ("name", record.name.map(JSONValue.string)), ("email", record.email.map(JSONValue.string)),
            ("first_name", record.firstName.map(JSONValue.string)), ("last_name", record.lastName.map(JSONValue.string)),
            ("picture", record.picture.map { ["data": ["url": .string($0), "is_silhouette": false, "height": 50, "width": 50]] }),
        ]
        for (name, value) in values where fields.contains(name) { profile[name] = value }
        return try .json(profile)
    }

    /// `GET /facebook/graph/oauth/access_token?grant_type=fb_attenuate_token&client_id=…&fb_exchange_token=…`.
    public func exchangeToken(_ request: DevGraphRequest) throws -> DevGraphAnswer {
        guard request.query["grant_type"] == "fb_attenuate_token" else {
            return try Self.graphError(100, "The dev Graph API supports only grant_type=fb_attenuate_token.")
        }
        guard let token = request.query["fb_exchange_token"], var record = graph.record(for: token), !record.isSessionInfo,
              record.isValid, !isExpired(record) else {
            return try Self.graphError(190, "Invalid OAuth access token - Cannot parse access token")
        }
        guard request.query["client_id"] == record.appID else {
            return try Self.graphError(100, "client_id does not match the app of fb_exchange_token")
        }
        record.isSessionInfo = true
        record.issuedAt = clock.now()
        record.expiresAt = record.issuedAt.addingTimeInterval(TimeInterval(Self.sessionInfoLifetime))
        let exchanged = graph.issue(record)
        return try .json([
            "access_token": .string(exchanged), "token_type": "bearer", "expires_in": .int(Self.sessionInfoLifetime),
        ] as [String: JSONValue])
    }

    private func isExpired(_ record: DevGraphTokens.Record) -> Bool {
        record.expiresAt.map { $0 <= clock.now() } ?? false
    }

    /// The credential of an `Authorization: Bearer …` (or Graph's older `OAuth …`) header.
    private static func bearer(_ request: DevGraphRequest) -> String? {
        guard let value = request.authorization else { return nil }
        for scheme in ["Bearer ", "OAuth "] where value.lowercased().hasPrefix(scheme.lowercased()) {
            return String(value.dropFirst(scheme.count)).trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    /// A Graph-style error: 400 with `{"error": {"message", "type", "code"}}`.
    /// What the Graph API answers while `POST /dev-idp/outage` has it down.
    static func graphOutage() throws -> DevGraphAnswer {
        try DevGraphAnswer.json(["error": ["message": "Service temporarily unavailable", "code": 2, "is_transient": true]], status: 503)
    }

    private static func graphError(_ code: Int, _ message: String, type: String = "OAuthException") throws -> DevGraphAnswer {
        try .json(
            ["error": ["message": .string(message), "type": .string(type), "code": .int(code)]] as [String: JSONValue],
            status: 400)
    }

    /// The fault's answer, after its delay; nil when the fault only delays (or there is none).
    private static func apply(_ fault: DevAccessTokenRequest.GraphFault?) async throws -> DevGraphAnswer? {
        guard let fault else { return nil }
        if let delay = fault.delayMilliseconds, delay > 0 { try await Task.sleep(for: .milliseconds(delay)) }
        guard fault.status != nil || fault.body != nil else { return nil }
        let body = fault.body ?? #"{"error":{"message":"simulated by the dev identity provider","type":"OAuthException","code":2,"is_transient":true}}"#
        return DevGraphAnswer(status: fault.status ?? 200, body: Array(body.utf8))
    }
}
