/// The protected header of a compact JWS, already checked against Tether's header rules.
///
/// Refused while parsing: `alg: none` in any spelling and unknown algorithms;
/// `jku`, `x5u` and `x5c` (keys must come from configuration, never from the
/// token); `jwk` unless the caller is verifying a DPoP proof; `b64`; a `crit`
/// naming anything not understood; and unsafe `kid` values.
public struct JOSEHeader: Sendable {
    /// What a particular kind of JWS may carry in its header.
    struct Policy: Sendable {
        /// DPoP proofs carry their public key in `jwk` (RFC 9449 §4.2); nothing else may.
        var allowsEmbeddedJWK = false
        /// Extensions a caller has opted into through `crit`.
        var understoodCriticalParameters: Set<String> = []
    }

    /// Header parameters defined by RFC 7515/7516 that `crit` must never list (RFC 7515 §4.1.11).
    private static let registeredNames: Set<String> = [
        "alg", "jku", "jwk", "kid", "x5u", "x5c", "x5t", "x5t#S256", "typ", "cty", "crit",
        "enc", "zip", "epk", "apu", "apv", "iv", "tag", "p2s", "p2c",
    ]

    /// The algorithm the token claims; it only selects among algorithms the key and verifier already permit.
    public let algorithm: JWSAlgorithm
    /// The `kid`, if present.
    public let keyID: String?
    /// The `typ`, if present.
    public let type: String?
    /// The embedded `jwk` (DPoP proofs only).
    public let embeddedKey: JOSEObject?
    /// All header parameters.
    public let object: JOSEObject

    init(parsing bytes: [UInt8], policy: Policy) throws {
        let object = try JOSEObject(parsing: bytes)
        guard let algorithmValue = object["alg"] else { throw JOSEError.algorithm.with(detail: "missing alg") }
        guard let algorithmName = algorithmValue.stringValue else { throw JOSEError.malformed.with(detail: "alg must be a string") }
        guard algorithmName.lowercased() != "none" else { throw JOSEError.algorithm.with(detail: "unsecured JWS (alg none)") }
        guard let algorithm = JWSAlgorithm(rawValue: algorithmName) else {
            throw JOSEError.algorithm.with(detail: "unsupported alg \(algorithmName)")
        }
        for name in ["jku", "x5u", "x5c", "b64"] where object[name] != nil {
            throw JOSEError.header.with(detail: "header parameter \(name) is not accepted")
        }
        var embeddedKey: JOSEObject?
        if let value = object["jwk"] {
            guard policy.allowsEmbeddedJWK else { throw JOSEError.header.with(detail: "embedded jwk is not accepted") }
            guard let key = value.objectValue else { throw JOSEError.malformed.with(detail: "jwk must be an object") }
            embeddedKey = key
        }
        if let value = object["crit"] {
            guard let entries = value.arrayValue, !entries.isEmpty else { throw JOSEError.critical.with(detail: "crit must be a non-empty array") }
            var seen: Set<String> = []
            for entry in entries {
                guard let name = entry.stringValue, seen.insert(name).inserted, !Self.registeredNames.contains(name),
                      policy.understoodCriticalParameters.contains(name), object[name] != nil else {
                    throw JOSEError.critical.with(detail: "unsupported critical header \(entry)")
                }
            }
        }
        var keyID: String?
        if let value = object["kid"] {
            guard let kid = value.stringValue, KeyID.isAcceptable(kid) else { throw JOSEError.keyID.with(detail: "unacceptable kid") }
            keyID = kid
        }
        var type: String?
        if let value = object["typ"] {
            guard let text = value.stringValue else { throw JOSEError.malformed.with(detail: "typ must be a string") }
            type = text
        }
        self.algorithm = algorithm
        self.keyID = keyID
        self.type = type
        self.embeddedKey = embeddedKey
        self.object = object
    }

    /// Whether `typ` names `mediaType`, compared as RFC 7515 §4.1.9 says: case-insensitively, `application/` optional.
    func hasType(_ mediaType: String) -> Bool {
        guard let type else { return false }
        return Self.normalizedType(type) == Self.normalizedType(mediaType)
    }

    private static func normalizedType(_ type: String) -> String {
        let lowered = type.lowercased()
        return lowered.hasPrefix("application/") ? String(lowered.dropFirst("application/".count)) : lowered
    }
}
