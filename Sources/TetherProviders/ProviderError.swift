import TetherCore
import TetherJOSE

/// Why a credential could not be turned into a ``VerifiedIdentity``.
///
/// Three outcomes, kept apart on purpose: the credential is bad
/// (`invalid_credential`, 401, with a ``CredentialRejection`` reason), the
/// provider is not configured (`unsupported_provider`, 400), or the provider
/// could not answer (`provider_unavailable`, 503 with `Retry-After`). A network
/// blip must never look like a bad credential, or clients would send their
/// users back to a login screen. A malformed request body is `invalid_request`.
///
/// Equality compares the kind and reason only; ``detail`` and ``provider`` are context.
public struct ProviderError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Kind: Sendable, Hashable {
        case invalidCredential(CredentialRejection)
        case unsupportedProvider
        case providerUnavailable
        case invalidRequest
    }

    private let kind: Kind
    /// Human-readable context for logs; may name internal URLs, so it never reaches clients.
    public let detail: String
    /// A sentence for the client in place of the surface's usual words, where those would mislead (``telling(client:)``).
    /// `/v1`'s problem detail says it for an unsupported provider; Parse's and Firebase's messages say it wherever they
    /// word one (Parse answers a refused credential with its fixed 252 text), and /v1's problem detail otherwise.
    public let clientDetail: String?
    /// The provider concerned (`apple`, `facebook`, `google`, `password`), when known.
    public let provider: String?
    /// For `invalid_request`: an RFC 6901 pointer to the offending member of the request body.
    public let pointer: String?

    private init(_ kind: Kind, detail: String = "", clientDetail: String? = nil, provider: String? = nil, pointer: String? = nil) {
        self.kind = kind
        self.detail = detail
        self.clientDetail = clientDetail
        self.provider = provider
        self.pointer = pointer
    }

    /// The credential failed the check `rejection`.
    public static func invalidCredential(_ rejection: CredentialRejection) -> ProviderError {
        ProviderError(.invalidCredential(rejection))
    }

    /// The provider is unknown, or not configured on this server.
    public static let unsupportedProvider = ProviderError(.unsupportedProvider)

    /// The provider could not be asked: timeout, 5xx, a response that is not the expected JSON, or no key set yet.
    public static let providerUnavailable = ProviderError(.providerUnavailable)

    /// The request body does not have the credential's shape; `pointer` names the member.
    public static func invalidRequest(_ detail: String, pointer: String? = nil) -> ProviderError {
        ProviderError(.invalidRequest, detail: detail, pointer: pointer)
    }

    /// The same error with `detail` attached.
    public func with(detail: String) -> ProviderError {
        ProviderError(kind, detail: detail, clientDetail: clientDetail, provider: provider, pointer: pointer)
    }

    /// The same error naming `provider`.
    public func with(provider: String) -> ProviderError {
        ProviderError(kind, detail: detail, clientDetail: clientDetail, provider: provider, pointer: pointer)
    }

    /// The same error telling the client `sentence` (a fixed one, never a detail for logs).
    public func telling(client sentence: String) -> ProviderError {
        ProviderError(kind, detail: detail, clientDetail: sentence, provider: provider, pointer: pointer)
    }

    /// The stable machine code: `invalid_credential`, `unsupported_provider`, `provider_unavailable` or `invalid_request`.
    public var code: String {
        switch kind {
        case .invalidCredential: "invalid_credential"
        case .unsupportedProvider: "unsupported_provider"
        case .providerUnavailable: "provider_unavailable"
        case .invalidRequest: "invalid_request"
        }
    }

    /// The four outcomes, for a surface to switch on.
    public enum Reason: Sendable, Hashable {
        case invalidCredential, unsupportedProvider, providerUnavailable, invalidRequest
    }

    /// Which of the four outcomes this is.
    public var reason: Reason {
        switch kind {
        case .invalidCredential: .invalidCredential
        case .unsupportedProvider: .unsupportedProvider
        case .providerUnavailable: .providerUnavailable
        case .invalidRequest: .invalidRequest
        }
    }

    /// For `invalid_credential`, the check that failed.
    public var rejection: CredentialRejection? {
        if case .invalidCredential(let rejection) = kind { rejection } else { nil }
    }

    /// Whether asking again later may succeed (only `provider_unavailable`).
    public var isRetryable: Bool { kind == .providerUnavailable }

    /// `code(reason): detail`, for logs.
    public var description: String {
        var text = code
        if let rejection { text += "(\(rejection.rawValue))" }
        if let provider { text += " [\(provider)]" }
        return detail.isEmpty ? text : "\(text): \(detail)"
    }

    /// Errors are equal when their code and reason are.
    public static func == (lhs: ProviderError, rhs: ProviderError) -> Bool { lhs.kind == rhs.kind }

    /// Hashes the code and reason, matching `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(kind) }

    /// Seconds a client should wait before retrying after `provider_unavailable`.
    public static let retryAfterSeconds = 5
}

extension ProviderError {
    /// The provider error for a failed token or key-set check from TetherJOSE.
    ///
    /// Only ``JOSEError/unavailable`` (no key set could be fetched) is the provider's
    /// fault; every other JOSE failure is the token's.
    init(_ error: JOSEError) {
        let rejection: CredentialRejection
        switch error {
        case .unavailable:
            self = ProviderError.providerUnavailable.with(detail: error.description)
            return
        case .algorithm, .key: rejection = .algorithm
        case .header, .critical, .keyID, .type: rejection = .header
        case .unknownKey: rejection = .unknownKey
        case .signature: rejection = .signature
        case .issuer: rejection = .issuer
        case .audience: rejection = .audience
        case .expired: rejection = .expired
        case .notYetValid: rejection = .notYetValid
        case .issuedInFuture: rejection = .issuedInFuture
        case .tooOld: rejection = .tooOld
        case .missingClaim: rejection = .missingClaim
        default: rejection = .malformed
        }
        self = ProviderError.invalidCredential(rejection).with(detail: error.description)
    }
}
