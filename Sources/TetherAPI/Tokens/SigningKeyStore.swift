import Foundation
import TetherJOSE
import TetherPostgres

/// Tether's rotating signing keys (ES256 for access tokens, RS256 for Firebase ID tokens), kept in
/// `signing_keys` and cached in memory.
///
/// - The first call anywhere makes a key; processes racing to do so serialise
///   on a transaction-scoped advisory lock, so exactly one key results.
/// - A key signs for ``Configuration/rotationInterval``. Its successor is
///   published ``Configuration/prepublicationInterval`` before it starts
///   signing, so every JWKS cache (ours and clients') holds it in time.
/// - The predecessor stays published until every token it signed has expired
///   (``Configuration/retention`` after the switch), then its private half is erased.
/// - Reads come from memory for ``Configuration/cacheTimeToLive``; concurrent
///   reloads share one query, and when the database is unreachable the last
///   loaded keys keep signing and verifying.
public actor SigningKeyStore {
    /// Rotation and caching periods.
    public struct Configuration: Sendable {
        /// How long one key signs before its successor takes over.
        public var rotationInterval: TimeInterval
        /// How long a successor is published before it signs; longer than any JWKS cache `max-age`.
        public var prepublicationInterval: TimeInterval
        /// The longest lifetime of a token signed with these keys.
        public var maximumTokenLifetime: TimeInterval
        /// How long loaded keys are used before the table is read again.
        public var cacheTimeToLive: TimeInterval
        /// Extra time a predecessor stays published, for clock skew and verification leeway.
        public var retirementMargin: TimeInterval
        /// The least time between reloads caused by an unknown `kid` or a failed load.
        public var reloadCooldown: TimeInterval
        /// How far apart the clocks of callers (and processes) may be when they race to make the first key.
        public var clockSkewTolerance: TimeInterval

        /// Defaults: 30-day keys published 10 minutes ahead, 15-minute tokens, 60 s cache, 5 minutes margin.
        public init(rotationInterval: TimeInterval = 30 * 86_400, prepublicationInterval: TimeInterval = 600,
                    maximumTokenLifetime: TimeInterval = 900, cacheTimeToLive: TimeInterval = 60,
                    retirementMargin: TimeInterval = 300, reloadCooldown: TimeInterval = 5,
                    clockSkewTolerance: TimeInterval = 60) {
            self.rotationInterval = rotationInterval
            self.prepublicationInterval = prepublicationInterval
            self.maximumTokenLifetime = maximumTokenLifetime
            self.cacheTimeToLive = cacheTimeToLive
            self.retirementMargin = retirementMargin
            self.reloadCooldown = reloadCooldown
            self.clockSkewTolerance = clockSkewTolerance
        }

        /// How long a predecessor stays published after its successor starts signing.
        ///
        /// A process may sign with the old key for up to one cache lifetime after
        /// the switch, and that token lives ``maximumTokenLifetime`` more.
        public var retention: TimeInterval { cacheTimeToLive + maximumTokenLifetime + retirementMargin }
    }

    /// The periods in force.
    public nonisolated let configuration: Configuration
    /// What the keys sign with: ES256 for Tether's access tokens, RS256 for Firebase ID tokens. Each
    /// algorithm is its own ring in `signing_keys`, rotated on its own.
    public nonisolated let algorithm: JWSAlgorithm
    private let client: PostgresClient
    private let clock: any WallClock
    private var ring: SigningKeyRing?
    private var freshUntil = Date.distantPast
    private var nextReloadAllowed = Date.distantPast
    private var inFlight: Task<SigningKeyRing, any Error>?

    /// A store over `client`'s `signing_keys` of `algorithm` (ES256 or RS256), reading the time from `clock`.
    public init(client: PostgresClient, configuration: Configuration = Configuration(),
                clock: any WallClock = SystemWallClock(), algorithm: JWSAlgorithm = .es256) {
        precondition(algorithm == .es256 || algorithm == .rs256, "signing keys are ES256 or RS256")
        self.client = client
        self.configuration = configuration
        self.clock = clock
        self.algorithm = algorithm
    }

    /// The key to sign with now, making or rotating keys in the database when due.
    public func currentSigningKey() async throws -> SigningKey {
        let now = clock.now()
        let ring = try await ring(at: now)
        guard let key = ring.signingKey(at: now, tolerance: configuration.clockSkewTolerance) else {
            throw SigningKeyError.noSigningKey
        }
        return key
    }

    /// The public keys verifiers accept now: the signing key, a published successor and unexpired predecessors.
    public func publishedKeys() async throws -> JWKSet {
        let now = clock.now()
        return Self.keySet(try await ring(at: now).publishedKeys(at: now))
    }

    /// The published keys for verifying a token with `keyID`; an unknown `kid` reloads once per cooldown.
    ///
    /// Successors are published well before they sign, so an unknown `kid` is
    /// nearly always a forgery; the cooldown keeps made-up `kid`s off the database.
    public func verificationKeys(forKeyID keyID: String?) async throws -> JWKSet {
        var now = clock.now()
        var keys = try await ring(at: now).publishedKeys(at: now)
        if let keyID, !keys.contains(where: { $0.keyID == keyID }), now >= nextReloadAllowed {
            // A failed reload leaves the cached keys: the token is then refused, not the service.
            try? await reload(at: now)
            now = clock.now()
            keys = ring?.publishedKeys(at: now) ?? keys
        }
        return Self.keySet(keys)
    }

    /// The cached ring, reloaded when stale or when rotation is due (at most once per cooldown then).
    private func ring(at now: Date) async throws -> SigningKeyRing {
        if let ring, now < freshUntil {
            let isRotationDue = ring.rotationStep(at: now, configuration: configuration) != .none
            if !isRotationDue || now < nextReloadAllowed { return ring }
        }
        do {
            try await reload(at: now)
        } catch {
            // Keys already loaded keep working through a database outage; retry after the cooldown.
            guard let ring, ring.signingKey(at: now, tolerance: configuration.clockSkewTolerance) != nil else { throw error }
            freshUntil = now.addingTimeInterval(configuration.reloadCooldown)
            return ring
        }
        return ring!
    }

    /// Reads the table (rotating first if due), sharing one load among concurrent callers.
    private func reload(at now: Date) async throws {
        nextReloadAllowed = now.addingTimeInterval(configuration.reloadCooldown)
        let task: Task<SigningKeyRing, any Error>
        if let inFlight {
            task = inFlight
        } else {
            task = Task { [client, configuration, algorithm] in
                try await Self.loadRing(client: client, configuration: configuration, algorithm: algorithm, now: now)
            }
            inFlight = task
        }
        defer { if inFlight == task { inFlight = nil } }
        // Every waiter stores the result: which of them resumes first is not defined.
        ring = try await task.value
        freshUntil = now.addingTimeInterval(configuration.cacheTimeToLive)
    }

    private static func keySet(_ keys: [SigningKey]) -> JWKSet {
        JWKSet(keys: keys.map(\.publicJWK))
    }
}
