import TetherCore
import Foundation

/// An error answered as RFC 9457 problem details (`application/problem+json`).
///
/// `code` is the stable machine-readable identifier clients branch on;
/// `type` is derived from it, so the two never disagree. Extension members
/// carry error-specific data (for example which provider is already linked),
/// and `headers` carries what the status needs (`Allow`, `Retry-After`).
public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status code.
    public var status: Int
    /// The stable machine code, in `snake_case` (`invalid_request`).
    public var code: String
    /// A short summary of the kind of problem, the same for every occurrence.
    public var title: String
    /// An explanation of this occurrence, safe to show to the caller.
    public var detail: String?
    /// Additional members written next to the standard ones.
    public var extensions: [String: JSONValue]
    /// Headers sent with the problem response.
    public var headers: HTTPHeaders
    /// The user the problem is about, when it names one of theirs without saying whose (a second factor
    /// required: their factors and phone hints): its response's ``HTTPResponse/subject``, never sent.
    public var subject: UUID?

    /// Creates a problem; `code` should stay stable once clients depend on it.
    public init(
        status: Int,
        code: String,
        title: String,
        detail: String? = nil,
        extensions: [String: JSONValue] = [:],
        headers: HTTPHeaders = [:]
    ) {
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.extensions = extensions
        self.headers = headers
    }

    /// The problem type URI reference, `/problems/` followed by the code in kebab case.
    public var type: String {
        "/problems/" + code.replacingOccurrences(of: "_", with: "-")
    }

    /// `status code: detail`, for logs.
    public var description: String {
        "\(status) \(code): \(detail ?? title)"
    }

    /// The members of the problem document; the standard members win over extensions of the same name.
    public var document: [String: JSONValue] {
        var members = extensions
        members["type"] = .string(type)
        members["title"] = .string(title)
        members["status"] = .int(status)
        members["code"] = .string(code)
        members["detail"] = detail.map(JSONValue.string)
        return members
    }

    /// The `application/problem+json` response for this problem.
    public func response() -> HTTPResponse {
        var responseHeaders = headers
        responseHeaders["Content-Type"] = "application/problem+json"
        // A document of JSONValue only fails to encode on a non-finite double in an
        // extension; the standard members alone still describe the problem then.
        let body =
            (try? JSONCoding.encoder.encode(document))
            ?? (try? JSONCoding.encoder.encode(Problem(status: status, code: code, title: title).document))
        var response = HTTPResponse(status: status, headers: responseHeaders, body: body ?? [])
        response.subject = subject
        return response
    }
}

extension Problem {
    /// 400 `invalid_request`: the request is malformed or fails validation.
    public static func badRequest(detail: String, extensions: [String: JSONValue] = [:]) -> Problem {
        Problem(status: 400, code: "invalid_request", title: "Invalid request", detail: detail, extensions: extensions)
    }

    /// 401 `unauthorized`: credentials are missing or not valid.
    public static func unauthorized(detail: String? = nil) -> Problem {
        Problem(status: 401, code: "unauthorized", title: "Unauthorized", detail: detail)
    }

    /// 403 `forbidden`: the caller is known but may not do this.
    public static func forbidden(detail: String? = nil) -> Problem {
        Problem(status: 403, code: "forbidden", title: "Forbidden", detail: detail)
    }

    /// 404 `not_found`: nothing answers at this path, or the resource does not exist.
    public static func notFound(detail: String? = nil) -> Problem {
        Problem(status: 404, code: "not_found", title: "Not found", detail: detail)
    }

    /// 405 `method_not_allowed`, with the `Allow` header listing what the path accepts.
    public static func methodNotAllowed(allowed: [String]) -> Problem {
        Problem(
            status: 405, code: "method_not_allowed", title: "Method not allowed",
            detail: "This resource accepts \(allowed.joined(separator: ", ")).",
            headers: ["Allow": allowed.joined(separator: ", ")])
    }

    /// 409 `conflict`: the request conflicts with the current state.
    public static func conflict(detail: String? = nil) -> Problem {
        Problem(status: 409, code: "conflict", title: "Conflict", detail: detail)
    }

    /// 413 `payload_too_large`: the body exceeds `limit` bytes.
    public static func payloadTooLarge(limit: Int) -> Problem {
        Problem(
            status: 413, code: "payload_too_large", title: "Payload too large",
            detail: "The request body exceeds the limit of \(limit) bytes.", extensions: ["limit": .int(limit)])
    }

    /// 414 `uri_too_long`: a request target longer than the server answers.
    public static func uriTooLong(limit: Int) -> Problem {
        Problem(
            status: 414, code: "uri_too_long", title: "URI too long",
            detail: "The request target exceeds the limit of \(limit) bytes.", extensions: ["limit": .int(limit)])
    }

    /// 431 `header_fields_too_large`: a request line and head larger than the server answers.
    public static func headerFieldsTooLarge(limit: Int) -> Problem {
        Problem(
            status: 431, code: "header_fields_too_large", title: "Request header fields too large",
            detail: "The request line and headers exceed the limit of \(limit) bytes.", extensions: ["limit": .int(limit)])
    }

    /// 503 `service_unavailable`, with `Retry-After` in seconds.
    public static func serviceUnavailable(retryAfterSeconds: Int = 1, detail: String? = nil) -> Problem {
        Problem(
            status: 503, code: "service_unavailable", title: "Service unavailable", detail: detail,
            headers: ["Retry-After": String(retryAfterSeconds)])
    }

    /// 503 `deadline_exceeded`: the request was not answered within `timeout`.
    public static func deadlineExceeded(timeout: Duration, retryAfterSeconds: Int = 1) -> Problem {
        Problem(
            status: 503, code: "deadline_exceeded", title: "Deadline exceeded",
            detail: "The request was not answered within \(timeout.formattedForHumans).",
            headers: ["Retry-After": String(retryAfterSeconds)])
    }

    /// 500 `internal`: something failed on the server; the cause is logged, never sent.
    public static var `internal`: Problem {
        Problem(status: 500, code: "internal", title: "Internal server error")
    }
}

extension Problem {
    /// The problem a handler's thrown `error` is answered with: problems as they are,
    /// ``ProblemConvertible`` errors by their mapping, decoding errors as 400, a cancelled handler as 503;
    /// nil for any other error (the server logs it and answers 500).
    public init?(converting error: any Error) {
        switch error {
        case let problem as Problem: self = problem
        case let convertible as any ProblemConvertible: self = convertible.problem
        case let decodingError as DecodingError: self = Problem(decodingError: decodingError)
        case is CancellationError:
            // Only the server cancels a handler, once it answered the request (its deadline, a shutdown): this is
            // what the handler's end is logged and counted as, not a failure of its own.
            self = .serviceUnavailable(detail: "The request was given up on (its deadline passed, or the server is shutting down).")
        default: return nil
        }
    }
}

/// An error that knows the problem it is answered with.
///
/// Domain errors from other modules conform once, so that every route maps
/// them the same way; the server applies the mapping to anything a handler throws.
public protocol ProblemConvertible: Error {
    /// The problem details this error is answered with.
    var problem: Problem { get }
}

extension Duration {
    /// `250 ms` or `30 s`: short and unambiguous for problem details and logs.
    var formattedForHumans: String {
        milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }

    /// Whole milliseconds, rounded down.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }

    /// Milliseconds with microsecond precision, for logs.
    var fractionalMilliseconds: Double {
        Double(components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000) / 1000
    }
}
