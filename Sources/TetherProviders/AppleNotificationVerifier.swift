import Foundation
import TetherCore
import TetherJOSE

/// One of Apple's server-to-server notifications about a Sign in with Apple account.
public struct AppleNotification: Sendable, Hashable {
    /// `consent-revoked`, `account-delete` (or `account-deleted`), `email-disabled`, `email-enabled`.
    public var type: String
    /// The Apple user id the notification is about.
    public var sub: String
    public var email: String?
    public var eventTime: Int?
    /// The JWT's `jti`, when Apple sent one.
    public var jti: String?

    /// What identifies a delivery, to drop Apple's repeats: the `jti`, else the event's time and subject.
    public var deduplicationKey: String { jti.map { "jti:\($0)" } ?? "event:\(eventTime.map(String.init) ?? "-"):\(type):\(sub)" }
}

/// Verifies the `payload` of `POST /v1/providers/apple/notifications`: a JWS Apple signs with the keys of
/// its JWKS. RS256 is pinned whatever the header says; `iss` must be Apple's and `aud` one of the
/// configured client ids; `iat` is required and `exp`, when present, holds. `events` may be an object
/// or a JSON string (Apple has sent both).
public struct AppleNotificationVerifier: Sendable {
    private let verifier: JWTVerifier
    private let keys: JWKSCache
    private let issuer: String

    /// Notifications older than this are refused (Apple retries for a while, not for weeks).
    public static let maximumAge: TimeInterval = 7 * 24 * 60 * 60

    public init(configuration: ProvidersConfiguration, httpClient: any HTTPClient, clock: any WallClock = SystemWallClock()) throws {
        let apple = configuration.apple
        verifier = JWTVerifier(
            configuration: .init(
                allowedAlgorithms: [.rs256], audiences: Set(apple.clientIDs), leeway: configuration.leeway,
                maximumAge: Self.maximumAge, requiredClaims: ["iat"]),
            clock: clock)
        keys = try JWKSCache(configuration: .init(url: apple.jwksURL, timeout: configuration.jwksTimeout), httpClient: httpClient, clock: clock)
        issuer = apple.issuer
    }

    /// The notification `payload` carries.
    ///
    /// - Throws: ``ProviderError`` `invalid_credential` for a forged, expired, misaddressed or malformed
    ///   payload; `provider_unavailable` when Apple's keys cannot be fetched.
    public func verify(_ payload: String) async throws(ProviderError) -> AppleNotification {
        let jwt: VerifiedJWT
        do {
            jwt = try await verifier.verify(payload, keys: keys)
        } catch let error as JOSEError {
            throw ProviderError(error).with(provider: "apple")
        } catch {
            throw ProviderError.providerUnavailable.with(provider: "apple").with(detail: "\(error)")
        }
        guard jwt.claims.issuer == issuer else {
            throw ProviderError.invalidCredential(.issuer).with(provider: "apple").with(detail: "iss \(jwt.claims.issuer ?? "missing")")
        }
        let events: JOSEObject
        switch jwt.claims["events"] {
        case .object(let object)?:
            events = object
        case .string(let text)?:
            guard case .object(let object)? = try? JOSEValue(parsing: Array(text.utf8)) else {
                throw Self.malformed("events is a string that is not a JSON object")
            }
            events = object
        default:
            throw Self.malformed("no events claim: this is not a server-to-server notification")
        }
        guard case .string(let type)? = events["type"], !type.isEmpty else { throw Self.malformed("events.type is missing") }
        guard case .string(let sub)? = events["sub"], !sub.isEmpty else { throw Self.malformed("events.sub is missing") }
        let eventTime: Int? = switch events["event_time"] {
        case .number(let value)?: Int(value)
        case .string(let text)?: Int(text)
        default: nil
        }
        return AppleNotification(
            type: type, sub: sub, email: events["email"]?.stringValue, eventTime: eventTime, jti: jwt.claims["jti"]?.stringValue)
    }

    private static func malformed(_ detail: String) -> ProviderError {
        ProviderError.invalidCredential(.malformed).with(provider: "apple").with(detail: detail)
    }
}
