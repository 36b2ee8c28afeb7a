import Foundation

/// Verifies JWTs: compact JWS signature with a pinned algorithm, then the claims.
///
/// Checks, in order: token shape and header rules (see ``JOSEHeader``),
/// `typ`, key lookup by `kid`, algorithm pinning and signature, then `iss`,
/// `aud`, `exp`, `nbf`, `iat`, maximum age and required claims. Every
/// failure is a ``JOSEError`` naming the check.
public struct JWTVerifier: Sendable {
    /// What the header `typ` must be.
    public enum TypeRequirement: Sendable, Hashable {
        /// Any `typ`, or none.
        case any
        /// No `typ`, or one of these (identity provider ID tokens: `["JWT"]`).
        case absentOrOneOf(Set<String>)
        /// One of these, required (for example `["at+jwt"]`, RFC 9068).
        case oneOf(Set<String>)
    }

    /// What a token must satisfy.
    public struct Configuration: Sendable {
        /// The only algorithms accepted; intersected with each key's own `alg` and type.
        public var allowedAlgorithms: Set<JWSAlgorithm>
        /// The exact `iss` required, if any.
        public var issuer: String?
        /// Accepted audiences: when not empty, `aud` must name at least one of them.
        public var audiences: Set<String>
        /// Clock skew tolerated on `exp`, `nbf`, `iat` and the maximum age, in seconds.
        public var leeway: TimeInterval
        /// The greatest age, measured from `iat`, a token may have; `iat` is then required.
        public var maximumAge: TimeInterval?
        /// Claims that must be present.
        public var requiredClaims: Set<String>
        /// The accepted header `typ` values.
        public var typeRequirement: TypeRequirement
        /// `crit` header extensions the caller understands and checks itself.
        public var understoodCriticalParameters: Set<String>
        /// Longer tokens are refused before decoding.
        public var maximumTokenLength: Int

        /// A configuration with secure defaults: `exp` required, 60 s leeway, `typ` absent or `JWT`.
        public init(
            allowedAlgorithms: Set<JWSAlgorithm>, issuer: String? = nil, audiences: Set<String> = [],
            leeway: TimeInterval = 60, maximumAge: TimeInterval? = nil, requiredClaims: Set<String> = ["exp"],
            typeRequirement: TypeRequirement = .absentOrOneOf(["JWT"]), understoodCriticalParameters: Set<String> = [],
            maximumTokenLength: Int = CompactJWS.defaultMaximumLength
        ) {
            self.allowedAlgorithms = allowedAlgorithms
            self.issuer = issuer
            self.audiences = audiences
            self.leeway = leeway
            self.maximumAge = maximumAge
            self.requiredClaims = requiredClaims
            self.typeRequirement = typeRequirement
            self.understoodCriticalParameters = understoodCriticalParameters
            self.maximumTokenLength = maximumTokenLength
        }
    }

    /// The rules applied to every token.
    public let configuration: Configuration
    private let clock: any WallClock
    private let claimRules: ClaimRules

    /// A verifier with `configuration`, reading the time from `clock`.
    public init(configuration: Configuration, clock: any WallClock = SystemWallClock()) {
        self.configuration = configuration
        self.clock = clock
        self.claimRules = ClaimRules(configuration: configuration)
    }

    /// Verifies `token` against a fixed key set.
    public func verify(_ token: String, keys: JWKSet) throws -> VerifiedJWT {
        try verify(parse(token), keys: keys)
    }

    /// Verifies `token` against an identity provider's cached key set, refetching once for an unknown `kid`.
    public func verify(_ token: String, keys cache: JWKSCache) async throws -> VerifiedJWT {
        let jws = try parse(token)
        return try verify(jws, keys: await cache.keySet(forKeyID: jws.header.keyID))
    }

    private func parse(_ token: String) throws -> CompactJWS {
        let policy = JOSEHeader.Policy(understoodCriticalParameters: configuration.understoodCriticalParameters)
        let jws = try CompactJWS(parsing: token, policy: policy, maximumLength: configuration.maximumTokenLength)
        try checkType(jws.header)
        return jws
    }

    private func verify(_ jws: CompactJWS, keys: JWKSet) throws -> VerifiedJWT {
        let key = try jws.verifySignature(using: keys, allowedAlgorithms: configuration.allowedAlgorithms)
        // The payload is parsed only once the signature shows who wrote it.
        let claims = try JWTClaims(JOSEObject(parsing: jws.payload))
        try claimRules.check(claims, now: clock.now())
        return VerifiedJWT(header: jws.header, claims: claims, key: key, payload: jws.payload)
    }

    private func checkType(_ header: JOSEHeader) throws {
        switch configuration.typeRequirement {
        case .any:
            return
        case .absentOrOneOf(let types):
            guard header.type == nil || types.contains(where: header.hasType) else {
                throw JOSEError.type.with(detail: "unexpected typ \(header.type ?? "")")
            }
        case .oneOf(let types):
            guard types.contains(where: header.hasType) else { throw JOSEError.type.with(detail: "unexpected typ \(header.type ?? "none")") }
        }
    }
}
