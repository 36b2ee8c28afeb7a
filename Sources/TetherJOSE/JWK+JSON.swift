import TetherCrypto

extension JWK {
    /// Member names that only private or secret JWKs carry (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2).
    static let secretMemberNames: Set<String> = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    /// Parses a JWK from JSON text.
    public init(parsing bytes: some Collection<UInt8>) throws {
        try self.init(object: JOSEObject(parsing: bytes))
    }

    /// Builds a JWK from a parsed JSON object.
    public init(object: JOSEObject) throws {
        let keyType = try Self.string(object, "kty") ?? { throw JOSEError.key.with(detail: "missing kty") }()
        let algorithm = try Self.string(object, "alg").map { name in
            try JWSAlgorithm(rawValue: name) ?? { throw JOSEError.key.with(detail: "unsupported alg \(name)") }()
        }
        var operations: [String]?
        if let value = object["key_ops"] {
            guard let array = value.arrayValue, let names = Optional(array.compactMap(\.stringValue)),
                  names.count == array.count else { throw JOSEError.key.with(detail: "key_ops must be an array of strings") }
            operations = names
        }
        try self.init(material: Self.material(keyType: keyType, object), keyID: Self.string(object, "kid"),
                      algorithm: algorithm, use: Self.string(object, "use"), operations: operations)
    }

    /// The JWK as a JSON object; secret members appear only when asked for.
    public func jsonObject(includingSecretMembers: Bool = false) throws -> JOSEObject {
        var object: JOSEObject = ["kty": .string(keyType)]
        let encode = { (bytes: [UInt8]) in JOSEValue.string(Base64URL.encode(bytes)) }
        if let publicKey {
            switch publicKey.components {
            case .rsa(let modulus, let exponent):
                object["n"] = encode(modulus)
                object["e"] = encode(exponent)
            case .ecP256(let x, let y):
                object["crv"] = "P-256"
                object["x"] = encode(x)
                object["y"] = encode(y)
            case .ed25519(let x):
                object["crv"] = "Ed25519"
                object["x"] = encode(x)
            }
        }
        if includingSecretMembers {
            switch material {
            case .publicKey: break
            case .symmetric(let secret): object["k"] = encode(secret)
            case .privateKey(let key):
                switch try key.components() {
                case .rsa(let rsa):
                    object["d"] = encode(rsa.privateExponent)
                    object["p"] = encode(rsa.firstPrime)
                    object["q"] = encode(rsa.secondPrime)
                    object["dp"] = encode(rsa.firstExponent)
                    object["dq"] = encode(rsa.secondExponent)
                    object["qi"] = encode(rsa.coefficient)
                case .ecP256(_, _, let d), .ed25519(_, let d):
                    object["d"] = encode(d)
                }
            }
        }
        if let keyID { object["kid"] = .string(keyID) }
        if let use { object["use"] = .string(use) }
        if let algorithm { object["alg"] = .string(algorithm.rawValue) }
        if let operations { object["key_ops"] = .array(operations.map(JOSEValue.string)) }
        return object
    }

    /// The RFC 7638 SHA-256 thumbprint, base64url-encoded (the DPoP `jkt`).
    ///
    /// Built from the canonical key numbers, so two spellings of one key
    /// (for example with and without a leading zero in `n`) agree.
    public func thumbprint() -> String {
        // Required members only, names in lexicographic order (RFC 7638 §3.2).
        var members: [(name: String, value: JOSEValue)] = []
        let encode = { (bytes: [UInt8]) in JOSEValue.string(Base64URL.encode(bytes)) }
        switch publicKey?.components {
        case .rsa(let modulus, let exponent)?:
            members = [("e", encode(exponent)), ("kty", "RSA"), ("n", encode(modulus))]
        case .ecP256(let x, let y)?:
            members = [("crv", "P-256"), ("kty", "EC"), ("x", encode(x)), ("y", encode(y))]
        case .ed25519(let x)?:
            members = [("crv", "Ed25519"), ("kty", "OKP"), ("x", encode(x))]
        case nil:
            if case .symmetric(let secret) = material { members = [("k", encode(secret)), ("kty", "oct")] }
        }
        return Base64URL.encode(DigestAlgorithm.sha256.hash(JOSEObject(uniqueMembers: members).jsonBytes))
    }

    private static func material(keyType: String, _ object: JOSEObject) throws -> Material {
        do {
            switch keyType {
            case "RSA":
                let modulus = try bytes(object, "n"), exponent = try bytes(object, "e")
                guard object["d"] != nil else { return .publicKey(try PublicKey(components: .rsa(modulus: modulus, exponent: exponent))) }
                guard object["oth"] == nil else { throw JOSEError.key.with(detail: "multi-prime RSA is not supported") }
                return .privateKey(try PrivateKey(components: .rsa(RSAPrivateKeyComponents(
                    modulus: modulus, exponent: exponent, privateExponent: bytes(object, "d"),
                    firstPrime: bytes(object, "p"), secondPrime: bytes(object, "q"), firstExponent: bytes(object, "dp"),
                    secondExponent: bytes(object, "dq"), coefficient: bytes(object, "qi")))))
            case "EC":
                let curve = try string(object, "crv")
                guard curve == "P-256" else { throw JOSEError.key.with(detail: "unsupported curve \(curve ?? "none")") }
                let x = try bytes(object, "x"), y = try bytes(object, "y")
                guard object["d"] != nil else { return .publicKey(try PublicKey(components: .ecP256(x: x, y: y))) }
                return .privateKey(try PrivateKey(components: .ecP256(x: x, y: y, d: bytes(object, "d"))))
            case "OKP":
                let curve = try string(object, "crv")
                guard curve == "Ed25519" else { throw JOSEError.key.with(detail: "unsupported curve \(curve ?? "none")") }
                let x = try bytes(object, "x")
                guard object["d"] != nil else { return .publicKey(try PublicKey(components: .ed25519(x: x))) }
                return .privateKey(try PrivateKey(components: .ed25519(x: x, d: bytes(object, "d"))))
            case "oct":
                return .symmetric(try bytes(object, "k"))
            default:
                throw JOSEError.key.with(detail: "unsupported kty \(keyType)")
            }
        } catch let error as CryptoError {
            throw JOSEError.key.with(detail: error.description)
        }
    }

    private static func string(_ object: JOSEObject, _ name: String) throws -> String? {
        guard let value = object[name] else { return nil }
        guard let text = value.stringValue else { throw JOSEError.key.with(detail: "\(name) must be a string") }
        return text
    }

    private static func bytes(_ object: JOSEObject, _ name: String) throws -> [UInt8] {
        guard let text = try string(object, name) else { throw JOSEError.key.with(detail: "missing \(name)") }
        guard let decoded = try? Base64URL.decode(text) else { throw JOSEError.key.with(detail: "\(name) is not base64url") }
        return decoded
    }
}
