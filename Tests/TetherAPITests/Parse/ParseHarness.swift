import Foundation
import TetherAPI
import TetherCore
import TetherTesting

/// Parse requests as the Parse-Swift SDK puts them on the wire (WIRE-FACTS §5), against a ``DevService``
/// whose Parse surface is on.
struct ParseApp: Sendable {
    let app: DevService
    static let appID = "tether-parse-test"

    /// Runs `body` against a fresh service with the Parse surface on; `settings` adds `TETHER_*` values.
    static func run(settings: [String: String] = [:], sms: (any SMSSender)? = nil, _ body: (ParseApp) async throws -> Void) async throws {
        var values = ["TETHER_PARSE_APP_ID": appID, "TETHER_SIGN_IN_FAILURE_LIMIT": "1000"]
        values.merge(settings) { _, given in given }
        try await DevService.run(settings: values, sms: sms) { app in try await body(ParseApp(app: app)) }
    }

    /// Events in users' streams: what a refused request must not add to (refused credentials are recorded
    /// apart: counted for the limits, and as `SignInFailed` in the history of a known account).
    func accountEvents() async throws -> Int {
        try await app.admin.query("SELECT count(*)::int AS n FROM events WHERE stream LIKE 'user-%'")[0].decode("n")
    }

    /// The headers of one request: the application id (unless `appID` is nil), then the optional ones.
    struct Headers: Sendable {
        var appID: String? = ParseApp.appID
        var session: String?
        var installation: String?
        var requestId: String?
        var master: String?
        var clientKey: String?

        var fields: [(key: String, value: String)] {
            var fields: [(key: String, value: String)] = [("X-Parse-Client-Version", "swift6.1.0")]
            if let appID { fields.append(("X-Parse-Application-Id", appID)) }
            if let session { fields.append(("X-Parse-Session-Token", session)) }
            if let installation { fields.append(("X-Parse-Installation-Id", installation)) }
            if let requestId { fields.append(("X-Parse-Request-Id", requestId)) }
            if let master { fields.append(("X-Parse-Master-Key", master)) }
            if let clientKey { fields.append(("X-Parse-Client-Key", clientKey)) }
            return fields
        }
    }

    /// Sends `method path` under `/parse` with `json` (or raw `body`) and `headers`.
    func send(
        _ method: String, _ path: String, _ headers: Headers = Headers(), json: JSONValue? = nil, body: [UInt8]? = nil,
        on client: HTTPTestClient? = nil
    ) async throws -> ParseAnswer {
        var fields = headers.fields
        var bytes: [UInt8] = []
        if let json {
            fields.append(("Content-Type", "application/json"))
            bytes = Array(try JSONEncoder().encode(json))
        } else if let body {
            fields.append(("Content-Type", "application/json"))
            bytes = body
        }
        return ParseAnswer(try await (client ?? app.client).send(method, "/parse" + path, fields: fields, body: bytes))
    }

    /// Parse-Swift's `login(type, authData:)` with no current user: `POST /users {"authData": {type: fields}}`.
    func logIn(_ provider: String, _ fields: [String: String], _ headers: Headers = Headers()) async throws -> ParseAnswer {
        try await send("POST", "/users", headers, json: .object(["authData": .object([provider: Self.strings(fields)])]))
    }

    /// Marks the email of the user `objectId` proved, as the master key's `PUT` does (a second factor needs a proved address).
    func proveEmail(objectId: String) async throws {
        let master = try await app.adminKey(.admin).secret
        let proved = try await send("PUT", "/users/\(objectId)", .init(master: master), json: .object(["emailVerified": .bool(true)]))
        guard proved.status == 200 else { throw HarnessError("emailVerified answered \(proved.status): \(proved.text)") }
    }

    /// Parse-Swift's `User.anonymous.login()`: a fresh lowercased UUID as the id.
    func anonymousLogIn(id: String = UUID().uuidString.lowercased(), _ headers: Headers = Headers()) async throws -> ParseAnswer {
        try await logIn("anonymous", ["id": id], headers)
    }

    /// An Apple identity token minted by the dev identity provider for `sub`.
    func appleToken(_ sub: String, email: String? = nil) async throws -> String {
        try app.token("identityToken", of: try await app.apple(sub, email: email))
    }

    /// A classic Facebook access token for `userId`.
    func facebookToken(_ userId: String, email: String? = nil) async throws -> String {
        try app.token("accessToken", of: try await app.facebook(userId, email: email))
    }

    /// A Google ID token for `sub`.
    func googleToken(_ sub: String, email: String? = nil) async throws -> String {
        try app.token("idToken", of: try await app.google(sub, email: email))
    }

    static func strings(_ fields: [String: String]) -> JSONValue {
        .object(fields.mapValues(JSONValue.string))
    }
}

/// A response of the Parse surface.
typealias ParseAnswer = SurfaceAnswer

extension SurfaceAnswer {
    /// `code` of a Parse error body.
    var code: Int? {
        if case .int(let code)? = body["code"] { code } else { nil }
    }

    /// The members of `authData`, each a provider's object of strings.
    var authData: [String: [String: String]] {
        guard case .object(let members)? = body["authData"] else { return [:] }
        return members.compactMapValues { value in
            guard case .object(let inner) = value else { return nil }
            return inner.compactMapValues { if case .string(let text) = $0 { text } else { nil } }
        }
    }
}

/// The shapes Parse clients parse (WIRE-FACTS §5).
enum ParseWire {
    /// `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`, exactly.
    static func isDate(_ text: String?) -> Bool {
        text?.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil
    }

    /// `r:` and 32 lowercase hex digits.
    static func isSessionToken(_ text: String?) -> Bool {
        text?.wholeMatch(of: /r:[0-9a-f]{32}/) != nil
    }

    static func isObjectId(_ text: String?) -> Bool { isAlphanumeric(text, count: 10) }

    static func isAlphanumeric(_ text: String?, count: Int) -> Bool {
        guard let text else { return false }
        return text.count == count && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }
}
