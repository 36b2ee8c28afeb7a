import Foundation
import Testing
import TetherHTTP

@Suite("HTTPRequest")
struct HTTPRequestTests {
    private struct SignIn: Decodable {
        struct Device: Decodable { var name: String }
        var provider: String
        var attempts: Int
        var device: Device?
    }

    private func request(body: String) -> HTTPRequest {
        HTTPRequest(method: "post", target: "/v1/sign-in", body: Array(body.utf8))
    }

    @Test func targetIsSplitIntoDecodedPathAndQuery() {
        let request = HTTPRequest(method: "get", target: "/a%20b/c?x=1&y=two+words&x=3&flag&e=%E2%9C%93")
        #expect(request.method == "GET")
        #expect(request.path == "/a b/c")
        #expect(request.query == ["x": "1", "y": "two words", "flag": "", "e": "✓"])
        #expect(request.queryItems.map(\.name) == ["x", "y", "x", "flag", "e"])
        #expect(request.queryItems[2].value == "3")
    }

    @Test("Authorization splits into a lower-case scheme and its credentials", arguments: [
        ("Bearer abc.def", "bearer", "abc.def"),
        ("  DPoP   abc  ", "dpop", "abc"),
        ("bearer\tabc", "bearer", "abc"),
        ("Bearer", "bearer", ""),
        ("Basic dXNlcjpw YXNz", "basic", "dXNlcjpw YXNz"),
    ])
    func authorizationSplitsIntoSchemeAndCredentials(header: String, scheme: String, credentials: String) throws {
        let request = HTTPRequest(method: "GET", target: "/", headers: ["Authorization": header])
        let found = try #require(request.authorization)
        #expect(found.scheme == scheme)
        #expect(found.credentials == credentials)
    }

    @Test("White space is trimmed as Foundation trims it", arguments: [
        "", " ", "ada", "  ada lovelace \n", "\t\r\nx\u{0B}\u{0C}", "\u{A0}x\u{2003}", "\u{3000}\u{2028}", "é\u{301} ", " a\u{85}",
    ])
    func whiteSpaceIsTrimmedAsFoundationTrimsIt(text: String) {
        #expect(String(text.trimmingWhiteSpace()) == text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test func anAbsentOrBlankAuthorizationIsNone() {
        #expect(HTTPRequest(method: "GET", target: "/").authorization == nil)
        #expect(HTTPRequest(method: "GET", target: "/", headers: ["Authorization": " \t "]).authorization == nil)
    }

    @Test func malformedPercentEscapesAreKeptLiterally() {
        #expect(HTTPRequest(method: "GET", target: "/100%/x%zz").path == "/100%/x%zz")
    }

    @Test func absoluteFormTargetIsReducedToItsPath() {
        let request = HTTPRequest(method: "GET", target: "http://example.test:8080/v1/health?full=1")
        #expect(request.path == "/v1/health")
        #expect(request.query["full"] == "1")
    }

    @Test func decodesAValidBody() throws {
        let decoded = try request(body: #"{"provider":"apple","attempts":2,"device":{"name":"phone"}}"#).decodeJSON(SignIn.self)
        #expect(decoded.provider == "apple")
        #expect(decoded.device?.name == "phone")
    }

    @Test(arguments: [
        (#"{"provider":"apple""#, "The request body is not valid JSON.", nil),
        (#"{"provider":"apple"}"#, "The member 'attempts' is required.", "/attempts"),
        (#"{"provider":"apple","attempts":"two"}"#, "The member '/attempts' must be an integer.", "/attempts"),
        (#"{"provider":null,"attempts":1}"#, "The member '/provider' must be a string, not null.", "/provider"),
        (#"{"provider":"apple","attempts":1,"device":{}}"#, "The member 'name' is required in '/device'.", "/device/name"),
        (#"[1]"#, "The request body must be an object.", nil),
        ("", "The request body is empty; a JSON document is expected.", nil),
    ] as [(String, String, String?)])
    func badBodiesGiveAHelpfulInvalidRequest(body: String, detail: String, pointer: String?) {
        #expect(throws: Problem.badRequest(detail: detail, extensions: pointer.map { ["pointer": .string($0)] } ?? [:])) {
            _ = try request(body: body).decodeJSON(SignIn.self)
        }
    }
}
