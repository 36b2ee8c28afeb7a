import Foundation
import TetherAPI
import TetherCore
import TetherJOSE
import TetherTesting

/// Identity Toolkit requests as the Firebase SDKs and firebase-admin send them, against a ``DevService``
/// with the Firebase surface on.
struct FirebaseApp: Sendable {
    let app: DevService
    static let projectID = "tether-firebase-test"
    static let v1 = "/identitytoolkit.googleapis.com/v1"

    static func run(settings: [String: String] = [:], _ body: (FirebaseApp) async throws -> Void) async throws {
        var values = ["TETHER_FIREBASE_PROJECT_ID": projectID, "TETHER_SIGN_IN_FAILURE_LIMIT": "1000"]
        values.merge(settings) { _, given in given }
        try await DevService.run(settings: values) { app in try await body(FirebaseApp(app: app)) }
    }

    /// `POST <v1>/<method>?key=…` as a client.
    func call(_ method: String, _ body: JSONValue, admin: String? = nil) async throws -> FirebaseAnswer {
        var fields: [(key: String, value: String)] = [("Content-Type", "application/json")]
        if let admin { fields.append(("Authorization", "Bearer \(admin)")) }
        return FirebaseAnswer(try await app.client.send(
            "POST", "\(Self.v1)/\(method)?key=fake-api-key", fields: fields, body: Array(try JSONEncoder().encode(body))))
    }

    /// `POST <v1>/projects/<project>/<method>` as firebase-admin does, with `Bearer owner` by default.
    func admin(_ method: String, _ body: JSONValue, as credential: String? = "owner") async throws -> FirebaseAnswer {
        var fields: [(key: String, value: String)] = [("Content-Type", "application/json")]
        if let credential { fields.append(("Authorization", "Bearer \(credential)")) }
        return FirebaseAnswer(try await app.client.send(
            "POST", "\(Self.v1)/projects/\(Self.projectID)/\(method)", fields: fields, body: Array(try JSONEncoder().encode(body))))
    }

    /// `POST /securetoken.googleapis.com/v1/token` with a JSON body, as the iOS SDK sends it.
    func refresh(_ refreshToken: String) async throws -> FirebaseAnswer {
        FirebaseAnswer(try await app.client.post(
            "/securetoken.googleapis.com/v1/token?key=fake-api-key", json: ["grantType": "refresh_token", "refreshToken": refreshToken]))
    }

    /// `accounts:signInWithIdp` with a `postBody`.
    func signInWithIdp(_ postBody: String, idToken: String? = nil, returnIdpCredential: Bool = true) async throws -> FirebaseAnswer {
        var body: [String: JSONValue] = [
            "postBody": .string(postBody), "requestUri": "http://localhost", "returnSecureToken": true,
            "returnIdpCredential": .bool(returnIdpCredential),
        ]
        if let idToken { body["idToken"] = .string(idToken) }
        return try await call("accounts:signInWithIdp", .object(body))
    }

    func appleToken(_ sub: String, email: String? = nil, nonce: String? = nil) async throws -> String {
        var extra: [String: JSONValue] = [:]
        if let nonce { extra["rawNonce"] = .string(nonce) }
        return try app.token("identityToken", of: try await app.apple(sub, email: email, extra: extra))
    }

    func facebookToken(_ userId: String, email: String? = nil) async throws -> String {
        try app.token("accessToken", of: try await app.facebook(userId, email: email))
    }
}

/// A response of the Firebase surface.
typealias FirebaseAnswer = SurfaceAnswer

extension SurfaceAnswer {
    /// `error.message` of an Identity Toolkit error body.
    var errorMessage: String? {
        guard case .object(let error)? = body["error"], case .string(let message)? = error["message"] else { return nil }
        return message
    }

    /// The users of a lookup or batchGet answer.
    var users: [[String: JSONValue]] {
        guard case .array(let users)? = body["users"] else { return [] }
        return users.compactMap { if case .object(let user) = $0 { user } else { nil } }
    }

    /// The payload of the `idToken` (or `id_token`) member, unverified: what a client SDK reads of it.
    var idTokenClaims: [String: JSONValue] {
        guard let token = string("idToken") ?? string("id_token"), let jws = try? CompactJWS(parsing: token),
              let value = try? JSONDecoder().decode(JSONValue.self, from: Data(jws.payload)), case .object(let claims) = value else { return [:] }
        return claims
    }
}
