/// A failure in TetherCrypto, identified by a stable machine-readable ``reason``.
///
/// Equality compares the reason only (see ``ReasonCodedError``), so callers can
/// match `CryptoError.invalidKey` regardless of the OpenSSL detail text.
public struct CryptoError: ReasonCodedError {
    private enum Kind: String, Sendable {
        case invalidKey = "invalid_key"
        case unsupportedKey = "unsupported_key"
        case weakKey = "weak_key"
        case invalidInput = "invalid_input"
        case invalidEncoding = "invalid_encoding"
        case authenticationFailed = "authentication_failed"
        case operationFailed = "operation_failed"
    }

    private let kind: Kind
    /// Human-readable context (often OpenSSL's error text); not part of equality.
    public let detail: String

    private init(_ kind: Kind, detail: String = "") {
        self.kind = kind
        self.detail = detail
    }

    /// The stable machine code of the failed check, for logs and API errors.
    public var reason: String { kind.rawValue }

    /// Key material is malformed, inconsistent, or of the wrong type for the operation.
    public static let invalidKey = CryptoError(.invalidKey)
    /// The key type, curve or size is outside what Tether accepts.
    public static let unsupportedKey = CryptoError(.unsupportedKey)
    /// The key is too small to be trusted (for example RSA under 2048 bits).
    public static let weakKey = CryptoError(.weakKey)
    /// An argument has the wrong size or form (nonce, tag, digits, …).
    public static let invalidInput = CryptoError(.invalidInput)
    /// Text or binary encoding (PEM, DER, base32, URI) could not be decoded strictly.
    public static let invalidEncoding = CryptoError(.invalidEncoding)
    /// An AEAD tag did not verify: the ciphertext, nonce, AAD or key is wrong.
    public static let authenticationFailed = CryptoError(.authenticationFailed)
    /// OpenSSL reported an unexpected internal failure.
    public static let operationFailed = CryptoError(.operationFailed)

    /// The same error with a human-readable detail attached.
    public func with(detail: String) -> CryptoError { CryptoError(kind, detail: detail) }
}
