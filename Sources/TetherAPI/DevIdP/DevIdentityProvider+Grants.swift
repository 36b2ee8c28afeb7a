import Foundation
import TetherCore
import TetherHTTP
import TetherJOSE
import TetherProviders

/// The dev identity provider's stand-ins for the provider endpoints Tether calls about grants: Apple's
/// token and revoke endpoints, Graph's permission revocation, and what tests need around them.
extension DevIdentityProvider {
    private struct CodeRequest: Decodable {
        var sub: String
        var aud: String?
    }

    private struct GrantEnd: Decodable {
        var sub: String?
        var userId: String?
    }

    private struct Outage: Decodable {
        var endpoint: String
        var down: Bool
    }

    /// | route | does |
    /// |---|---|
    /// | `POST /apple/authorization-code` | `{sub, aud?}` → `{"authorizationCode"}` (single use, 5 minutes) |
    /// | `POST /apple/auth/token`, `POST /apple/auth/revoke` | Apple's endpoints (forms), the client secret checked |
    /// | `POST /apple/revoke-grant`, `POST /facebook/revoke-grant` | `{sub}` / `{userId}`: the person removes the app |
    /// | `GET /apple/revocations`, `GET /facebook/revocations` | the revocations received |
    /// | `POST /facebook/graph/{user-id}/permissions?method=delete` | Graph's permission revocation |
    /// | `POST /outage` | `{endpoint, down}`: `apple/auth/token`, `apple/auth/revoke` or `facebook/graph` answer 503 |
    func registerGrants(on router: inout Router) {
        router.post("/apple/authorization-code") { request in
            let body = try request.decodeJSON(CodeRequest.self)
            return try .json(["authorizationCode": self.appleAuthorizationCode(sub: body.sub, clientID: body.aud)])
        }
        router.post("/apple/auth/token") { request in try Self.answer(try self.appleToken(Self.form(request))) }
        router.post("/apple/auth/revoke") { request in try Self.answer(self.appleRevoke(Self.form(request))) }
        router.post("/apple/revoke-grant") { request in
            guard let sub = try request.decodeJSON(GrantEnd.self).sub else { throw ProviderError.invalidRequest("sub is required") }
            return try .json(["ended": JSONValue.int(self.endAppleGrant(sub: sub))])
        }
        router.post("/facebook/revoke-grant") { request in
            guard let userID = try request.decodeJSON(GrantEnd.self).userId else { throw ProviderError.invalidRequest("userId is required") }
            return try .json(["ended": JSONValue.int(self.endFacebookGrant(userID: userID))])
        }
        for provider in ["apple", "facebook"] {
            router.get("/\(provider)/revocations") { _ in try .json(["revocations": JSONValue.array(self.revocations(of: provider))]) }
        }
        router.post("/facebook/graph/{id}/permissions") { request in
            let graph = DevGraphRequest(query: request.query, authorization: request.headers["Authorization"])
            let answer = try self.revokePermissions(userID: request.pathParameters["id"] ?? "", graph)
            return HTTPResponse(status: answer.status, headers: ["Content-Type": "application/json"], body: answer.body)
        }
        router.post("/outage") { request in
            let body = try request.decodeJSON(Outage.self)
            try self.setOutage(body.endpoint, down: body.down)
            return .noContent()
        }
    }

    private static func form(_ request: HTTPRequest) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in HTTPRequest.formFields(String(decoding: request.body, as: UTF8.self)) where fields[name] == nil {
            fields[name] = value
        }
        return fields
    }

    private static func answer(_ answer: GrantAnswer) throws -> HTTPResponse {
        HTTPResponse(
            status: answer.status, headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: try answer.body.jsonBytes())
    }
}
