import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherProviders

/// The dev identity provider's stand-ins for what Apple and Facebook send Tether outside a sign-in.
extension DevIdentityProvider {
    /// `POST /dev-idp/apple/notification`: what Apple would POST to `/v1/providers/apple/notifications`.
    struct AppleNotificationRequest: Decodable {
        /// `consent-revoked`, `account-delete`, `email-disabled`, `email-enabled`.
        var type: String
        var sub: String
        var email: String?
        var jti: String?
        var eventTime: Double?
        /// `events` as a JSON string (Apple's usual form) unless false.
        var eventsAsString: Bool?
        var aud: String?
        var exp: Double?
        var iat: Double?
        var forge: String?
        /// Where to POST it (a loopback URL, such as the server's `/v1/providers/apple/notifications`).
        var sendTo: String?
    }

    /// `POST /dev-idp/facebook/data-deletion`: what Facebook would POST to `/v1/providers/facebook/data-deletion`.
    struct FacebookDeletionRequest: Decodable {
        var userId: String
        /// Another algorithm name, to be refused.
        var algorithm: String?
        /// Signs with another secret, to be refused.
        var forge: Bool?
        /// Its `issued_at` (Unix seconds) in place of now's, to be refused when old.
        var issuedAt: Int?
        /// Where to POST it (a loopback URL, such as the server's `/v1/providers/facebook/data-deletion`).
        var sendTo: String?
    }

    func registerCallbacks(on router: inout Router) {
        router.post("/apple/notification") { request in
            let body = try request.decodeJSON(AppleNotificationRequest.self)
            var events: [String: JSONValue] = [
                "type": .string(body.type), "sub": .string(body.sub),
                "event_time": .int(Int(body.eventTime ?? Date().timeIntervalSince1970 * 1000)),
            ]
            if let email = body.email {
                events["email"] = .string(email)
                events["is_private_email"] = "true"
            }
            let eventsValue: JSONValue = body.eventsAsString == false
                ? .object(events) : .string(String(decoding: try JSONValue.object(events).jsonBytes(), as: UTF8.self))
            var mint: [String: JSONValue] = [
                "events": eventsValue,
                "claims": ["sub": .null, "auth_time": .null, "nonce_supported": .null, "exp": body.exp.map(JSONValue.double) ?? .null,
                           "jti": .string(body.jti ?? UUID.random().lowercasedText)],
            ]
            if let aud = body.aud { mint["aud"] = .string(aud) }
            if let iat = body.iat { mint["iat"] = .double(iat) }
            if let exp = body.exp { mint["exp"] = .double(exp) }
            if let forge = body.forge { mint["forge"] = .string(forge) }
            let tokenRequest = try JSONDecoder().decode(DevTokenRequest.self, from: Data(try JSONValue.object(mint).jsonBytes()))
            let payload = try self.mintToken(.apple, tokenRequest)
            var answer: [String: JSONValue] = ["payload": .string(payload)]
            if let target = body.sendTo {
                answer.merge(try await Self.send(
                    try JSONValue.object(["payload": .string(payload)]).jsonBytes(), contentType: "application/json", to: target)) { $1 }
            }
            return try .json(JSONValue.object(answer))
        }
        router.post("/facebook/data-deletion") { request in
            let body = try request.decodeJSON(FacebookDeletionRequest.self)
            let payload: JSONValue = [
                "algorithm": .string(body.algorithm ?? "HMAC-SHA256"), "issued_at": .int(body.issuedAt ?? Int(Date().timeIntervalSince1970)),
                "user_id": .string(body.userId),
            ]
            let encoded = Base64URL.encode(try payload.jsonBytes())
            let secret = body.forge == true ? "not the app secret" : Self.facebookAppSecret
            let signature = Base64URL.encode(HMAC.authenticationCode(for: Array(encoded.utf8), key: Array(secret.utf8), digest: .sha256))
            let signedRequest = "\(signature).\(encoded)"
            var answer: [String: JSONValue] = ["signed_request": .string(signedRequest)]
            if let target = body.sendTo {
                let form = "signed_request=" + (signedRequest.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? signedRequest)
                answer.merge(try await Self.send(Array(form.utf8), contentType: "application/x-www-form-urlencoded", to: target)) { $1 }
            }
            return try .json(JSONValue.object(answer))
        }
    }

    /// POSTs what a provider would send to `target`, a loopback URL only (the dev identity provider never
    /// calls out), and answers the status and JSON answer it got.
    private static func send(_ body: [UInt8], contentType: String, to target: String) async throws -> [String: JSONValue] {
        guard let url = URL(string: target), ["http", "https"].contains(url.scheme ?? ""),
              let host = url.host, host == "localhost" || host == "::1" || host.hasPrefix("127.") else {
            throw Problem.badRequest(detail: "sendTo must be a loopback http(s) URL, such as http://localhost:8080/v1/providers/…")
        }
        let answer = try await CurlProviderHTTPClient().post(
            url: url, headers: ["Content-Type": contentType], body: body, timeout: 10, maxBytes: 64 * 1024)
        return ["status": .int(answer.status), "answer": (try? JSONValue(parsing: answer.body)) ?? .string(String(decoding: answer.body, as: UTF8.self))]
    }
}
