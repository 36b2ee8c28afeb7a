import Foundation
import TetherCrypto

/// A JWS in compact serialization (`header.payload.signature`), parsed but not yet verified.
public struct CompactJWS: Sendable {
    /// Tokens longer than this are refused before any decoding; real ID tokens are a few KiB.
    public static let defaultMaximumLength = 16 * 1024

    /// The checked protected header.
    public let header: JOSEHeader
    /// The decoded payload, unverified until ``verifySignature(using:allowedAlgorithms:)`` succeeds.
    public let payload: [UInt8]
    /// The decoded signature.
    public let signature: [UInt8]
    /// The ASCII bytes the signature covers: the first two segments and the dot between them.
    let signingInput: [UInt8]

    /// Parses `token` with the standard header rules (no embedded `jwk`, no `crit` extensions).
    public init(parsing token: String, maximumLength: Int = defaultMaximumLength) throws {
        try self.init(parsing: token, policy: JOSEHeader.Policy(), maximumLength: maximumLength)
    }

    init(parsing token: String, policy: JOSEHeader.Policy, maximumLength: Int) throws {
        var token = token
        let parsed = try token.withUTF8 { bytes -> CompactJWS in
            guard bytes.count <= maximumLength else { throw JOSEError.malformed.with(detail: "token too long") }
            let raw = UnsafeRawBufferPointer(bytes)
            // memchr scans with SIMD; a byte loop over a 1 KiB token costs as much as its SHA-256.
            func dot(after start: Int) -> Int? {
                guard start < raw.count, let found = memchr(raw.baseAddress! + start, Int32(UInt8(ascii: ".")), raw.count - start) else {
                    return nil
                }
                return raw.baseAddress!.distance(to: UnsafeRawPointer(found))
            }
            // JWE has five segments and JSON serialization none; both are refused here.
            guard let first = dot(after: 0), let second = dot(after: first + 1), dot(after: second + 1) == nil else {
                throw JOSEError.malformed.with(detail: "not a compact JWS")
            }
            let dots = (first: first, second: second)
            func segment(_ range: Range<Int>) throws -> [UInt8] {
                guard let decoded = Base64URL.decode(UnsafeRawBufferPointer(rebasing: raw[range])) else {
                    throw JOSEError.malformed.with(detail: "segment is not canonical base64url")
                }
                return decoded
            }
            let headerBytes = try segment(0..<dots.first)
            let header = try JOSEHeader(parsing: headerBytes, policy: policy)
            let signature = try segment((dots.second + 1)..<raw.count)
            guard !signature.isEmpty else { throw JOSEError.signature.with(detail: "missing signature") }
            return CompactJWS(header: header, payload: try segment((dots.first + 1)..<dots.second), signature: signature,
                              signingInput: Array(raw[..<dots.second]))
        }
        self = parsed
    }

    private init(header: JOSEHeader, payload: [UInt8], signature: [UInt8], signingInput: [UInt8]) {
        self.header = header
        self.payload = payload
        self.signature = signature
        self.signingInput = signingInput
    }

    /// Verifies the signature with a key from `keys`, chosen by `kid`, and returns that key.
    ///
    /// The algorithm is pinned: the header's `alg` must be in `allowedAlgorithms`,
    /// equal the key's own `alg` when it has one, and fit the key type. A token
    /// without `kid` is only accepted when exactly one key in the set could verify it.
    @discardableResult
    public func verifySignature(using keys: JWKSet, allowedAlgorithms: Set<JWSAlgorithm>) throws -> JWK {
        let candidates: [JWK]
        if let keyID = header.keyID {
            candidates = keys.keys(withID: keyID)
            guard !candidates.isEmpty else { throw JOSEError.unknownKey.with(detail: "no key with this kid") }
        } else {
            let fitting = keys.keys.filter { (try? checkAlgorithm(for: $0, allowedAlgorithms: allowedAlgorithms)) != nil }
            // With a single key, let its own check report why it does not fit.
            candidates = fitting.count == 1 || keys.keys.count != 1 ? fitting : keys.keys
            guard candidates.count == 1 else {
                throw JOSEError.unknownKey.with(detail: "token has no kid and \(candidates.count) keys could verify it")
            }
        }
        var firstError: JOSEError?
        // Several keys may share a kid during rotation; each is tried with its own pinned algorithm.
        for key in candidates {
            do {
                try verifySignature(with: key, allowedAlgorithms: allowedAlgorithms)
                return key
            } catch let error as JOSEError {
                firstError = firstError ?? error
            }
        }
        throw firstError ?? JOSEError.unknownKey
    }

    /// Verifies the signature with `key` under the same algorithm pinning rules.
    public func verifySignature(with key: JWK, allowedAlgorithms: Set<JWSAlgorithm>) throws {
        try checkAlgorithm(for: key, allowedAlgorithms: allowedAlgorithms)
        let algorithm = header.algorithm
        let isValid: Bool = switch key.material {
        case .publicKey(let publicKey):
            publicKey.isValidSignature(signature, for: signingInput, algorithm: algorithm.signatureAlgorithm!)
        case .privateKey(let privateKey):
            privateKey.publicKey.isValidSignature(signature, for: signingInput, algorithm: algorithm.signatureAlgorithm!)
        case .symmetric(let secret):
            HMAC.isValidAuthenticationCode(signature, for: signingInput, key: secret, digest: algorithm.hmacDigest!)
        }
        guard isValid else { throw JOSEError.signature }
    }

    private func checkAlgorithm(for key: JWK, allowedAlgorithms: Set<JWSAlgorithm>) throws {
        let algorithm = header.algorithm
        guard allowedAlgorithms.contains(algorithm) else {
            throw JOSEError.algorithm.with(detail: "\(algorithm.rawValue) is not allowed here")
        }
        guard key.isUsableForVerification else { throw JOSEError.key.with(detail: "key is not meant for signatures") }
        if let pinned = key.algorithm, pinned != algorithm {
            throw JOSEError.algorithm.with(detail: "key is for \(pinned.rawValue), token says \(algorithm.rawValue)")
        }
        guard algorithm.fits(key.material) else {
            throw JOSEError.algorithm.with(detail: "\(algorithm.rawValue) does not fit a \(key.keyType) key")
        }
    }
}
