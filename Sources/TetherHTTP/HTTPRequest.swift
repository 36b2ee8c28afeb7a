import Foundation

/// The function that answers a request; thrown errors become problem details.
public typealias HTTPHandler = @Sendable (HTTPRequest) async throws -> HTTPResponse

/// A complete HTTP request as handed to a handler: head, whole body and server context.
public struct HTTPRequest: Sendable {
    /// The method, uppercased (`GET`, `POST`).
    public var method: String
    /// The request target exactly as received, query included (`/v1/users/a%20b?x=1`).
    public let target: String
    /// The percent-decoded path without the query (`/v1/users/a b`).
    public let path: String
    /// The query parameters in order, percent-decoded, `+` read as a space.
    public let queryItems: [(name: String, value: String)]
    /// The request headers.
    public var headers: HTTPHeaders
    /// The whole request body.
    public var body: [UInt8]
    /// The client's `X-Request-Id` when it was sane, otherwise one the server generated.
    public var requestID: String
    /// The peer's IP address, when known.
    public var remoteAddress: String?
    /// Values of the `{name}` segments of the matched route pattern.
    public var pathParameters: [String: String]
    /// When the server stops waiting for the handler and answers 503 itself.
    public var deadline: ContinuousClock.Instant?

    /// The path split at `/`, each segment decoded on its own so that `%2F` stays inside its segment.
    let pathSegments: [String]

    /// Creates a request, parsing `target` into path and query.
    ///
    /// Handlers can be unit-tested with requests made here, without a socket.
    public init(
        method: String,
        target: String,
        headers: HTTPHeaders = [:],
        body: [UInt8] = [],
        requestID: String? = nil,
        remoteAddress: String? = nil,
        deadline: ContinuousClock.Instant? = nil
    ) {
        self.method = method.uppercased()
        self.target = target
        let (rawPath, rawQuery) = Self.split(target: target)
        let rawSegments = rawPath.split(separator: "/")
        self.pathSegments = rawSegments.map { PercentDecoding.decode($0, plusAsSpace: false) }
        self.path = PercentDecoding.decode(rawPath, plusAsSpace: false)
        self.queryItems = rawQuery.map { Self.parseQuery($0) } ?? []
        self.headers = headers
        self.body = body
        self.requestID = requestID ?? RequestIDGenerator.shared.next()
        self.remoteAddress = remoteAddress
        self.pathParameters = [:]
        self.deadline = deadline
    }

    /// The query parameters by name; a repeated name keeps its first value.
    public var query: [String: String] {
        Dictionary(queryItems.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    /// The `Authorization` header as its scheme, in lower case, and its credentials (RFC 9110 §11.6.2,
    /// `auth-scheme 1*SP token68`), spaces and tabs around each left out; nil when the header is absent or
    /// blank. The credentials are empty when only a scheme came. Every surface reads its tokens here.
    public var authorization: (scheme: String, credentials: String)? {
        guard let header = headers["authorization"] else { return nil }
        func isBlank(_ character: Character) -> Bool { character == " " || character == "\t" }
        var value = Substring(header).drop(while: isBlank)
        while let last = value.last, isBlank(last) { value.removeLast() }
        guard !value.isEmpty else { return nil }
        let schemeEnd = value.firstIndex(where: isBlank) ?? value.endIndex
        return (value[..<schemeEnd].lowercased(), String(value[schemeEnd...].drop(while: isBlank)))
    }

    /// Decodes the body as JSON.
    ///
    /// - Throws: a 400 `invalid_request` ``Problem`` naming the member that is
    ///   missing, null or of the wrong type, or saying that the body is empty or not JSON.
    public func decodeJSON<T: Decodable>(_ type: T.Type = T.self) throws(Problem) -> T {
        guard !body.isEmpty else {
            throw .badRequest(detail: "The request body is empty; a JSON document is expected.")
        }
        do {
            return try JSONCoding.decoder.decode(T.self, from: body)
        } catch let error as DecodingError {
            throw Problem(decodingError: error)
        } catch {
            throw .badRequest(detail: "The request body is not valid JSON.")
        }
    }

    /// Splits an origin-form or absolute-form target into raw path and raw query.
    private static func split(target: String) -> (path: Substring, query: Substring?) {
        var rest = target[...]
        if !rest.hasPrefix("/"), let scheme = rest.range(of: "://") {
            // Absolute form (`http://host/path`) is legal in a request line; only the path matters here.
            let authorityAndPath = rest[scheme.upperBound...]
            rest = authorityAndPath[(authorityAndPath.firstIndex(of: "/") ?? authorityAndPath.endIndex)...]
        }
        if let fragment = rest.firstIndex(of: "#") {
            rest = rest[..<fragment]
        }
        guard let mark = rest.firstIndex(of: "?") else {
            return (rest.isEmpty ? "/" : rest, nil)
        }
        let path = rest[..<mark]
        return (path.isEmpty ? "/" : path, rest[rest.index(after: mark)...])
    }

    /// The fields of an `application/x-www-form-urlencoded` text (a query, or a form body), in order.
    ///
    /// - Parameter plusAsSpace: whether `+` stands for a space (forms); false keeps it (Firebase's `postBody`,
    ///   whose values the iOS SDK sends unescaped).
    public static func formFields(_ text: some StringProtocol, plusAsSpace: Bool = true) -> [(name: String, value: String)] {
        parseQuery(Substring(text), plusAsSpace: plusAsSpace)
    }

    private static func parseQuery(_ query: Substring, plusAsSpace: Bool = true) -> [(name: String, value: String)] {
        query.split(separator: "&").map { pair in
            let equals = pair.firstIndex(of: "=")
            let name = pair[..<(equals ?? pair.endIndex)]
            let value = equals.map { pair[pair.index(after: $0)...] } ?? ""
            return (PercentDecoding.decode(name, plusAsSpace: plusAsSpace), PercentDecoding.decode(value, plusAsSpace: plusAsSpace))
        }
    }
}

/// Percent-decoding of URL components (RFC 3986), lenient about malformed escapes.
enum PercentDecoding {
    /// Decodes `%XX` escapes; a malformed escape is kept literally, invalid UTF-8 is replaced.
    static func decode(_ component: Substring, plusAsSpace: Bool) -> String {
        let utf8 = component.utf8
        guard utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusAsSpace && $0 == UInt8(ascii: "+")) }) else {
            return String(component)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = utf8.startIndex
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%"),
                let high = utf8.index(index, offsetBy: 1, limitedBy: utf8.endIndex), high < utf8.endIndex,
                let low = utf8.index(high, offsetBy: 1, limitedBy: utf8.endIndex), low < utf8.endIndex,
                let highValue = hexValue(utf8[high]), let lowValue = hexValue(utf8[low])
            {
                bytes.append(highValue << 4 | lowValue)
                index = utf8.index(after: low)
                continue
            }
            bytes.append(plusAsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index = utf8.index(after: index)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
