import Foundation
import TetherCore
import TetherJOSE

/// The configured identity providers, dispatching each credential to its verifier.
///
/// Built once at start-up: every enabled provider gets its verifier with its
/// own key-set cache, so caches live as long as the server. A credential for a
/// provider that is not configured fails with `unsupported_provider`.
public struct IdentityProviders: IdentityVerifier {
    private let verifiers: [ProviderName: any IdentityVerifier]

    /// The providers `configuration` enables, plus password sign-in when `passwords` is given.
    ///
    /// - Parameters:
    ///   - httpClient: the outbound HTTP seam for key sets and the Graph API.
    ///   - nonceStore: where used nonces are recorded (``PostgresNonceStore`` in production).
    ///   - clock: the time for token checks and key-set caching.
    ///   - passwords: password sign-in, when the accounts layer offers a directory.
    /// - Throws: ``ProvidersConfiguration/Invalid`` when a key-set URL is unusable.
    /// Where used nonces are recorded.
    public let nonceStore: any NonceStore
    /// Checks and revocations of stored grants (Apple refresh tokens, Facebook access tokens).
    public let grants: ProviderGrantCalls

    public init(
        configuration: ProvidersConfiguration, httpClient: any ProviderHTTPClient = CurlProviderHTTPClient(),
        nonceStore: any NonceStore, clock: any WallClock = SystemWallClock(), passwords: PasswordIdentityVerifier? = nil
    ) throws {
        self.nonceStore = nonceStore
        let apple = configuration.appleGrants.map { AppleGrantClient(configuration: $0, httpClient: httpClient, clock: clock) }
        grants = ProviderGrantCalls(apple: apple, facebook: FacebookGraph(configuration, httpClient: httpClient, clock: clock))
        var verifiers: [ProviderName: any IdentityVerifier] = [:]
        if configuration.apple.isEnabled {
            verifiers[.apple] = try Self.make("TETHER_APPLE_JWKS_URL") {
                try AppleIdentityVerifier(
                    configuration: configuration, httpClient: httpClient, nonceStore: nonceStore, clock: clock, grants: apple)
            }
        }
        if configuration.facebook.isEnabled {
            verifiers[.facebook] = try Self.make("TETHER_FACEBOOK_LIMITED_JWKS_URL") {
                try FacebookIdentityVerifier(configuration: configuration, httpClient: httpClient, nonceStore: nonceStore, clock: clock)
            }
        }
        if configuration.google.isEnabled {
            verifiers[.google] = try Self.make("TETHER_GOOGLE_JWKS_URL") {
                try GoogleIdentityVerifier(configuration: configuration, httpClient: httpClient, nonceStore: nonceStore, clock: clock)
            }
        }
        verifiers[.password] = passwords
        if configuration.allowsAnonymousUsers {
            verifiers[.anonymous] = AnonymousIdentityVerifier()
        }
        self.verifiers = verifiers
    }

    /// Builds one verifier; the only thing that can fail is the key-set cache refusing its URL.
    private static func make(
        _ variable: String, _ build: () throws -> any IdentityVerifier
    ) throws -> any IdentityVerifier {
        do {
            return try build()
        } catch let error as JOSEError {
            // fromEnvironment already refuses such URLs; this catches configurations built in code.
            throw ProvidersConfiguration.Invalid(variable, error.detail)
        }
    }

    /// The providers that accept credentials.
    public var enabledProviders: Set<ProviderName> { Set(verifiers.keys) }

    /// Verifies `credential` with its provider's verifier.
    ///
    /// - Throws: ``ProviderError`` (`invalid_credential`, `unsupported_provider`,
    ///   `provider_unavailable`), or the nonce store's or password directory's own error.
    public func verify(_ credential: ProviderCredential) async throws -> VerifiedIdentity {
        guard let verifier = verifiers[credential.provider] else {
            throw ProviderError.unsupportedProvider.with(provider: credential.provider.rawValue)
                .with(detail: "\(credential.provider.rawValue) is not configured")
        }
        let identity = try await verifier.verify(credential)
        if let oversized = identity.oversizedMember {
            throw ProviderError.invalidCredential(.malformed).with(provider: credential.provider.rawValue).with(detail: oversized)
        }
        return identity
    }
}
