/// Cross-origin access to a surface whose credentials are headers and bodies, never cookies (Parse's,
/// Firebase's): any origin may call it, since a page can only send what its own script holds. What a
/// browser needs: the headers on every answer, and an `OPTIONS` preflight answered for each path.
public struct CrossOriginPolicy: Sendable {
    /// The request headers a preflight allows.
    public enum AllowedHeaders: Sendable {
        /// These, whatever the preflight asks (a surface whose SDK sends a known set).
        case list(String)
        /// The ones the preflight asks for (`Access-Control-Request-Headers`), as the Firebase Auth Emulator
        /// and Google's endpoints answer: the SDKs add headers of their own (`X-Client-Version`,
        /// `X-Firebase-gmpid`, …) from one release to the next.
        case asRequested
    }

    public let allowedMethods: String
    public let allowedHeaders: AllowedHeaders
    public let exposedHeaders: String?
    /// The status of a preflight's answer (Parse Server answers 200, the Firebase emulator 204).
    public let preflightStatus: Int
    /// `Access-Control-Max-Age` of a preflight's answer, if any.
    public let maxAgeSeconds: Int?

    public init(
        allowedMethods: String, allowedHeaders: AllowedHeaders, exposedHeaders: String? = nil, preflightStatus: Int = 200,
        maxAgeSeconds: Int? = nil
    ) {
        self.allowedMethods = allowedMethods
        self.allowedHeaders = allowedHeaders
        self.exposedHeaders = exposedHeaders
        self.preflightStatus = preflightStatus
        self.maxAgeSeconds = maxAgeSeconds
    }

    /// The headers of an answer a page may read (any answer but a preflight's).
    public var answerHeaders: HTTPHeaders {
        var headers: HTTPHeaders = ["Access-Control-Allow-Origin": "*"]
        if let exposedHeaders { headers.add(name: "Access-Control-Expose-Headers", value: exposedHeaders) }
        return headers
    }

    /// `response` with ``answerHeaders`` added.
    public func allowing(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        response.headers.add(contentsOf: answerHeaders)
        return response
    }

    /// The answer to a preflight (`OPTIONS`) of `request`.
    public func preflight(_ request: HTTPRequest) -> HTTPResponse {
        var headers = answerHeaders
        headers.add(name: "Access-Control-Allow-Methods", value: allowedMethods)
        switch allowedHeaders {
        case .list(let names):
            headers.add(name: "Access-Control-Allow-Headers", value: names)
        case .asRequested:
            // Only a list of header names is echoed; anything else gets no allowance, and the browser stops there.
            if let requested = request.headers["Access-Control-Request-Headers"], Self.isHeaderNameList(requested) {
                headers.add(name: "Access-Control-Allow-Headers", value: requested)
            }
            headers.add(name: "Vary", value: "Access-Control-Request-Headers")
        }
        if let maxAgeSeconds { headers.add(name: "Access-Control-Max-Age", value: String(maxAgeSeconds)) }
        return HTTPResponse(status: preflightStatus, headers: headers, body: [])
    }

    /// Every route of `routes` registered on `router` with ``answerHeaders`` on its answers, and an `OPTIONS`
    /// answering the preflight of each path that has no `OPTIONS` route of its own.
    public func register(_ routes: Router, on router: inout Router) {
        var methodsByPattern: [String: Set<String>] = [:]
        let wrapped = routes.wrappingHandlers { method, pattern, handler in
            methodsByPattern[pattern, default: []].insert(method)
            return { request in allowing(try await handler(request)) }
        }
        router.mount("", wrapped)
        for (pattern, methods) in methodsByPattern where !methods.contains("OPTIONS") {
            router.add("OPTIONS", pattern) { request in preflight(request) }
        }
    }

    /// Whether `text` is a comma-separated list of header names (RFC 9110 tokens), at most 1,000 bytes.
    static func isHeaderNameList(_ text: String) -> Bool {
        text.utf8.count <= 1_000 && text.split(separator: ",", omittingEmptySubsequences: false).allSatisfy { item in
            let name = item.utf8.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }
            return !name.isEmpty && name.allSatisfy(isTokenByte)
        }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
        default: false
        }
    }
}
