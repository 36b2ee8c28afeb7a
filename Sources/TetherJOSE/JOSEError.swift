import TetherCrypto

/// A rejected token, key or proof, identified by a stable machine-readable ``reason``.
///
/// The reason names the check that failed (`signature`, `audience`,
/// `expired`, …) so callers can log and map it without parsing text.
/// Equality compares the reason only (see ``ReasonCodedError``).
public struct JOSEError: ReasonCodedError {
    private enum Kind: String, Sendable {
        case malformed
        case algorithm
        case header
        case critical
        case keyID = "key_id"
        case unknownKey = "unknown_key"
        case key
        case signature
        case type
        case issuer
        case audience
        case expired
        case notYetValid = "not_yet_valid"
        case issuedInFuture = "issued_in_future"
        case tooOld = "too_old"
        case missingClaim = "missing_claim"
        case replay
        case method
        case url
        case accessTokenHash = "access_token_hash"
        case nonce
        case keyBinding = "key_binding"
        case unavailable
    }

    private let kind: Kind
    /// Human-readable context for logs; not part of equality and never needed by callers.
    public let detail: String

    private init(_ kind: Kind, detail: String = "") {
        self.kind = kind
        self.detail = detail
    }

    /// The stable machine code of the failed check.
    public var reason: String { kind.rawValue }

    /// The same error with a human-readable detail attached.
    public func with(detail: String) -> JOSEError { JOSEError(kind, detail: detail) }

    /// Not valid compact JWS, base64url or JSON, or a claim of the wrong JSON type.
    public static let malformed = JOSEError(.malformed)
    /// The `alg` is `none`, unknown, not allowed, or does not fit the key.
    public static let algorithm = JOSEError(.algorithm)
    /// A forbidden header parameter (`jku`, `x5u`, `x5c`, `jwk` outside DPoP, `b64`).
    public static let header = JOSEError(.header)
    /// A `crit` header naming an extension Tether does not understand.
    public static let critical = JOSEError(.critical)
    /// A `kid` that is empty, longer than 256 characters or has unsafe characters.
    public static let keyID = JOSEError(.keyID)
    /// No key in the set matches the token's `kid`.
    public static let unknownKey = JOSEError(.unknownKey)
    /// The key is malformed, unsupported, too weak, private where it must be public, or not meant for signatures.
    public static let key = JOSEError(.key)
    /// The signature does not verify.
    public static let signature = JOSEError(.signature)
    /// The header `typ` is not the expected one.
    public static let type = JOSEError(.type)
    /// The `iss` claim differs from the configured issuer.
    public static let issuer = JOSEError(.issuer)
    /// The `aud` claim names none of the configured audiences.
    public static let audience = JOSEError(.audience)
    /// The `exp` time has passed (beyond the leeway).
    public static let expired = JOSEError(.expired)
    /// The `nbf` time has not come yet (beyond the leeway).
    public static let notYetValid = JOSEError(.notYetValid)
    /// The `iat` time lies in the future (beyond the leeway).
    public static let issuedInFuture = JOSEError(.issuedInFuture)
    /// The token or proof was issued longer ago than the maximum age allows.
    public static let tooOld = JOSEError(.tooOld)
    /// A required claim is absent.
    public static let missingClaim = JOSEError(.missingClaim)
    /// A DPoP proof's `jti` was seen before.
    public static let replay = JOSEError(.replay)
    /// A DPoP proof's `htm` is not the request method.
    public static let method = JOSEError(.method)
    /// A DPoP proof's `htu` is not the request URI.
    public static let url = JOSEError(.url)
    /// A DPoP proof's `ath` is not the hash of the presented access token.
    public static let accessTokenHash = JOSEError(.accessTokenHash)
    /// A DPoP proof lacks the server-provided nonce, or carries a stale one (`use_dpop_nonce`).
    public static let nonce = JOSEError(.nonce)
    /// A DPoP proof was signed by a key other than the one the token is bound to.
    public static let keyBinding = JOSEError(.keyBinding)
    /// No key set could be obtained from the identity provider.
    public static let unavailable = JOSEError(.unavailable)
}
