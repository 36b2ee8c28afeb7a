import TetherCore
import Foundation
import Testing
@testable import TetherHTTP

@Suite("Problem details")
struct ProblemTests {
    @Test(arguments: [
        (Problem.badRequest(detail: "x"), 400, "invalid_request"),
        (Problem.unauthorized(), 401, "unauthorized"),
        (Problem.forbidden(), 403, "forbidden"),
        (Problem.notFound(), 404, "not_found"),
        (Problem.methodNotAllowed(allowed: ["GET"]), 405, "method_not_allowed"),
        (Problem.conflict(), 409, "conflict"),
        (Problem.payloadTooLarge(limit: 10), 413, "payload_too_large"),
        (Problem.serviceUnavailable(), 503, "service_unavailable"),
        (Problem.deadlineExceeded(timeout: .milliseconds(250)), 503, "deadline_exceeded"),
        (Problem.internal, 500, "internal"),
    ])
    func standardProblemsHaveStableStatusAndCode(problem: Problem, status: Int, code: String) throws {
        #expect(problem.status == status)
        #expect(problem.code == code)
        #expect(problem.type == "/problems/" + code.replacingOccurrences(of: "_", with: "-"))
        let response = problem.response()
        #expect(response.status == status)
        #expect(response.headers["content-type"] == "application/problem+json")
        let document = try JSONDecoder().decode([String: JSONValue].self, from: Data(response.body))
        #expect(document["code"] == .string(code))
        #expect(document["status"] == .int(status))
        #expect(document["type"] == .string(problem.type))
    }

    /// A handler the server cancelled (after answering it at its deadline or at a shutdown) ends as a 503 in the
    /// log and the request metrics, not as a failure answered 500.
    @Test func aCancelledHandlerIsA503() {
        #expect(Problem(converting: CancellationError())?.status == 503)
        #expect(Problem(converting: CancellationError())?.code == "service_unavailable")
    }

    @Test func extensionsAreWrittenButCannotOverrideStandardMembers() throws {
        let problem = Problem(
            status: 409, code: "credential_already_linked", title: "Credential already linked",
            detail: "This Apple ID belongs to another user.",
            extensions: ["provider": "apple", "status": 200, "retryable": false])
        let document = try JSONDecoder().decode([String: JSONValue].self, from: Data(problem.response().body))
        #expect(document["type"] == "/problems/credential-already-linked")
        #expect(document["provider"] == "apple")
        #expect(document["retryable"] == false)
        #expect(document["status"] == 409)
        #expect(document["detail"] == "This Apple ID belongs to another user.")
    }

    @Test func statusSpecificHeadersTravelWithTheResponse() {
        #expect(Problem.serviceUnavailable(retryAfterSeconds: 7).response().headers["Retry-After"] == "7")
        #expect(Problem.deadlineExceeded(timeout: .seconds(30)).detail == "The request was not answered within 30 s.")
        #expect(Problem.deadlineExceeded(timeout: .milliseconds(200)).detail == "The request was not answered within 200 ms.")
    }
}

@Suite("HTTPHeaders")
struct HTTPHeadersTests {
    @Test func lookupIgnoresCaseAndKeepsOrder() {
        var headers: HTTPHeaders = ["Content-Type": "text/plain", "Set-Cookie": "a=1"]
        headers.add(name: "set-cookie", value: "b=2")
        #expect(headers["CONTENT-TYPE"] == "text/plain")
        #expect(headers.values(for: "Set-Cookie") == ["a=1", "b=2"])
        #expect(headers["missing"] == nil)
    }

    @Test func replacingDropsEveryOtherFieldOfThatName() {
        var headers: HTTPHeaders = ["Via": "1", "Accept": "x", "via": "2"]
        headers.replaceOrAdd(name: "VIA", value: "3")
        #expect(Array(headers).map(\.value) == ["3", "x"])
        headers["accept"] = nil
        #expect(headers.count == 1)
    }
}

@Suite("JSONValue")
struct JSONValueTests {
    @Test func roundTripsEveryShape() throws {
        let value: JSONValue = ["n": nil, "b": true, "i": 42, "d": 1.5, "s": "x", "a": [1, "two"], "o": ["k": "v"]]
        let encoded = try JSONEncoder().encode(value)
        #expect(try JSONDecoder().decode(JSONValue.self, from: encoded) == value)
    }
}

@Suite("LogLine")
struct LogLineTests {
    @Test func escapesEveryStringIntoValidJSON() throws {
        var line = LogLine(level: "info", message: "request")
        line.add("path", "/a\"b\\c\n\u{01}é\u{7F}")
        line.add("status", nil as Int?)
        line.add("durationMs", 1.25)
        let record = try #require(JSONSerialization.jsonObject(with: Data(line.rendered.utf8)) as? [String: Any])
        #expect(record["path"] as? String == "/a\"b\\c\n\u{01}é\u{7F}")
        #expect(record["status"] is NSNull)
        #expect(record["durationMs"] as? Double == 1.25)
        #expect(record["msg"] as? String == "request")
    }
}
