import TetherCrypto

/// A signing key that cannot be loaded or made: a server fault, answered 500.
///
/// Distinct from ``TokenError`` on purpose: a broken key store must never look
/// like a bad token to a client, which would sign its user out.
public struct SigningKeyError: ReasonCodedError {
    private enum Kind: String, Sendable {
        case corruptKey = "corrupt_key"
        case noSigningKey = "no_signing_key"
    }

    private let kind: Kind
    /// Context for logs.
    public let detail: String

    private init(_ kind: Kind, detail: String = "") {
        self.kind = kind
        self.detail = detail
    }

    /// The stable machine code.
    public var reason: String { kind.rawValue }

    /// The same error with `detail` attached.
    public func with(detail: String) -> SigningKeyError { SigningKeyError(kind, detail: detail) }

    /// A `signing_keys` row whose private key does not parse or does not match its `kid`.
    public static let corruptKey = SigningKeyError(.corruptKey)
    /// No key may sign at this moment even after the store tried to make one.
    public static let noSigningKey = SigningKeyError(.noSigningKey)
}
