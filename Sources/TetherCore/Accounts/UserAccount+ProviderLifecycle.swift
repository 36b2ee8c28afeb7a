import Foundation

extension AccountEvent {
    public struct ProviderEmailStatusChanged: Codable, Sendable, Hashable {
        public var provider: String
        /// Whether mail to the provider's address reaches the person.
        public var forwarding: Bool

        public init(provider: String, forwarding: Bool) {
            self.provider = provider
            self.forwarding = forwarding
        }
    }
}

/// Decisions on what a provider tells Tether about a person outside a sign-in: Apple's server-to-server
/// notifications, Facebook's data deletion requests.
extension UserAccount {
    /// The provider's grant ended (`reason`: `apple_consent_revoked`, `apple_account_deleted`,
    /// `facebook_data_deletion`): its identity goes and the sessions it started end. Nothing when the
    /// identity is not linked any more. Whether to erase a user left with no way in is the caller's call.
    public func endedByProvider(_ provider: String, reason: String) -> [AccountEvent] {
        guard exists, let identity = identities[provider] else { return [] }
        var events: [AccountEvent] = activeSessions.filter { $0.amr.contains(provider) }.map {
            .sessionEnded(.init(sessionId: $0.id, reason: "provider_revoked"))
        }
        events.append(.identityUnlinked(.init(provider: provider, uid: identity.uid, reason: reason)))
        return events
    }

    /// Whether `provider` is the user's only way to sign in.
    public func signsInOnly(with provider: String) -> Bool {
        identities.count == 1 && identities[provider] != nil
    }

    /// The provider says whether it forwards mail to its address; nothing when that is already known.
    public func providerEmailStatus(_ provider: String, forwarding: Bool) -> [AccountEvent] {
        guard exists, let identity = identities[provider], identity.emailForwarding != forwarding else { return [] }
        return [.providerEmailStatusChanged(.init(provider: provider, forwarding: forwarding))]
    }
}
