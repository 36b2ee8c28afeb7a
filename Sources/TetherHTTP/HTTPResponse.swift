import Foundation
import TetherCore

/// A complete HTTP response: status, headers and body.
///
/// `Content-Length` is computed by the server from `body`; a
/// `Content-Length` header set here is ignored.
public struct HTTPResponse: Sendable, Equatable {
    /// The status code, 100 to 599.
    public var status: Int
    /// The response headers.
    public var headers: HTTPHeaders
    /// The body bytes.
    public var body: [UInt8]
    /// The user the answer shows, when its body does not say so in a way a reader of it knows (a Parse user's
    /// `objectId`); never sent. A copy kept for retries (`Idempotency-Key`, `X-Parse-Request-Id`) is theirs, and
    /// goes when they are erased.
    public var subject: UUID?

    /// Creates a response from its parts.
    public init(status: Int = 200, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response; keys are sorted so that equal values give equal bytes. Without an
    /// `encoder`, it is written by ``CompactJSONEncoder`` (dates in whole seconds), the bytes
    /// `JSONEncoder` would write with sorted keys, unescaped slashes and `.iso8601` dates.
    ///
    /// - Throws: `EncodingError` when `value` cannot be encoded (a non-finite
    ///   double, for example); the server answers that with a 500.
    public static func json<T: Encodable>(
        _ value: T,
        status: Int = 200,
        headers: HTTPHeaders = [:],
        encoder: JSONEncoder? = nil
    ) throws -> HTTPResponse {
        let body = try encoder.map { Array(try $0.encode(value)) } ?? JSONCoding.encoder.encode(value)
        return HTTPResponse(status: status, headers: headers.setting(contentType: "application/json"), body: body)
    }

    /// A JSON response of a ``JSONValue``, written without `JSONEncoder` (``JSONValue/jsonBytes()``):
    /// the same bytes, several times faster, which counts for large bodies such as a history page.
    ///
    /// - Throws: ``JSONWritingError`` for a non-finite double; the server answers that with a 500.
    public static func json(_ value: JSONValue, status: Int = 200, headers: HTTPHeaders = [:]) throws -> HTTPResponse {
        json(text: try value.jsonBytes(), status: status, headers: headers)
    }

    /// A JSON response of a value that writes its own text (``JSONTextWritable``).
    public static func json(_ value: some JSONTextWritable, status: Int = 200, headers: HTTPHeaders = [:]) -> HTTPResponse {
        json(text: value.jsonText, status: status, headers: headers)
    }

    /// A JSON response of a body already written as JSON text.
    public static func json(text body: [UInt8], status: Int = 200, headers: HTTPHeaders = [:]) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers.setting(contentType: "application/json"), body: body)
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: Int = 200, headers: HTTPHeaders = [:]) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: headers.setting(contentType: "text/plain; charset=utf-8"), body: Array(text.utf8))
    }

    /// A `text/html; charset=utf-8` response.
    public static func html(_ html: String, status: Int = 200, headers: HTTPHeaders = [:]) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: headers.setting(contentType: "text/html; charset=utf-8"), body: Array(html.utf8))
    }

    /// A 204 response without a body.
    public static func noContent(headers: HTTPHeaders = [:]) -> HTTPResponse {
        HTTPResponse(status: 204, headers: headers)
    }

    /// The body decoded as UTF-8, with invalid sequences replaced.
    public var bodyText: String {
        String(decoding: body, as: UTF8.self)
    }
}

extension HTTPHeaders {
    /// Sets `Content-Type` unless the caller already chose one.
    fileprivate func setting(contentType: String) -> HTTPHeaders {
        guard !contains("Content-Type") else { return self }
        var headers = self
        headers.add(name: "Content-Type", value: contentType)
        return headers
    }
}
