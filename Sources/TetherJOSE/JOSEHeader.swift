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
        var algorithmName: String?
        var keyID: String?
        var type: String?
        var embeddedKey: JOSEObject?
        // One pass over the members: this runs for every token on the verification hot path.
        for (name, value) in object.members {
            switch name {
            case "alg":
                guard let text = value.stringValue else { throw JOSEError.malformed.with(detail: "alg must be a string") }
                algorithmName = text
            case "kid":
                guard let kid = value.stringValue, KeyID.isAcceptable(kid) else { throw JOSEError.keyID.with(detail: "unacceptable kid") }
                keyID = kid
            case "typ":
                guard let text = value.stringValue else { throw JOSEError.malformed.with(detail: "typ must be a string") }
                type = text
            case "jku", "x5u", "x5c", "b64":
                throw JOSEError.header.with(detail: "header parameter \(name) is not accepted")
            case "jwk":
                guard policy.allowsEmbeddedJWK else { throw JOSEError.header.with(detail: "embedded jwk is not accepted") }
                guard let key = value.objectValue else { throw JOSEError.malformed.with(detail: "jwk must be an object") }
                embeddedKey = key
            case "crit":
                try Self.checkCritical(value, in: object, policy: policy)
            default:
                continue
            }
        }
        guard let algorithmName else { throw JOSEError.algorithm.with(detail: "missing alg") }
        guard let algorithm = JWSAlgorithm(rawValue: algorithmName) else {
            let isNone = algorithmName.utf8.count == 4 && algorithmName.lowercased() == "none"
            throw JOSEError.algorithm.with(detail: isNone ? "unsecured JWS (alg none)" : "unsupported alg \(algorithmName)")
        }
        self.algorithm = algorithm
        self.keyID = keyID
        self.type = type
        self.embeddedKey = embeddedKey
        self.object = object
    }

    private static func checkCritical(_ value: JOSEValue, in object: JOSEObject, policy: Policy) throws {
        guard let entries = value.arrayValue, !entries.isEmpty else { throw JOSEError.critical.with(detail: "crit must be a non-empty array") }
        var seen: Set<String> = []
        for entry in entries {
            guard let name = entry.stringValue, seen.insert(name).inserted, !registeredNames.contains(name),
                  policy.understoodCriticalParameters.contains(name), object[name] != nil else {
                throw JOSEError.critical.with(detail: "unsupported critical header \(entry)")
            }
        }
    }

    /// Whether `typ` names `mediaType`, compared as RFC 7515 §4.1.9 says: case-insensitively, `application/` optional.
    func hasType(_ mediaType: String) -> Bool {
        guard let type else { return false }
        return Self.mediaTypeName(type).elementsEqual(Self.mediaTypeName(mediaType)) { Self.lowered($0) == Self.lowered($1) }
    }

    /// The UTF-8 of a media type without an `application/` prefix (matched case-insensitively).
    private static func mediaTypeName(_ type: String) -> Substring.UTF8View {
        let prefix = "application/".utf8
        let bytes = type.utf8
        let hasPrefix = bytes.count > prefix.count && bytes.prefix(prefix.count).elementsEqual(prefix) { lowered($0) == $1 }
        return Substring(type).utf8.dropFirst(hasPrefix ? prefix.count : 0)
    }

    private static func lowered(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }
}
