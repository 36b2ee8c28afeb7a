/// A JWK Set (RFC 7517 §5) of keys usable for signature verification, indexed by `kid`.
///
/// Keys that cannot be used — unsupported types or curves, weak RSA,
/// `use: enc`, `key_ops` without `verify`, unsafe `kid`s, or asymmetric keys
/// published with private members — are left out and counted, so one odd
/// key from an identity provider does not take the whole set down.
public struct JWKSet: Sendable {
    /// The usable keys, in document order.
    public let keys: [JWK]
    /// How many keys were skipped as unusable.
    public let unusableKeyCount: Int
    private let keysByID: [String: [JWK]]

    /// A set of already-built keys; those unusable for verification are skipped and counted.
    public init(keys candidates: [JWK]) {
        let usable = candidates.filter(Self.isUsable)
        self.init(usable: usable, unusableKeyCount: candidates.count - usable.count)
    }

    private init(usable: [JWK], unusableKeyCount: Int) {
        keys = usable
        self.unusableKeyCount = unusableKeyCount
        keysByID = Dictionary(grouping: usable.filter { $0.keyID != nil }, by: { $0.keyID! })
    }

    /// Parses a `{"keys": [...]}` document; the document must be well-formed, individual keys may be skipped.
    ///
    /// A set fetched from the network is public, so an HMAC secret in it is
    /// no secret at all: pass `allowsSymmetricKeys: false` there and such keys
    /// are skipped like any other unusable key.
    public init(parsing bytes: some Collection<UInt8>, allowsSymmetricKeys: Bool = true) throws {
        let object = try JOSEObject(parsing: bytes)
        guard let entries = object["keys"]?.arrayValue else { throw JOSEError.malformed.with(detail: "JWKS without a keys array") }
        let parsed = entries.compactMap { entry in entry.objectValue.flatMap { try? JWK(object: $0) } }
        let usable = parsed.filter { key in
            guard Self.isUsable(key) else { return false }
            if case .symmetric = key.material { return allowsSymmetricKeys }
            return true
        }
        self.init(usable: usable, unusableKeyCount: entries.count - usable.count)
    }

    /// The keys whose `kid` is `keyID`.
    public func keys(withID keyID: String) -> [JWK] {
        keysByID[keyID] ?? []
    }

    /// Whether some key has `kid` equal to `keyID`.
    public func containsKey(withID keyID: String) -> Bool {
        keysByID[keyID] != nil
    }

    /// The set as JSON with public members only, for serving at a `jwks_uri`; HMAC keys are never published.
    public func publicJSONObject() throws -> JOSEObject {
        let published = try keys.compactMap { try $0.publicJWK?.jsonObject() }
        return ["keys": .array(published.map(JOSEValue.object))]
    }

    private static func isUsable(_ key: JWK) -> Bool {
        guard key.isUsableForVerification else { return false }
        if case .privateKey = key.material { return false }
        return true
    }
}
