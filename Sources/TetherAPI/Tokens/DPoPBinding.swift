import TetherCrypto
import TetherHTTP
import TetherJOSE

/// Verifies the `DPoP` proof of an incoming request (RFC 9449 §4.3) and checks session binding.
///
/// The proof must name this request's method and its externally visible URL
/// (scheme, `Host` and path; the query does not count), hash the presented
/// access token in `ath` when there is one, and carry a `jti` never seen before.
/// Every failure of the proof is ``TokenError/invalidDPoPProof``, so the client
/// knows to make a new proof rather than show a login; a failing replay store
/// is passed on as itself (a 503).
public struct DPoPBinding: Sendable {
    /// How the URL a client addressed is reconstructed.
    public struct Configuration: Sendable {
        /// The base URL clients use (`https://id.example.com`, `TETHER_PUBLIC_URL`), a path included.
        ///
        /// A proof may name it, or the URL built from the `Host` header: `http` for a loopback host
        /// (`tether dev`, tests) and `https` otherwise, as production sits behind a TLS terminator. A
        /// proxy that forwards its own `Host` (nginx's default `proxy_pass`) leaves only the first.
        public var publicOrigin: String?

        /// Builds URLs from `Host` unless `publicOrigin` is given.
        public init(publicOrigin: String? = nil) {
            self.publicOrigin = publicOrigin.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        }
    }

    /// How request URLs are built.
    public let configuration: Configuration
    private let verifier: DPoPVerifier

    /// A binding check that verifies proofs with `verifier`.
    public init(verifier: DPoPVerifier, configuration: Configuration = Configuration()) {
        self.verifier = verifier
        self.configuration = configuration
    }

    /// A binding check with the default proof rules, recording `jti`s in `replayStore`.
    public init(replayStore: any DPoPReplayStore, configuration: Configuration = Configuration(),
                clock: any WallClock = SystemWallClock()) {
        self.init(verifier: DPoPVerifier(replayStore: replayStore, clock: clock), configuration: configuration)
    }

    /// The thumbprint (`jkt`) of the key that signed the request's valid `DPoP` proof.
    ///
    /// - Parameters:
    ///   - accessToken: the access token sent with the request, whose hash the proof must carry in `ath`.
    ///   - boundThumbprint: the `jkt` the token or session is bound to; the proof must be by that key.
    public func verifyProof(in request: HTTPRequest, accessToken: String? = nil, boundThumbprint: String? = nil) async throws
        -> String
    {
        let proofs = request.headers.values(for: "DPoP")
        guard proofs.count == 1, let proof = proofs.first else {
            throw TokenError.invalidDPoPProof.with(
                detail: proofs.isEmpty ? "The request has no DPoP proof." : "The request has more than one DPoP proof.")
        }
        let urls = try externalURLs(of: request)
        do {
            return try await verifier.verify(proof, method: request.method, urls: urls, accessToken: accessToken,
                                             expectedThumbprint: boundThumbprint).thumbprint
        } catch let error as JOSEError {
            switch error {
            case .replay: throw TokenError.invalidDPoPProof.with(detail: "The DPoP proof was already used.")
            case .keyBinding: throw TokenError.invalidDPoPProof.with(detail: "The DPoP proof is not by the key the session is bound to.")
            default: throw TokenError.invalidDPoPProof.with(detail: "The DPoP proof failed the \(error.reason) check.")
            }
        }
    }

    /// The URLs the client may have addressed, each followed by the raw path: the configured origin's, then
    /// the one of scheme and `Host` (when the request has a usable one).
    public func externalURLs(of request: HTTPRequest) throws(TokenError) -> [String] {
        let path = Self.rawPath(of: request.target)
        var urls = configuration.publicOrigin.map { [$0 + path] } ?? []
        if let host = request.headers["Host"], Self.isPlausibleHost(host) {
            urls.append((Self.isLoopback(host) ? "http://" : "https://") + host + path)
        }
        guard !urls.isEmpty else { throw TokenError.invalidDPoPProof.with(detail: "The request has no usable Host header.") }
        return urls
    }

    /// Whether a proof's key is the one a session is bound to, compared in constant time.
    public static func isSameKey(_ proofThumbprint: String, as boundThumbprint: String) -> Bool {
        ConstantTime.isEqual(Array(boundThumbprint.utf8), Array(proofThumbprint.utf8))
    }

    /// Throws ``TokenError/invalidDPoPProof`` unless the proof's key is the one the session is bound to.
    public static func requireSameKey(_ proofThumbprint: String, as boundThumbprint: String) throws(TokenError) {
        guard isSameKey(proofThumbprint, as: boundThumbprint) else {
            throw TokenError.invalidDPoPProof.with(detail: "The DPoP proof is not by the key the session is bound to.")
        }
    }

    /// The path of an origin-form or absolute-form target, still percent-encoded, without query or fragment.
    private static func rawPath(of target: String) -> Substring {
        var rest = target[...]
        if !rest.hasPrefix("/"), let scheme = rest.range(of: "://") {
            let authorityAndPath = rest[scheme.upperBound...]
            rest = authorityAndPath[(authorityAndPath.firstIndex(of: "/") ?? authorityAndPath.endIndex)...]
        }
        let path = rest.prefix { $0 != "?" && $0 != "#" }
        return path.isEmpty ? "/" : path
    }

    /// A `Host` value that cannot smuggle a path, credentials or a second authority into the URL.
    private static func isPlausibleHost(_ host: String) -> Bool {
        !host.isEmpty && host.utf8.count <= 255
            && host.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !"/\\@?#".utf8.contains($0) }
    }

    private static func isLoopback(_ host: String) -> Bool {
        let name = host.hasPrefix("[") ? String(host.prefix { $0 != "]" }) + "]" : String(host.prefix { $0 != ":" })
        return ["127.0.0.1", "localhost", "[::1]"].contains(name.lowercased())
    }
}
