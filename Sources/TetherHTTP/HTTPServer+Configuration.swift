extension HTTPServer {
    /// How the server listens, how long it waits and where it logs.
    public struct Configuration: Sendable {
        /// The IP address to bind: IPv4 (`127.0.0.1`, `0.0.0.0`), IPv6 (`::1`, `::`), or `localhost`.
        public var host: String
        /// The TCP port; 0 picks any free port (read it back from ``HTTPServer/boundPort``).
        public var port: Int
        /// The largest request body accepted; larger ones are answered 413 `payload_too_large`.
        public var maxBodyBytes: Int
        /// How long a handler may take before the server answers 503 `deadline_exceeded` itself.
        public var requestTimeout: Duration
        /// How long a connection may stay idle (between keep-alive requests, or mid-request) before it is closed.
        public var connectionTimeout: Duration
        /// How long a request's head (request line and headers) may take to arrive: from the connection's
        /// acceptance for its first request, and for a later one from the end of the idle timeout at most.
        /// A client that trickles header bytes (slowloris) is closed then; the idle timeout alone never would.
        public var headerTimeout: Duration = .seconds(10)
        /// How long a request's body may take to arrive once its head has; a slow upload is closed then.
        public var bodyTimeout: Duration = .seconds(30)
        /// The number of libmicrohttpd polling threads; handlers run on the Swift concurrency pool, not on these.
        public var threadCount: Int
        /// The most connections open at once; one more is closed as soon as it is accepted.
        public var connectionLimit = 1000
        /// The most connections open at once from one address (the TCP peer, a proxy's when there is one);
        /// 0 for no limit. Many idle or slow connections from one client cannot take every place.
        public var perAddressConnectionLimit = 64
        /// How long ``HTTPServer/shutdown()`` waits for in-flight requests before answering them 503.
        public var shutdownGracePeriod: Duration
        /// Where request and server log lines go.
        public var log: LogSink
        /// Addresses (or CIDR ranges) of reverse proxies (TLS terminators, load balancers) in front of the server.
        ///
        /// A request from one of them gets its ``HTTPRequest/remoteAddress`` from `X-Forwarded-For`:
        /// the rightmost entry that is not itself a trusted proxy, since every hop appends the address
        /// it saw and only those appended by trusted hops can be believed. From anyone else the
        /// header is ignored, so a client cannot choose its own address for the abuse limits.
        public var trustedProxies: [IPAddressRange] = []
        /// How the server's own problems (413, 404, a handler's uncaught error) are written for paths
        /// under a prefix whose clients expect another error shape than problem details (`/parse`).
        public var problemRenderers: [ProblemRenderer] = []

        /// The answer to `problem` for a request to `target`: the first renderer whose prefix the path
        /// has, or problem details.
        func response(for problem: Problem, target: String) -> HTTPResponse {
            let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? target
            for renderer in problemRenderers where path == renderer.pathPrefix || path.hasPrefix(renderer.pathPrefix + "/") {
                return renderer.render(problem)
            }
            return problem.response()
        }

        /// Creates a configuration; every default suits a local development server.
        public init(
            host: String = "127.0.0.1",
            port: Int = 8080,
            maxBodyBytes: Int = 1 << 20,
            requestTimeout: Duration = .seconds(30),
            connectionTimeout: Duration = .seconds(60),
            threadCount: Int = 2,
            shutdownGracePeriod: Duration = .seconds(20),
            log: LogSink = .standardError
        ) {
            self.host = host
            self.port = port
            self.maxBodyBytes = maxBodyBytes
            self.requestTimeout = requestTimeout
            self.connectionTimeout = connectionTimeout
            self.threadCount = threadCount
            self.shutdownGracePeriod = shutdownGracePeriod
            self.log = log
        }
    }
}

/// Writes problems in the error shape of the clients of one path prefix.
public struct ProblemRenderer: Sendable {
    /// Paths equal to this or below it (`/parse` covers `/parse/users`).
    public var pathPrefix: String
    public var render: @Sendable (Problem) -> HTTPResponse

    public init(pathPrefix: String, render: @escaping @Sendable (Problem) -> HTTPResponse) {
        self.pathPrefix = pathPrefix
        self.render = render
    }
}

/// Why the server could not start.
public struct HTTPServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, naming the address where that matters.
    public let description: String

    static func cannotListen(host: String, port: Int, reason: String) -> HTTPServerError {
        HTTPServerError(description: "cannot listen on \(formatAddress(host: host, port: port)): \(reason)")
    }

    static func invalidHost(_ host: String) -> HTTPServerError {
        HTTPServerError(description: "cannot listen on '\(host)': the host must be an IPv4 or IPv6 address or localhost")
    }

    static func invalidPort(_ port: Int) -> HTTPServerError {
        HTTPServerError(description: "cannot listen on port \(port): a port is 0 to 65535")
    }

    static let alreadyStarted = HTTPServerError(
        description: "the server was already started or shut down; a server starts once")

    static func formatAddress(host: String, port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
