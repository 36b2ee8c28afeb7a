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
    /// The provider's grant of `uid` ended (`reason`: `apple_consent_revoked`, `apple_account_deleted`,
    /// `facebook_data_deletion`): its identity goes and the sessions it started end. Nothing when that
    /// identity is not linked any more, another of the provider included (the user replaced it since the
    /// notice was looked up). Whether to erase a user left with no way in is the caller's call.
    public func endedByProvider(_ provider: String, uid: String, reason: String) -> [AccountEvent] {
        guard exists, let identity = identities[provider], identity.uid == uid else { return [] }
        let sessionsEnded: [AccountEvent] = activeSessions.filter { $0.amr.contains(provider) }.map {
            .sessionEnded(.init(sessionId: $0.id, reason: "provider_revoked"))
        }
        return sessionsEnded + unlinking(identity, reason: reason)
    }

    /// Whether `provider`'s identity `uid` is the user's only way to sign in.
    public func signsInOnly(with provider: String, uid: String) -> Bool {
        identities.count == 1 && identities[provider]?.uid == uid
    }

    /// The provider says whether it forwards mail to the address of `uid`; nothing when that is already known,
    /// or when that identity is not the user's any more.
    public func providerEmailStatus(_ provider: String, uid: String, forwarding: Bool) -> [AccountEvent] {
        guard exists, let identity = identities[provider], identity.uid == uid, identity.emailForwarding != forwarding else { return [] }
        return [.providerEmailStatusChanged(.init(provider: provider, forwarding: forwarding))]
    }
}

/// Decisions about the provider grants behind identities and sessions (issue #18).
extension UserAccount {
    /// The events that keep what verifying `identity` obtained of its grant: the token (when it is not the
    /// one already stored), or why an authorization code was not redeemed.
    func grantEvents(of identity: ExternalIdentity) -> [AccountEvent] {
        var events: [AccountEvent] = []
        if let grant = identity.providerGrant, identities[identity.provider]?.grant != grant {
            events.append(.providerTokenStored(.init(
                provider: identity.provider, kind: grant.kind,
                source: grant.kind == "refresh_token" ? "authorization_code" : "credential", clientId: grant.clientId,
                personal: PersonalData(providerToken: grant.token))))
        }
        if let reason = identity.codeNotRedeemed {
            events.append(.providerCodeNotRedeemed(.init(provider: identity.provider, reason: reason)))
        }
        return events
    }

    /// The grants `events` end, with the tokens to revoke: an identity unlinked, or every identity of a
    /// user erased. Decided on the state before the events; `uid` is the provider's id for the person.
    public func grantsEnded(by events: [AccountEvent]) -> [(provider: String, uid: String, grant: ProviderGrant)] {
        var ended: [String: (uid: String, grant: ProviderGrant)] = [:]
        for event in events {
            switch event {
            case .identityUnlinked(let payload):
                if let identity = identities[payload.provider], let grant = identity.grant { ended[payload.provider] = (identity.uid, grant) }
            case .userErased:
                for (provider, identity) in identities { if let grant = identity.grant { ended[provider] = (identity.uid, grant) } }
            default:
                break
            }
        }
        return ended.sorted { $0.key < $1.key }.map { ($0.key, $0.value.uid, $0.value.grant) }
    }

    /// The grant a refresh of session `id` should check at its provider: the session was opened by a
    /// provider whose token is stored, and nothing has vouched for that grant for `interval` (or, for a
    /// provider in `minimums`, for the longer of the two: Apple asks that its refresh tokens be validated
    /// at most once a day). What vouches: the session's start (a sign-in verified the credential), and
    /// the last check of the grant, through any of the user's sessions.
    public func grantToCheck(
        session id: UUID, now: Date, interval: TimeInterval, minimums: [String: TimeInterval] = [:]
    ) -> (provider: String, grant: ProviderGrant)? {
        guard let session = sessions[id], session.isActive else { return nil }
        for provider in session.amr {
            guard let identity = identities[provider], let grant = identity.grant else { continue }
            let vouched = max(session.startedAt, session.grantCheckedAt ?? .distantPast, identity.grantCheckedAt ?? .distantPast)
            if now.timeIntervalSince(vouched) >= max(interval, minimums[provider] ?? 0) { return (provider, grant) }
        }
        return nil
    }

    /// What a check of session `id`'s grant found (`valid`, `revoked`, `unreachable`): recorded, and a
    /// revoked grant ends every session the provider opened (`provider_revoked`), this one first.
    public func grantChecked(session id: UUID, provider: String, result: String) -> [AccountEvent] {
        guard sessions[id]?.isActive == true else { return [] }
        var events: [AccountEvent] = [.providerGrantChecked(.init(provider: provider, sessionId: id, result: result))]
        if result == "revoked" {
            let ended = activeSessions.filter { $0.id == id || $0.amr.contains(provider) }.sorted { ($0.id != id ? 1 : 0, $0.startedAt) < ($1.id != id ? 1 : 0, $1.startedAt) }
            events += ended.map { .sessionEnded(.init(sessionId: $0.id, reason: "provider_revoked")) }
        }
        return events
    }
}
