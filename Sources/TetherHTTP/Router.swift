/// Maps a method and a path to a handler, with `{name}` path parameters.
///
/// Patterns are paths whose segments are literals, `{name}` parameters
/// (`/v1/users/{id}/history`), or parameters followed by a literal tail
/// (`/v1/projects/{id}:createSessionCookie`, Google's custom-method form; the
/// parameter takes what comes before the tail, at least one character). A literal
/// segment beats a tailed parameter, which beats a plain parameter, at the same
/// position, for every method: a path that a pattern with the literal
/// matches is that pattern's alone. Empty segments (a trailing slash, `//`) are
/// ignored, and `HEAD` falls back to the `GET` handler. A path that matches no
/// pattern is 404; a path that matches only under other methods is 405 with `Allow`.
public struct Router: Sendable {
    /// How a request resolved against the route table.
    public enum Resolution: Sendable {
        /// A handler answers this method and path; `pattern` is the route as registered.
        case matched(handler: HTTPHandler, pattern: String, pathParameters: [String: String])
        /// The path exists, but only for `allowed` methods.
        case methodNotAllowed(allowed: [String])
        /// No route matches the path.
        case notFound
    }

    private struct Route: Sendable {
        let method: String
        let pattern: String
        let handler: HTTPHandler
    }

    private struct Endpoint: Sendable {
        let route: Route
        let parameterNames: [String]
    }

    /// A trie node; children are indices into `nodes`, which keeps `Router` a plain value.
    private struct Node: Sendable {
        var literals: [String: Int] = [:]
        var parameter: Int?
        /// Parameters with a literal tail, by tail (`:createSessionCookie`).
        var tailed: [String: Int] = [:]
        var endpoints: [String: Endpoint] = [:]
    }

    private var nodes = [Node()]
    private var registered: [Route] = []

    /// Creates an empty router.
    public init() {}

    /// The registered routes, in registration order.
    public var routes: [(method: String, pattern: String)] {
        registered.map { ($0.method, $0.pattern) }
    }

    /// Registers `handler` for `method` and `pattern`.
    ///
    /// Registering the same method and pattern twice, or a pattern that
    /// repeats a parameter name, is a programming error and traps.
    public mutating func add(_ method: String, _ pattern: String, _ handler: @escaping HTTPHandler) {
        let route = Route(method: method.uppercased(), pattern: pattern, handler: handler)
        var node = 0
        var parameterNames: [String] = []
        for segment in pattern.split(separator: "/") {
            if segment.count > 2, segment.hasPrefix("{"), segment.hasSuffix("}") {
                parameterNames.append(String(segment.dropFirst().dropLast()))
                node = child(of: node, at: \.parameter)
            } else if segment.hasPrefix("{"), let close = segment.firstIndex(of: "}"), segment.index(after: close) != segment.endIndex,
                      segment.distance(from: segment.startIndex, to: close) > 1 {
                parameterNames.append(String(segment[segment.index(after: segment.startIndex)..<close]))
                let tail = String(segment.suffix(from: segment.index(after: close)))
                node = child(of: node, at: \.tailed[tail])
            } else {
                node = child(of: node, at: \.literals[String(segment)])
            }
        }
        precondition(Set(parameterNames).count == parameterNames.count, "\(pattern) repeats a parameter name")
        precondition(nodes[node].endpoints[route.method] == nil, "\(route.method) \(pattern) is registered twice")
        nodes[node].endpoints[route.method] = Endpoint(route: route, parameterNames: parameterNames)
        registered.append(route)
    }

    /// Registers a `GET` handler.
    public mutating func get(_ pattern: String, _ handler: @escaping HTTPHandler) {
        add("GET", pattern, handler)
    }

    /// Registers a `POST` handler.
    public mutating func post(_ pattern: String, _ handler: @escaping HTTPHandler) {
        add("POST", pattern, handler)
    }

    /// Registers a `PUT` handler.
    public mutating func put(_ pattern: String, _ handler: @escaping HTTPHandler) {
        add("PUT", pattern, handler)
    }

    /// Registers a `PATCH` handler.
    public mutating func patch(_ pattern: String, _ handler: @escaping HTTPHandler) {
        add("PATCH", pattern, handler)
    }

    /// Registers a `DELETE` handler.
    public mutating func delete(_ pattern: String, _ handler: @escaping HTTPHandler) {
        add("DELETE", pattern, handler)
    }

    /// Registers every route of `other` under `prefix` (`"/parse"`, or `""` to merge).
    public mutating func mount(_ prefix: String, _ other: Router) {
        let base = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
        for route in other.registered {
            add(route.method, base + (route.pattern.hasPrefix("/") ? "" : "/") + route.pattern, route.handler)
        }
    }

    /// A copy of this router whose every handler is replaced by `wrap(method, pattern, handler)`.
    ///
    /// For concerns that apply to every route and need the route as registered
    /// (request counts by route pattern, for example), not the raw path.
    public func wrappingHandlers(
        _ wrap: (_ method: String, _ pattern: String, _ handler: @escaping HTTPHandler) -> HTTPHandler
    ) -> Router {
        var wrapped = Router()
        for route in registered {
            wrapped.add(route.method, route.pattern, wrap(route.method, route.pattern, route.handler))
        }
        return wrapped
    }

    /// Resolves `request` by its method and its decoded path segments.
    public func route(_ request: HTTPRequest) -> Resolution {
        var captured: [String] = []
        let endpoint: Endpoint
        switch search(node: 0, segments: request.pathSegments[...], method: request.method, captured: &captured) {
        case .found(let found):
            endpoint = found
        case .pathOnly(var allowed):
            if allowed.contains("GET") {
                allowed.insert("HEAD")
            }
            return .methodNotAllowed(allowed: allowed.sorted())
        case .none:
            return .notFound
        }
        let parameters = Dictionary(
            zip(endpoint.parameterNames, captured).map { ($0, $1) }, uniquingKeysWith: { first, _ in first })
        return .matched(handler: endpoint.route.handler, pattern: endpoint.route.pattern, pathParameters: parameters)
    }

    /// Routes `request` and runs the handler with `pathParameters` filled in.
    ///
    /// - Throws: ``Problem/notFound(detail:)`` or ``Problem/methodNotAllowed(allowed:)``
    ///   when no handler matches, and whatever the handler throws.
    public func respond(to request: HTTPRequest) async throws -> HTTPResponse {
        switch route(request) {
        case .matched(let handler, _, let parameters):
            var request = request
            request.pathParameters = parameters
            return try await handler(request)
        case .methodNotAllowed(let allowed):
            throw Problem.methodNotAllowed(allowed: allowed)
        case .notFound:
            throw Problem.notFound(detail: "Nothing answers at \(request.path).")
        }
    }

    /// The child of `parent` found through `link`, created when missing.
    private mutating func child(of parent: Int, at link: WritableKeyPath<Node, Int?>) -> Int {
        if let existing = nodes[parent][keyPath: link] {
            return existing
        }
        nodes.append(Node())
        nodes[parent][keyPath: link] = nodes.count - 1
        return nodes.count - 1
    }

    /// What a search below one node found.
    private enum Search {
        /// A handler for the method.
        case found(Endpoint)
        /// A route whose path matches, but only under these methods.
        case pathOnly(Set<String>)
        /// No route's path matches.
        case none
    }

    /// Depth-first, literal child before tailed parameter before parameter child. A path that a literal branch matches
    /// belongs to that branch under every method, as OpenAPI matches concrete paths before templated
    /// ones: `DELETE /v1/users/me/mfa/totp` is 405 (`Allow: POST`), not `DELETE …/mfa/{factorId}`
    /// with `totp` for an id. A parameter is tried only where no literal route matches the path.
    private func search(node: Int, segments: ArraySlice<String>, method: String, captured: inout [String]) -> Search {
        guard let segment = segments.first else {
            let endpoints = nodes[node].endpoints
            if let endpoint = endpoints[method] ?? (method == "HEAD" ? endpoints["GET"] : nil) {
                return .found(endpoint)
            }
            return endpoints.isEmpty ? .none : .pathOnly(Set(endpoints.keys))
        }
        let rest = segments.dropFirst()
        if let literal = nodes[node].literals[segment] {
            let below = search(node: literal, segments: rest, method: method, captured: &captured)
            if case .none = below {} else { return below }
        }
        for (tail, child) in nodes[node].tailed.sorted(by: { $0.key.count > $1.key.count })
        where segment.count > tail.count && segment.hasSuffix(tail) {
            captured.append(String(segment.dropLast(tail.count)))
            let below = search(node: child, segments: rest, method: method, captured: &captured)
            if case .none = below {} else { return below }
            captured.removeLast()
        }
        if let parameter = nodes[node].parameter {
            captured.append(segment)
            let below = search(node: parameter, segments: rest, method: method, captured: &captured)
            if case .none = below {} else { return below }
            captured.removeLast()
        }
        return .none
    }
}
