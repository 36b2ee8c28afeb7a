import TetherCore
import Foundation
import TetherHTTP
import TetherProviders
import TetherJOSE

extension DevIdentityProvider {
    /// Every route of API.md "Dev identity provider", relative to where it is mounted (`/dev-idp`).
    ///
    /// | route | does |
    /// |---|---|
    /// | `GET /` | the endpoints, client ids and the matching `TETHER_*` variables |
    /// | `POST /apple/token`, `GET /apple/auth/keys` | Apple identity tokens (`{"identityToken"}`) and their JWKS |
    /// | `POST /facebook/limited-token`, `GET /facebook/jwks` | Limited Login tokens (`{"authenticationToken"}`) and their JWKS |
    /// | `POST /facebook/access-token` | classic tokens (`{"accessToken"}`) for the fake Graph API |
    /// | `GET /facebook/graph/debug_token`, `/me`, `/oauth/access_token` | the fake Graph API |
    /// | `POST /google/token`, `GET /google/certs` | Google ID tokens (`{"idToken"}`) and their JWKS |
    /// | `POST /{apple,facebook,google}/rotate-key` | a new signing key (`{"kid"}`); the old one stays published |
    /// | `GET /sms` (`?phoneNumber=`), `DELETE /sms` | the SMS outbox |
    /// | `POST /apple/notification` | `{type, sub, email?, jti?, sendTo?, …}` → `{"payload"}`: an Apple server-to-server notification (POSTed to a loopback `sendTo`) |
    /// | `POST /facebook/data-deletion` | `{userId, issuedAt?, sendTo?}` → `{"signed_request"}`: a Facebook data deletion request (POSTed to a loopback `sendTo`) |
    /// | `GET /mail` (`?to=`), `DELETE /mail` | the mail outbox (and links generated for admins, `mailed: false`) |
    /// | `POST /apple/authorization-code`, `/apple/auth/token`, `/apple/auth/revoke`, … | provider grants (``registerGrants(on:)``) |
    ///
    /// - Parameter baseURL: the URL the routes are mounted at, such as
    ///   `http://127.0.0.1:8080/dev-idp`, for the discovery document.
    public func routes(baseURL: URL) -> Router {
        var router = Router()
        router.get("/") { _ in try .json(self.discovery(baseURL)) }
        let tokenRoutes: [(ProviderName, String, String, String)] = [
            (.apple, "/apple/token", "identityToken", "/apple/auth/keys"),
            (.facebook, "/facebook/limited-token", "authenticationToken", "/facebook/jwks"),
            (.google, "/google/token", "idToken", "/google/certs"),
        ]
        for (provider, mintPath, member, keysPath) in tokenRoutes {
            router.post(mintPath) { request in
                let body = request.body.isEmpty ? DevTokenRequest() : try request.decodeJSON(DevTokenRequest.self)
                return try .json([member: try self.mintToken(provider, body)])
            }
            router.get(keysPath) { _ in
                HTTPResponse(
                    status: 200, headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
                    body: try self.publishedKeySet(provider))
            }
            router.post("/\(provider.rawValue)/rotate-key") { _ in
                try .json(["kid": try self.rotateKey(provider)])
            }
        }
        registerCallbacks(on: &router)
        registerGrants(on: &router)
        router.post("/facebook/access-token") { request in
            try .json(["accessToken": self.mintAccessToken(try request.decodeJSON(DevAccessTokenRequest.self))])
        }
        router.get("/facebook/graph/debug_token") { request in try await self.debugToken(Self.graphRequest(request)).response }
        router.get("/facebook/graph/me") { request in try await self.me(Self.graphRequest(request)).response }
        router.get("/facebook/graph/oauth/access_token") { request in try self.exchangeToken(Self.graphRequest(request)).response }
        // The outboxes hold codes that sign people in: only the developer's own tools read them, as owner calls
        // (not a page whose name was re-pointed at this machine, nor a client a trusted proxy passes on).
        router.get("/sms") { request in
            try Self.requireThisMachine(request)
            return try .json(["messages": self.smsOutbox.messages(to: request.query["phoneNumber"])])
        }
        router.get("/mail") { request in
            try Self.requireThisMachine(request)
            return try .json(["mails": self.mailOutbox.mails(to: request.query["to"])])
        }
        router.delete("/mail") { request in
            try Self.requireThisMachine(request)
            self.mailOutbox.removeAll()
            return .noContent()
        }
        router.delete("/sms") { request in
            try Self.requireThisMachine(request)
            self.smsOutbox.removeAll()
            return .noContent()
        }
        return router
    }

    private static func graphRequest(_ request: HTTPRequest) -> DevGraphRequest {
        DevGraphRequest(query: request.query, authorization: request.headers["Authorization"])
    }

    /// What `GET /dev-idp/` answers: where everything is, for a newcomer with curl.
    private func discovery(_ baseURL: URL) -> [String: JSONValue] {
        let defaults = ProvidersConfiguration()
        func entry(_ issuer: String, _ audience: String, _ mint: String, _ keys: String) -> JSONValue {
            [
                "issuer": .string(issuer), "audience": .string(audience),
                "mint": .string("POST " + Self.endpoint(baseURL, mint)), "jwksUrl": .string(Self.endpoint(baseURL, keys)),
            ]
        }
        return [
            "apple": entry(defaults.apple.issuer, Self.appleClientID, "apple/token", "apple/auth/keys"),
            "facebookLimitedLogin": entry(
                defaults.facebook.limitedLoginIssuer, Self.facebookAppID, "facebook/limited-token", "facebook/jwks"),
            "facebookGraph": [
                "mint": .string("POST " + Self.endpoint(baseURL, "facebook/access-token")),
                "graphUrl": .string(Self.endpoint(baseURL, "facebook/graph")), "appId": .string(Self.facebookAppID),
            ],
            "google": entry(defaults.google.issuer, Self.googleClientID, "google/token", "google/certs"),
            "sms": .string("GET " + Self.endpoint(baseURL, "sms")),
            "mail": .string("GET " + Self.endpoint(baseURL, "mail")),
            "environment": .object(Self.configuration(baseURL: baseURL).mapValues(JSONValue.string)),
        ]
    }
}

extension DevGraphAnswer {
    /// The answer as the fake Graph API's HTTP response.
    var response: HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: body)
    }
}

extension DevIdentityProvider {
    /// 404 unless `request` comes from this machine's own tools (``PublicBase/isFromThisMachine(_:)``).
    static func requireThisMachine(_ request: HTTPRequest) throws {
        guard PublicBase.isFromThisMachine(request) else { throw Problem.notFound() }
    }
}
