import Foundation

/// What Tether holds of a person's grant at a provider: Apple's refresh token (from an authorization
/// code), Facebook's user access token. Kept sealed with the user's key, in the event that stored it;
/// used to revoke the grant when the identity goes or the user is erased, and to check, now and then,
/// that the grant still stands.
public struct ProviderGrant: Codable, Sendable, Hashable {
    /// `refresh_token` (Apple) or `access_token` (Facebook).
    public var kind: String
    /// The token itself (personal: it is sealed in the event that stores it).
    public var token: String
    /// The client id (Apple) or app id (Facebook) the token was issued to.
    public var clientId: String?

    public init(kind: String, token: String, clientId: String?) {
        self.kind = kind
        self.token = token
        self.clientId = clientId
    }
}

extension AccountEvent {
    /// A provider token was stored for the identity: Apple's refresh token from a redeemed
    /// authorization code, or the Facebook access token the sign-in presented.
    public struct ProviderTokenStored: Codable, Sendable, Hashable {
        public var provider: String
        /// `refresh_token` or `access_token`.
        public var kind: String
        /// `authorization_code` (redeemed at Apple) or `credential` (the token the client presented).
        public var source: String
        public var clientId: String?
        /// `providerToken` only.
        public var personal: PersonalData

        public init(provider: String, kind: String, source: String, clientId: String?, personal: PersonalData) {
            self.provider = provider
            self.kind = kind
            self.source = source
            self.clientId = clientId
            self.personal = personal
        }
    }

    /// An authorization code came with the sign-in but could not be redeemed (`provider_unavailable`,
    /// `not_configured`): the sign-in went on with the identity token alone.
    public struct ProviderCodeNotRedeemed: Codable, Sendable, Hashable {
        public var provider: String
        public var reason: String

        public init(provider: String, reason: String) {
            self.provider = provider
            self.reason = reason
        }
    }

    /// A session's grant was checked at its provider on a refresh: `valid`, `revoked` (the session
    /// ends with reason `provider_revoked`) or `unreachable` (the session goes on; checked again later).
    public struct ProviderGrantChecked: Codable, Sendable, Hashable {
        public var provider: String
        public var sessionId: UUID
        public var result: String

        public init(provider: String, sessionId: UUID, result: String) {
            self.provider = provider
            self.sessionId = sessionId
            self.result = result
        }
    }

    /// A call to a provider from the outbox (`ProviderTokenRevoked`, `ProviderRevocationFailed`,
    /// `ProviderRevocationAbandoned`): `action` is `apple.revoke` or `facebook.revoke_permissions`.
    public struct ProviderCall: Codable, Sendable, Hashable {
        public var provider: String
        public var action: String
        /// The outbox row's id.
        public var callId: UUID
        /// The attempt this records (1 for the first).
        public var attempt: Int
        /// Why the attempt failed, for a failure or the last one.
        public var error: String?
        /// When the next attempt is due, for a failure that will be retried.
        public var retryAt: String?

        public init(provider: String, action: String, callId: UUID, attempt: Int, error: String? = nil, retryAt: String? = nil) {
            self.provider = provider
            self.action = action
            self.callId = callId
            self.attempt = attempt
            self.error = error
            self.retryAt = retryAt
        }
    }
}
