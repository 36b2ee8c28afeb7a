import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherTesting

/// Hostile bodies, headers and URLs at every state-changing route of `/v1`, the admin API, Parse and
/// Firebase: random and truncated JSON, huge numbers, deep nesting, invalid UTF-8, NUL bytes,
/// duplicate keys, wrong types, SQL metacharacters in every string field, oversized headers and
/// URLs. The answer is never a 5xx, and a body that is not what the route takes writes nothing.
/// `TETHER_FUZZ_ROUNDS` runs more rounds (`make fuzz`).
@Suite("Hostile input: only 4xx, nothing written")
struct HostileInputTests {
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// A route and a well-formed body for it, whose strings the mutations replace.
    struct Target {
        var path: String
        var template: String
        var headers: [(String, String)] = []
        /// Whether an empty body is a request the route takes (Firebase's anonymous `signUp`, a reasonless admin action).
        var takesEmptyBody = false
    }

    static let sqlStrings = [
        "'; DROP TABLE users; --", "\" OR 1=1 --", "x' UNION SELECT key FROM personal_data_keys --", "%' OR '%'='",
        "\\\\'; SELECT pg_sleep(5); --", "$$; TRUNCATE events; $$",
    ]

    /// Bodies that are not what any route takes: each must be refused with a 4xx and write nothing.
    static func malformed(_ template: String, _ random: inout Seeded) -> [[UInt8]] {
        let bytes = Array(template.utf8)
        var bodies: [[UInt8]] = [
            Array(bytes.prefix(Int(random.next() % UInt64(max(1, bytes.count - 1))))),                 // truncated
            (0..<64).map { _ in UInt8(truncatingIfNeeded: random.next()) },                              // random bytes
            Array(String(repeating: "[", count: 20_000).utf8),                                          // deep nesting
            Array(String(repeating: "{\"a\":", count: 5_000).utf8) + Array("1".utf8) + Array(String(repeating: "}", count: 5_000).utf8),
            Array("{\"email\": 1e400, \"password\": 123456789012345678901234567890123456789}".utf8),     // huge numbers
            Array("{\"email\": \"a\u{0000}b@example.com\", \"password\": \"p\u{0000}\"}".utf8),          // NUL in strings
            [0x7b, 0x22, 0x65, 0x6d, 0x61, 0x69, 0x6c, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d], // invalid UTF-8
            Array("[1, 2, 3]".utf8), Array("\"just a string\"".utf8), Array("null".utf8), [],
            Array("{\"provider\": [\"apple\"], \"credential\": \"token\", \"email\": {}, \"password\": []}".utf8), // wrong types
        ]
        // The template with one string replaced by a number, and a duplicate of its first key with another type.
        if let firstKey = template.split(separator: "\"").dropFirst().first {
            bodies.append(Array("{\"\(firstKey)\": 7, \"\(firstKey)\": {\"nested\": [null]}}".utf8))
        }
        return bodies
    }

    /// Well-formed bodies with SQL metacharacters (and the other hostile strings) in every string field:
    /// they may be answered 2xx (an email can hold a quote), never 5xx. The 3,000-character string is under
    /// the decoders' 16 KiB cap on a member but over what an index row of PostgreSQL holds (about 2.7 KB).
    static func hostileStrings(_ template: String) -> [[UInt8]] {
        (sqlStrings + [String(repeating: "x", count: 20_000), String(repeating: "y", count: 3_000), "\u{202E}evil\u{0007}"]).map { hostile in
            let escaped = hostile.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            var pieces = template.components(separatedBy: "\"")
            // Values are the odd pieces that follow a colon: `"key": "value"` splits as …, key, : , value, …
            for index in pieces.indices where index % 2 == 1 && index >= 3 && pieces[index - 1].hasSuffix(": ") {
                pieces[index] = escaped
            }
            return Array(pieces.joined(separator: "\"").utf8)
        }
    }

    @Test func everyStateChangingRouteAnswersHostileInputWith4xxAndMalformedBodiesWriteNothing() async throws {
        let rounds = Int(ProcessInfo.processInfo.environment["TETHER_FUZZ_ROUNDS"] ?? "") ?? 2
        try await FirebaseApp.run(settings: ["TETHER_PARSE_APP_ID": ParseApp.appID]) { firebase in
            let app = firebase.app
            let user = try await app.signedIn(try await app.apple("apple-fuzzed"))
            let bearer = ("Authorization", "Bearer \(user.session.accessToken)")
            let admin = try await app.adminKey(.admin).secret
            let parse = [("X-Parse-Application-Id", ParseApp.appID)]
            let identityToolkit = "/identitytoolkit.googleapis.com/v1/accounts"
            let targets: [Target] = [
                Target(path: "/v1/sign-up", template: #"{"email": "fuzz@example.com", "password": "a long password", "displayName": "Fuzz"}"#),
                Target(path: "/v1/sign-in", template: #"{"provider": "password", "credential": {"email": "fuzz@example.com", "password": "x"}}"#),
                Target(path: "/v1/sign-in", template: #"{"provider": "apple", "credential": {"identityToken": "a.b.c", "authorizationCode": "c"}}"#),
                Target(path: "/v1/users/me/identities", template: #"{"provider": "google", "credential": {"idToken": "a.b.c"}}"#, headers: [bearer]),
                Target(path: "/v1/sessions/refresh", template: #"{"refreshToken": "rt_abc"}"#),
                Target(path: "/v1/password-reset", template: #"{"email": "fuzz@example.com"}"#),
                Target(path: "/v1/password-reset/confirm", template: #"{"code": "abc", "password": "a long password"}"#),
                Target(path: "/v1/email-verification/confirm", template: #"{"code": "abc"}"#),
                Target(path: "/v1/users/me/email", template: #"{"email": "new@example.com"}"#, headers: [bearer]),
                Target(path: "/v1/users/me/mfa/phone", template: #"{"phoneNumber": "+15555550100"}"#, headers: [bearer]),
                Target(path: "/v1/mfa/verify", template: #"{"pendingCredential": "p", "factorId": "f", "code": "123456"}"#),
                Target(path: "/v1/providers/apple/notifications", template: #"{"payload": "a.b.c"}"#),
                Target(path: "/v1/admin/users/\(user.user.id)/disable", template: #"{"reason": "fuzz"}"#, headers: [("Authorization", "Bearer \(admin)")], takesEmptyBody: true),
                Target(path: "/parse/users", template: #"{"username": "fuzz@example.com", "password": "a long password"}"#, headers: parse),
                Target(path: "/parse/login", template: #"{"username": "fuzz@example.com", "password": "x"}"#, headers: parse),
                Target(path: "/parse/users", template: #"{"authData": {"anonymous": {"id": "0123456789abcdef-fuzz"}}}"#, headers: parse),
                Target(path: "\(identityToolkit):signUp?key=k", template: #"{"email": "fb@example.com", "password": "a long password"}"#, takesEmptyBody: true),
                Target(path: "\(identityToolkit):signInWithPassword?key=k", template: #"{"email": "fb@example.com", "password": "x"}"#),
                Target(path: "\(identityToolkit):signInWithIdp?key=k", template: #"{"postBody": "providerId=apple.com&id_token=a.b.c", "requestUri": "http://localhost"}"#),
                Target(path: "\(identityToolkit):lookup?key=k", template: #"{"idToken": "a.b.c"}"#),
                Target(path: "/securetoken.googleapis.com/v1/token?key=k", template: #"{"grantType": "refresh_token", "refreshToken": "x"}"#),
            ]
            var random = Seeded(state: 0x7E7E_7E7E)
            var sent = 0
            var fiveHundreds: [String] = []
            for _ in 0..<rounds {
                for target in targets {
                    // Every request with an admin key is on record, refused or not (the audit trail); nothing else may be written.
                    func written() async throws -> [String] {
                        try await app.admin.query("SELECT type FROM events WHERE type <> 'AdminActionRequested' ORDER BY position")
                            .map { try $0.decode("type") }
                    }
                    let before = try await written()
                    for body in Self.malformed(target.template, &random) where !(body.isEmpty && target.takesEmptyBody) {
                        let answer = try await app.client.send(
                            "POST", target.path, fields: [("Content-Type", "application/json")] + target.headers, body: body)
                        sent += 1
                        if answer.status >= 500 { fiveHundreds.append("\(target.path) \(answer.status) \(String(decoding: body.prefix(60), as: UTF8.self))") }
                        #expect((400..<500).contains(answer.status), "\(target.path): \(answer.status) for \(String(decoding: body.prefix(60), as: UTF8.self))")
                    }
                    let after = try await written()
                    #expect(after == before, "malformed bodies at \(target.path) wrote \(after.dropFirst(before.count))")
                    for body in Self.hostileStrings(target.template) {
                        let answer = try await app.client.send(
                            "POST", target.path, fields: [("Content-Type", "application/json")] + target.headers, body: body)
                        sent += 1
                        if answer.status >= 500 { fiveHundreds.append("\(target.path) \(answer.status) \(String(decoding: body.prefix(80), as: UTF8.self))") }
                    }
                }
            }
            // Oversized headers and URLs are the HTTP layer's to refuse.
            let longHeader = try await app.client.send("POST", "/v1/sign-in", fields: [("X-Filler", String(repeating: "h", count: 64 * 1024))], body: [])
            let longURL = try await app.client.send("GET", "/v1/users/me?" + String(repeating: "q", count: 64 * 1024), fields: [], body: [])
            sent += 2
            for answer in [longHeader, longURL] where answer.status >= 500 { fiveHundreds.append("oversized: \(answer.status)") }
            #expect(fiveHundreds.isEmpty, "\(fiveHundreds.count) of \(sent) answers were 5xx: \(fiveHundreds.prefix(10))")
            // The database is still whole.
            let users: Int = try await app.admin.query("SELECT count(*)::int AS n FROM users")[0].decode("n")
            #expect(users >= 1)
            print("HostileInputTests: \(sent) hostile requests, \(fiveHundreds.count) 5xx")
        }
    }
}
