import Testing
@testable import TetherHTTP

@Suite("Cross-origin policy (pure)")
struct CrossOriginPolicyTests {
    private func preflight(_ policy: CrossOriginPolicy, asking headers: String?) -> HTTPResponse {
        var request = HTTPRequest(method: "OPTIONS", target: "/x")
        if let headers { request.headers.add(name: "Access-Control-Request-Headers", value: headers) }
        return policy.preflight(request)
    }

    @Test func onlyAListOfHeaderNamesIsEchoed() {
        #expect(CrossOriginPolicy.isHeaderNameList("content-type"))
        #expect(CrossOriginPolicy.isHeaderNameList("Content-Type, X-Client-Version,x-firebase-gmpid"))
        for refused in ["", "content-type,", ",x", "content-type\r\nset-cookie: a=b", "a b", "x:1", "é", String(repeating: "a,", count: 600) + "a"] {
            #expect(!CrossOriginPolicy.isHeaderNameList(refused), "\(refused.debugDescription)")
        }
    }

    @Test func aPreflightAnswersWhatThePolicySays() {
        let echoing = CrossOriginPolicy(allowedMethods: "GET,POST", allowedHeaders: .asRequested, preflightStatus: 204, maxAgeSeconds: 60)
        let asked = preflight(echoing, asking: "content-type, x-client-version")
        #expect(asked.status == 204 && asked.body.isEmpty)
        #expect(asked.headers["Access-Control-Allow-Headers"] == "content-type, x-client-version")
        #expect(asked.headers["Access-Control-Max-Age"] == "60")
        #expect(preflight(echoing, asking: nil).headers["Access-Control-Allow-Headers"] == nil)

        let listing = CrossOriginPolicy(allowedMethods: "GET", allowedHeaders: .list("X-A, X-B"), exposedHeaders: "X-C")
        let listed = preflight(listing, asking: "x-other")
        #expect(listed.status == 200)
        #expect(listed.headers["Access-Control-Allow-Headers"] == "X-A, X-B")
        #expect(listed.headers["Access-Control-Expose-Headers"] == "X-C")
        #expect(listed.headers["Vary"] == nil)
        #expect(listing.allowing(HTTPResponse(status: 201, headers: [:], body: [])).headers["Access-Control-Allow-Origin"] == "*")
    }
}
