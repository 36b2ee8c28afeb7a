import Foundation

/// An identity provider's key set, fetched over HTTP and cached.
///
/// - Fresh for `Cache-Control: max-age` seconds when the response says so
///   (kept between the cooldown and one day), otherwise for ``Configuration/timeToLive``.
/// - A token with an unknown `kid` triggers at most one refetch per
///   ``Configuration/refetchCooldown``, so made-up `kid`s cannot flood the provider.
/// - Concurrent callers share one in-flight fetch (single flight).
/// - When a fetch fails, the last good set keeps serving.
public actor JWKSCache {
    /// Where to fetch from and how often.
    public struct Configuration: Sendable {
        /// The `jwks_uri`; `https`, or `http` on loopback only (tests and the dev identity provider).
        public var url: URL
        /// How long a set stays fresh when the response has no `max-age`.
        public var timeToLive: TimeInterval
        /// The least time between two fetches triggered by unknown `kid`s or after a failure.
        public var refetchCooldown: TimeInterval
        /// The longest `max-age` honoured.
        public var maximumTimeToLive: TimeInterval
        /// Per-request timeout.
        public var timeout: TimeInterval
        /// Larger responses are refused.
        public var maximumResponseBytes: Int

        /// The defaults: 10 minutes TTL, 30 s cooldown, 5 s timeout, 256 KiB limit.
        public init(url: URL, timeToLive: TimeInterval = 600, refetchCooldown: TimeInterval = 30,
                    maximumTimeToLive: TimeInterval = 86_400, timeout: TimeInterval = 5,
                    maximumResponseBytes: Int = 256 * 1024) {
            self.url = url
            self.timeToLive = timeToLive
            self.refetchCooldown = refetchCooldown
            self.maximumTimeToLive = maximumTimeToLive
            self.timeout = timeout
            self.maximumResponseBytes = maximumResponseBytes
        }
    }

    private let configuration: Configuration
    private let httpClient: any HTTPClient
    private let clock: any WallClock
    private var current: JWKSet?
    private var freshUntil = Date.distantPast
    private var lastAttempt: Date?
    private var inFlight: Task<(JWKSet, TimeInterval), any Error>?
    private var lastFailure: (any Error)?

    /// A cache for `configuration.url`; refuses plain `http` except on loopback.
    public init(configuration: Configuration, httpClient: any HTTPClient = CurlHTTPClient(),
                clock: any WallClock = SystemWallClock()) throws {
        let scheme = configuration.url.scheme?.lowercased()
        let host = configuration.url.host?.lowercased() ?? ""
        let isLoopback = ["127.0.0.1", "::1", "[::1]", "localhost"].contains(host)
        guard scheme == "https" || (scheme == "http" && isLoopback) else {
            throw JOSEError.unavailable.with(detail: "JWKS URL must be https (http only on loopback)")
        }
        self.configuration = configuration
        self.httpClient = httpClient
        self.clock = clock
    }

    /// The most recent fetch error, for health reporting; nil after a success.
    public var lastFetchError: (any Error)? { lastFailure }

    /// The current set, fetching it when there is none or it has gone stale.
    ///
    /// A stale set is still returned when the refetch fails. Throws
    /// ``JOSEError/unavailable`` only when no set was ever fetched.
    public func keySet() async throws -> JWKSet {
        if let current, clock.now() < freshUntil { return current }
        if inFlight != nil || isCooldownOver() { await refresh() }
        guard let current else {
            throw JOSEError.unavailable.with(detail: lastFailure.map { "\($0)" } ?? "no key set fetched yet")
        }
        return current
    }

    /// A set for verifying a token with `keyID`: when the cached set lacks that `kid`,
    /// it is refetched once (shared by concurrent callers, limited by the cooldown).
    ///
    /// Throws ``JOSEError/unavailable`` when the `kid` is still unknown and the last refetch failed:
    /// the provider may have rotated to that key, so "no such key" cannot be concluded (a real user
    /// with a freshly rotated key must hear "retry", not "your credential is bad").
    public func keySet(forKeyID keyID: String?) async throws -> JWKSet {
        let set = try await keySet()
        guard let keyID, !set.containsKey(withID: keyID) else { return set }
        if inFlight != nil || isCooldownOver() { await refresh() }
        let latest = current ?? set
        if !latest.containsKey(withID: keyID), let lastFailure {
            throw JOSEError.unavailable.with(detail: "kid \(keyID) is not in the cached key set, and refetching it failed: \(lastFailure)")
        }
        return latest
    }

    private func isCooldownOver() -> Bool {
        guard let lastAttempt else { return true }
        return clock.now().timeIntervalSince(lastAttempt) >= configuration.refetchCooldown
    }

    /// Runs one fetch, or joins the one already running, and records the outcome.
    private func refresh() async {
        let task: Task<(JWKSet, TimeInterval), any Error>
        if let inFlight {
            task = inFlight
        } else {
            lastAttempt = clock.now()
            let configuration = configuration, httpClient = httpClient
            task = Task { try await Self.fetch(configuration, httpClient) }
            inFlight = task
        }
        let outcome = await task.result
        // Every joined caller sees the same outcome; only the first to resume applies it.
        guard inFlight == task else { return }
        inFlight = nil
        switch outcome {
        case .success(let (set, timeToLive)):
            current = set
            freshUntil = clock.now().addingTimeInterval(timeToLive)
            lastFailure = nil
        case .failure(let error):
            lastFailure = error
        }
    }

    private static func fetch(_ configuration: Configuration, _ httpClient: any HTTPClient) async throws -> (JWKSet, TimeInterval) {
        let response = try await httpClient.get(url: configuration.url, timeout: configuration.timeout,
                                                maxBytes: configuration.maximumResponseBytes)
        guard response.status == 200 else { throw JOSEError.unavailable.with(detail: "JWKS endpoint answered \(response.status)") }
        let set = try JWKSet(parsing: response.body, allowsSymmetricKeys: false)
        // An empty set would lock every user out; treat it like a failed fetch and keep the old one.
        guard !set.keys.isEmpty else { throw JOSEError.unavailable.with(detail: "JWKS has no usable keys") }
        let timeToLive = maxAge(response.headers["cache-control"]).map {
            min(max($0, configuration.refetchCooldown), configuration.maximumTimeToLive)
        } ?? configuration.timeToLive
        return (set, timeToLive)
    }

    /// The `max-age` directive of a Cache-Control value, if well-formed.
    static func maxAge(_ cacheControl: String?) -> TimeInterval? {
        guard let cacheControl else { return nil }
        for directive in cacheControl.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, parts[0].lowercased() == "max-age" else { continue }
            let digits = parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy(\.isASCII), let seconds = Int(digits), seconds >= 0 else {
                return nil
            }
            return TimeInterval(seconds)
        }
        return nil
    }
}
