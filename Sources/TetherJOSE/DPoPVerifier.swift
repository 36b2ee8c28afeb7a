import Foundation
import TetherCrypto

/// Verifies DPoP proofs (RFC 9449 §4.3) and returns the proof key's thumbprint.
///
/// A proof is accepted only if it is a compact JWS with `typ: dpop+jwt`, an
/// allowed asymmetric `alg`, a public `jwk` header that verifies the
/// signature, `htm`/`htu` matching the request, a recent `iat`, the server
/// nonce when one is required, `ath` matching a presented access token, the
/// expected key binding, and a `jti` never seen before.
public struct DPoPVerifier: Sendable {
    /// Proof acceptance rules.
    public struct Configuration: Sendable {
        /// Accepted algorithms; HMAC is never accepted whatever this says.
        public var allowedAlgorithms: Set<JWSAlgorithm>
        /// How old (by `iat`) a proof may be.
        public var maximumAge: TimeInterval
        /// Clock skew tolerated for proofs issued slightly in the future.
        public var leeway: TimeInterval
        /// Longer proofs are refused before decoding.
        public var maximumProofLength: Int

        /// Defaults: ES256, RS256, PS256 and EdDSA; 5 minutes; 30 s skew.
        public init(allowedAlgorithms: Set<JWSAlgorithm> = [.es256, .rs256, .ps256, .edDSA], maximumAge: TimeInterval = 300,
                    leeway: TimeInterval = 30, maximumProofLength: Int = 8 * 1024) {
            self.allowedAlgorithms = allowedAlgorithms
            self.maximumAge = maximumAge
            self.leeway = leeway
            self.maximumProofLength = maximumProofLength
        }
    }

    /// A verified proof.
    public struct Proof: Sendable {
        /// The RFC 7638 thumbprint of the proof key: the `jkt` to bind tokens to.
        public let thumbprint: String
        /// The proof's public key.
        public let key: JWK
        /// The proof's claims.
        public let claims: JWTClaims
    }

    /// The acceptance rules.
    public let configuration: Configuration
    private let replayStore: any DPoPReplayStore
    private let clock: any WallClock

    /// A verifier recording `jti`s in `replayStore`.
    public init(configuration: Configuration = Configuration(), replayStore: any DPoPReplayStore,
                clock: any WallClock = SystemWallClock()) {
        self.configuration = configuration
        self.replayStore = replayStore
        self.clock = clock
    }

    /// Verifies `proof` for a request with `method` to `url`.
    public func verify(_ proof: String, method: String, url: String, accessToken: String? = nil,
                       expectedThumbprint: String? = nil, acceptedNonces: Set<String>? = nil) async throws -> Proof {
        try await verify(proof, method: method, urls: [url], accessToken: accessToken, expectedThumbprint: expectedThumbprint,
                         acceptedNonces: acceptedNonces)
    }

    /// Verifies `proof` for a request with `method` to any of `urls` (the names one server answers under).
    ///
    /// - Parameters:
    ///   - accessToken: the DPoP-bound access token sent with the request, if any; its hash must be in `ath`.
    ///   - expectedThumbprint: the `cnf.jkt` the token or session is bound to, if any.
    ///   - acceptedNonces: the server nonces currently valid, or nil when the server does not use nonces.
    public func verify(_ proof: String, method: String, urls: [String], accessToken: String? = nil,
                       expectedThumbprint: String? = nil, acceptedNonces: Set<String>? = nil) async throws -> Proof {
        let jws = try CompactJWS(parsing: proof, policy: JOSEHeader.Policy(allowsEmbeddedJWK: true),
                                 maximumLength: configuration.maximumProofLength)
        guard jws.header.hasType("dpop+jwt") else { throw JOSEError.type.with(detail: "typ must be dpop+jwt") }
        guard !jws.header.algorithm.isSymmetric else { throw JOSEError.algorithm.with(detail: "DPoP needs an asymmetric alg") }
        guard let keyObject = jws.header.embeddedKey else { throw JOSEError.header.with(detail: "missing jwk header") }
        // A private key in the header means the client leaked it; refuse rather than quietly use the public half.
        guard JWK.secretMemberNames.isDisjoint(with: keyObject.names) else {
            throw JOSEError.key.with(detail: "jwk header contains private key members")
        }
        let key = try JWK(object: keyObject)
        try jws.verifySignature(with: key, allowedAlgorithms: configuration.allowedAlgorithms.filter { !$0.isSymmetric })

        let claims = try JWTClaims(JOSEObject(parsing: jws.payload))
        for name in ["jti", "htm", "htu"] {
            guard let value = claims[name] else { throw JOSEError.missingClaim.with(detail: name) }
            guard value.stringValue != nil else { throw JOSEError.malformed.with(detail: "\(name) must be a string") }
        }
        let jti = claims.jwtID!
        guard !jti.isEmpty, jti.utf8.count <= 256 else { throw JOSEError.malformed.with(detail: "jti length") }
        guard claims["htm"]?.stringValue == method else { throw JOSEError.method }
        // A name that is no absolute http(s) URL (a Host with a bad port) cannot be what the proof names; another may.
        let expectedURIs = urls.compactMap(TargetURI.normalized)
        guard !expectedURIs.isEmpty else { throw JOSEError.url.with(detail: "request URL is not absolute http(s)") }
        guard let claimed = TargetURI.normalized(claims["htu"]!.stringValue!), expectedURIs.contains(claimed) else { throw JOSEError.url }
        let now = clock.now()
        try ClaimRules(leeway: configuration.leeway, maximumAge: configuration.maximumAge, requiredClaims: ["iat"])
            .check(claims, now: now)
        if let acceptedNonces {
            guard let nonce = claims["nonce"]?.stringValue, acceptedNonces.contains(nonce) else { throw JOSEError.nonce }
        }
        if let accessToken {
            guard let hash = claims["ath"]?.stringValue else { throw JOSEError.missingClaim.with(detail: "ath") }
            let expected = Base64URL.encode(DigestAlgorithm.sha256.hash(Array(accessToken.utf8)))
            guard ConstantTime.isEqual(Array(hash.utf8), Array(expected.utf8)) else { throw JOSEError.accessTokenHash }
        }
        let thumbprint = key.thumbprint()
        if let expectedThumbprint {
            guard ConstantTime.isEqual(Array(thumbprint.utf8), Array(expectedThumbprint.utf8)) else { throw JOSEError.keyBinding }
        }
        // Recorded last, so rejected proofs never occupy the store. Scoped by key: a replay carries the same key.
        let issuedAt = claims["iat"]!.numberValue!
        let expiry = Date(timeIntervalSince1970: issuedAt + configuration.maximumAge + 2 * configuration.leeway)
        let identifier = Base64URL.encode(DigestAlgorithm.sha256.hash(Array("\(thumbprint):\(jti)".utf8)))
        guard try await replayStore.recordFirstUse(of: identifier, until: expiry) else { throw JOSEError.replay }
        return Proof(thumbprint: thumbprint, key: key, claims: claims)
    }
}
