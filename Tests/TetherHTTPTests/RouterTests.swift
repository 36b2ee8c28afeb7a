import Testing
import TetherHTTP

@Suite("Router")
struct RouterTests {
    private func handler(_ name: String) -> HTTPHandler {
        { request in
            let parameters = request.pathParameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return .text(([name] + parameters).joined(separator: " "))
        }
    }

    private func answer(_ router: Router, _ method: String, _ target: String) async throws -> String {
        try await router.respond(to: HTTPRequest(method: method, target: target)).bodyText
    }

    @Test func literalSegmentBeatsParameter() async throws {
        var router = Router()
        router.get("/v1/users/{id}", handler("byID"))
        router.get("/v1/users/me", handler("me"))
        #expect(try await answer(router, "GET", "/v1/users/me") == "me")
        #expect(try await answer(router, "GET", "/v1/users/42") == "byID id=42")
    }

    @Test func aLiteralPathIsItsRoutesAloneUnderEveryMethod() async throws {
        // As OpenAPI matches concrete paths before templated ones: the document's Allow holds.
        var router = Router()
        router.get("/v1/users/me", handler("me"))
        router.delete("/v1/users/{id}", handler("delete"))
        router.get("/v1/users/{id}/history", handler("history"))
        guard case .methodNotAllowed(let allowed) = router.route(HTTPRequest(method: "DELETE", target: "/v1/users/me")) else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == ["GET", "HEAD"])
        #expect(try await answer(router, "DELETE", "/v1/users/42") == "delete id=42")
        // Where the literal branch matches no path at all, the parameter still does.
        #expect(try await answer(router, "GET", "/v1/users/me/history") == "history id=me")
    }

    @Test func parametersAreCapturedByName() async throws {
        var router = Router()
        router.get("/parse/users/{id}/links/{provider}", handler("link"))
        #expect(try await answer(router, "GET", "/parse/users/u1/links/apple") == "link id=u1 provider=apple")
    }

    @Test func aParameterWithATailTakesWhatComesBeforeIt() async throws {
        // Google's custom methods: `projects/{id}:createSessionCookie` beside `projects/{id}/accounts`.
        var router = Router()
        router.post("/v1/projects/{projectId}:createSessionCookie", handler("cookie"))
        router.post("/v1/projects/{projectId}:queryAccounts", handler("query"))
        router.post("/v1/projects/{projectId}", handler("project"))
        router.post("/v1/projects/{projectId}/accounts", handler("accounts"))
        router.post("/v1/projects/p:createSessionCookie", handler("literal"))
        #expect(try await answer(router, "POST", "/v1/projects/demo-1:createSessionCookie") == "cookie projectId=demo-1")
        #expect(try await answer(router, "POST", "/v1/projects/a:b:queryAccounts") == "query projectId=a:b")
        #expect(try await answer(router, "POST", "/v1/projects/demo-1/accounts") == "accounts projectId=demo-1")
        // A literal segment still comes first; the tail alone, with nothing before it, is the plain parameter's.
        #expect(try await answer(router, "POST", "/v1/projects/p:createSessionCookie") == "literal")
        #expect(try await answer(router, "POST", "/v1/projects/:createSessionCookie") == "project projectId=:createSessionCookie")
        #expect(try await answer(router, "POST", "/v1/projects/demo-1:unknownMethod") == "project projectId=demo-1:unknownMethod")
        guard case .methodNotAllowed(let allowed) = router.route(HTTPRequest(method: "GET", target: "/v1/projects/x:queryAccounts")) else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == ["POST"])
    }

    @Test func encodedSlashStaysInsideItsParameter() async throws {
        var router = Router()
        router.get("/files/{name}", handler("file"))
        #expect(try await answer(router, "GET", "/files/a%2Fb") == "file name=a/b")
    }

    @Test(arguments: ["/v1/health/", "/v1//health", "v1/health", "/v1/health?verbose=1"])
    func trailingAndRepeatedSlashesAreTolerated(target: String) async throws {
        var router = Router()
        router.get("/v1/health", handler("health"))
        #expect(try await answer(router, "GET", target) == "health")
    }

    @Test func unknownPathThrowsNotFound() async {
        var router = Router()
        router.get("/v1/health", handler("health"))
        await #expect(throws: Problem.notFound(detail: "Nothing answers at /v1/nope.")) {
            try await router.respond(to: HTTPRequest(method: "GET", target: "/v1/nope"))
        }
    }

    @Test func knownPathWithOtherMethodThrowsMethodNotAllowedListingAllowed() {
        var router = Router()
        router.get("/items", handler("list"))
        router.post("/items", handler("create"))
        guard case .methodNotAllowed(let allowed) = router.route(HTTPRequest(method: "PUT", target: "/items")) else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == ["GET", "HEAD", "POST"])
        #expect(Problem.methodNotAllowed(allowed: allowed).headers["Allow"] == "GET, HEAD, POST")
    }

    @Test func headFallsBackToGet() async throws {
        var router = Router()
        router.get("/ok", handler("ok"))
        #expect(try await answer(router, "HEAD", "/ok") == "ok")
    }

    @Test func methodsAreMatchedCaseInsensitively() async throws {
        var router = Router()
        router.add("post", "/items", handler("create"))
        #expect(try await answer(router, "POST", "/items") == "create")
    }

    @Test func mountingAddsRoutesUnderAPrefix() async throws {
        var parse = Router()
        parse.get("/users/{id}", handler("parseUser"))
        parse.post("/login", handler("parseLogin"))
        var router = Router()
        router.get("/health", handler("health"))
        router.mount("/parse/", parse)
        #expect(try await answer(router, "GET", "/parse/users/7") == "parseUser id=7")
        #expect(try await answer(router, "POST", "/parse/login") == "parseLogin")
        #expect(router.routes.map { "\($0.method) \($0.pattern)" } == ["GET /health", "GET /parse/users/{id}", "POST /parse/login"])
    }

    @Test func matchedResolutionNamesThePattern() {
        var router = Router()
        router.get("/v1/users/{id}/history", handler("history"))
        guard case .matched(_, let pattern, let parameters) = router.route(HTTPRequest(method: "GET", target: "/v1/users/9/history"))
        else {
            Issue.record("expected a match")
            return
        }
        #expect(pattern == "/v1/users/{id}/history")
        #expect(parameters == ["id": "9"])
    }
}
