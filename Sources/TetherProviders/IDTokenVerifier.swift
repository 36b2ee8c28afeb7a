import Foundation
import TetherCore
import TetherCrypto
import TetherJOSE

/// The checks Apple identity tokens, Facebook Limited Login tokens and Google ID tokens share.
///
/// RS256 pinned whatever the header says; keys from the provider's cached
/// JWKS; `iss` among the accepted issuers; `aud` among the configured ids;
/// `exp` and `iat` required, with leeway and a maximum age; a non-empty `sub`;
/// and the nonce rule. Provider-specific checks run between ``check(_:rawNonce:)``
/// and ``consumeNonce(of:)``, so a nonce is spent only on a token that passed everything.
struct IDTokenVerifier: Sendable {
    /// A token that passed the shared checks, with the nonce to spend once the rest pass too.
    struct CheckedToken {
        let jwt: VerifiedJWT
        let subject: String
        let nonce: UsedNonce?

        var claims: JWTClaims { jwt.claims }
    }

    let provider: ProviderName
    private let verifier: JWTVerifier
    private let keys: JWKSCache
    private let acceptedIssuers: Set<String>
    private let audiences: [String]
    private let nonceStore: any NonceStore
    private let clock: any WallClock
    private let leeway: TimeInterval
    /// The oldest (by `iat`) a token may be: past that it is refused whatever its `exp` says.
    private let maximumAge: TimeInterval

    /// A verifier for `provider`'s tokens as `settings` describe, with the leeway and timeouts of `configuration`.
    init(
        _ provider: ProviderName, _ settings: ProvidersConfiguration.TokenIssuer, in configuration: ProvidersConfiguration,
        httpClient: any HTTPClient, nonceStore: any NonceStore, clock: any WallClock
    ) throws {
        self.provider = provider
        verifier = JWTVerifier(
            configuration: .init(
                allowedAlgorithms: [.rs256], audiences: Set(settings.clientIDs), leeway: configuration.leeway,
                maximumAge: settings.maximumTokenAge, requiredClaims: ["exp", "iat"]),
            clock: clock)
        keys = try JWKSCache(
            configuration: .init(url: settings.jwksURL, timeout: configuration.jwksTimeout), httpClient: httpClient, clock: clock)
        // Google issues both spellings of its issuer; every other provider gets exact matching only.
        let bare = settings.issuer.hasPrefix("https://") ? String(settings.issuer.dropFirst("https://".count)) : settings.issuer
        acceptedIssuers = provider == .google ? [settings.issuer, bare] : [settings.issuer]
        audiences = settings.clientIDs
        maximumAge = settings.maximumTokenAge
        self.nonceStore = nonceStore
        self.clock = clock
        leeway = configuration.leeway
    }

    /// Runs the shared checks on `token`.
    func check(_ token: String, rawNonce: String?) async throws(ProviderError) -> CheckedToken {
        let jwt: VerifiedJWT
        do {
            jwt = try await verifier.verify(token, keys: keys)
        } catch let error as JOSEError {
            throw fail(ProviderError(error))
        } catch {
            throw fail(ProviderError.providerUnavailable.with(detail: "\(error)"))
        }
        guard let issuer = jwt.claims.issuer, acceptedIssuers.contains(issuer) else {
            throw fail(.invalidCredential(.issuer), "iss \(jwt.claims.issuer ?? "missing")")
        }
        guard let subject = jwt.claims.subject, !subject.allSatisfy(\.isWhitespace) else {
            throw fail(.invalidCredential(.subject), "sub missing or empty")
        }
        return CheckedToken(jwt: jwt, subject: subject, nonce: try nonce(of: jwt.claims, rawNonce: rawNonce))
    }

    /// Records the token's nonce as used; a second use of the same raw nonce fails with `nonce_reused`.
    ///
    /// - Returns: the nonce now spent (nil when the token carries none), for ``VerifiedIdentity/spentNonce``.
    func consumeNonce(of token: CheckedToken) async throws -> UsedNonce? {
        guard let nonce = token.nonce else { return nil }
        if try await nonceStore.consume(nonce, now: clock.now()) == .alreadyUsed {
            throw fail(.invalidCredential(.nonceReused), telling: "the nonce was used already: sign in again with a new one")
        }
        return nonce
    }

    /// Gives back a nonce ``consumeNonce(of:)`` spent for a credential then refused for another of its parts; best
    /// effort, as giving back after a failed command is.
    func release(_ nonce: UsedNonce?) async {
        guard let nonce else { return }
        try? await nonceStore.release(nonce)
    }

    /// The error with the provider attached (and a detail, when given).
    func fail(_ error: ProviderError, _ detail: String? = nil) -> ProviderError {
        let named = error.with(provider: provider.rawValue)
        return detail.map(named.with(detail:)) ?? named
    }

    /// The error with the provider attached, and `sentence` both as its detail and as what clients are told
    /// (``ProviderError/telling(client:)``): it names nothing but what the client sent.
    func fail(_ error: ProviderError, telling sentence: String) -> ProviderError {
        fail(error, sentence).telling(client: sentence)
    }

    /// A Boolean claim that some providers send as the string "true" or "false" (Apple).
    func flexibleBool(_ claims: JWTClaims, _ name: String) throws(ProviderError) -> Bool? {
        switch claims[name] {
        case nil, .null?: return nil
        case .bool(let value)?: return value
        case .string("true")?: return true
        case .string("false")?: return false
        default: throw fail(.invalidCredential(.malformed), "\(name) must be a Boolean or \"true\"/\"false\"")
        }
    }

    /// A string claim, or nil when absent; any other JSON type is malformed.
    func string(_ claims: JWTClaims, _ name: String) throws(ProviderError) -> String? {
        switch claims[name] {
        case nil, .null?: return nil
        case .string(let value)?: return value.isEmpty ? nil : value
        default: throw fail(.invalidCredential(.malformed), "\(name) must be a string")
        }
    }

    /// The configured client id the token was issued to (the first match when `aud` is a list).
    func audience(of token: CheckedToken) -> String? {
        let named = Set(token.claims.audience)
        return audiences.first(where: named.contains)
    }

    /// The claims for the record, as JSON.
    func rawClaims(_ token: CheckedToken) -> [String: JSONValue] {
        Dictionary(token.claims.object)
    }

    /// The nonce rule: both present and matching, or both absent.
    ///
    /// The token carries lowercase hex SHA-256 of the raw nonce; the app sends
    /// the raw nonce beside it. The record keeps that hash, never the raw nonce,
    /// until the token itself can no longer be accepted.
    private func nonce(of claims: JWTClaims, rawNonce: String?) throws(ProviderError) -> UsedNonce? {
        let claimed: String?
        switch claims["nonce"] {
        case nil, .null?: claimed = nil
        case .string(let value)?: claimed = value
        default: throw fail(.invalidCredential(.malformed), "nonce must be a string")
        }
        switch (claimed, rawNonce) {
        case (nil, nil):
            return nil
        case (nil, _?):
            throw fail(.invalidCredential(.nonceMissing), telling: "rawNonce was sent but the token has no nonce")
        case (_?, nil):
            throw fail(.invalidCredential(.nonceMissing), telling: "the token has a nonce but no rawNonce was sent")
        case (let claimed?, let rawNonce?):
            let expected = Self.hexDigest(rawNonce)
            guard ConstantTime.isEqual(Array(expected.utf8), Array(claimed.utf8)) else {
                throw fail(.invalidCredential(.nonceMismatch), telling: "the token's nonce is not the SHA-256 of rawNonce")
            }
            // Kept while the token can be accepted: until its `exp`, or its maximum age if that ends first (a token
            // may name an `exp` of any size, and a year past PostgreSQL's range is no time to keep anything until).
            let now = clock.now()
            let acceptedUntil = min(claims.expiresAt ?? now, (claims.issuedAt ?? now).addingTimeInterval(maximumAge))
            let expiresAt = acceptedUntil.addingTimeInterval(leeway)
            return UsedNonce(scope: provider.rawValue, hash: expected, expiresAt: expiresAt)
        }
    }

    /// Lowercase hex SHA-256 of the UTF-8 of `text`.
    static func hexDigest(_ text: String) -> String {
        DigestAlgorithm.sha256.hash(Array(text.utf8)).hexString
    }
}
