import Foundation
import Testing
import TetherCore

@Suite("User account decisions (pure)")
struct UserAccountTests {
    let now = Date(timeIntervalSince1970: 1_795_958_985)

    private func session(_ hash: String = "h0", jkt: String? = nil) -> NewSession {
        NewSession(id: UUID(), refreshTokenHash: hash, amr: ["apple"], jkt: jkt)
    }

    private func account(_ events: [AccountEvent], id: UUID) -> UserAccount {
        UserAccount(id: id, history: events.map { ($0, now) }, version: events.count)
    }

    private let apple = ExternalIdentity(provider: "apple", uid: "001.apple", email: "a@privaterelay.appleid.com", isEmailVerified: true)
    private let facebook = ExternalIdentity(provider: "facebook", uid: "fb-1", email: "a@privaterelay.appleid.com", isEmailVerified: false)

    @Test func registeringCreatesTheUserWithItsFirstIdentityAndASession() {
        let id = UUID()
        let events = UserAccount.register(id: id, identity: apple, session: session(), now: now)
        #expect(events.map(\.type) == ["UserRegistered", "IdentityLinked", "SignedIn", "SessionStarted"])
        let user = account(events, id: id)
        #expect(user.exists)
        #expect(user.isEmailVerified)
        #expect(user.signInMethods == ["apple"])
        #expect(user.activeSessions.count == 1)
    }

    @Test func linkingASecondIdentityOfALinkedProviderFails() throws {
        let id = UUID()
        let user = account(UserAccount.register(id: id, identity: apple, session: nil, now: now), id: id)
        #expect(throws: AccountError.providerAlreadyLinked) {
            try user.link(ExternalIdentity(provider: "apple", uid: "other"))
        }
        #expect(throws: AccountError.credentialAlreadyInUse) { try user.link(apple) }
        #expect(try user.link(facebook).map(\.type) == ["IdentityLinked"])
    }

    /// A provider's notice about one of its ids (Apple's consent revoked, Facebook's data deletion) acts on that id
    /// only: a user who replaced it with another id of the provider since the notice was looked up keeps the new one.
    @Test func aProvidersNoticeActsOnTheIdItNames() throws {
        let id = UUID()
        let user = account(UserAccount.register(id: id, identity: apple, session: session(), now: now), id: id)
        #expect(user.endedByProvider("apple", uid: "001.other", reason: "apple_consent_revoked").isEmpty)
        #expect(!user.signsInOnly(with: "apple", uid: "001.other"))
        #expect(user.providerEmailStatus("apple", uid: "001.other", forwarding: false).isEmpty)
        #expect(user.endedByProvider("apple", uid: apple.uid, reason: "apple_consent_revoked").map(\.type) == ["SessionEnded", "IdentityUnlinked"])
        #expect(user.signsInOnly(with: "apple", uid: apple.uid))
        #expect(user.providerEmailStatus("apple", uid: apple.uid, forwarding: false).map(\.type) == ["ProviderEmailStatusChanged"])
    }

    @Test func theLastSignInMethodCannotBeRemovedExceptByAnAdmin() throws {
        let id = UUID()
        let user = account(UserAccount.register(id: id, identity: apple, session: nil, now: now), id: id)
        #expect(throws: AccountError.lastSignInMethod) { try user.unlink(provider: "apple", byAdmin: false) }
        #expect(throws: AccountError.noSuchProvider("google")) { try user.unlink(provider: "google", byAdmin: false) }
        #expect(try user.unlink(provider: "apple", byAdmin: true).map(\.type) == ["IdentityUnlinked"])
        // An anonymous user's id is its last way in for the user, and kept from an admin: unlinked, the user would
        // stop being anonymous, and never be swept.
        let anonymous = account(UserAccount.register(
            id: id, identity: ExternalIdentity(provider: ExternalIdentity.anonymousProvider, uid: "client-id"), session: nil, now: now), id: id)
        #expect(throws: AccountError.lastSignInMethod) { try anonymous.unlink(provider: "anonymous", byAdmin: false) }
        #expect(throws: AccountError.anonymousIdentityKept) { try anonymous.unlink(provider: "anonymous", byAdmin: true) }
    }

    /// Several decisions as one command: each step decides on the state after the ones before it, and one
    /// refusal refuses them all.
    @Test func stepsDecideOneAfterTheOtherAndOneRefusalRefusesThemAll() throws {
        let id = UUID()
        let user = account(UserAccount.register(id: id, identity: apple, session: nil, now: now), id: id)
        let facebook = facebook
        // Apple alone could not be unlinked; after Facebook's link in the same command it can.
        let events = try user.deciding([{ try $0.link(facebook) }, { try $0.unlink(provider: "apple", byAdmin: false) }], at: now)
        #expect(events.map(\.type) == ["IdentityLinked", "IdentityUnlinked"])
        #expect(account(UserAccount.register(id: id, identity: apple, session: nil, now: now) + events, id: id).signInMethods == ["facebook"])
        #expect(throws: AccountError.lastSignInMethod) {
            try user.deciding([{ try $0.link(facebook) }, { try $0.unlink(provider: "apple", byAdmin: false) }, { try $0.unlink(provider: "facebook", byAdmin: false) }], at: now)
        }
    }

    @Test func aTrustedTakeoverDropsUnverifiedCredentialsAndRevokesSessions() throws {
        let id = UUID()
        let password = ExternalIdentity(provider: "password", uid: "a@icloud.com", email: "a@icloud.com", isEmailVerified: false)
        var history = UserAccount.register(id: id, identity: password, passwordHash: "scrypt$…", session: session("p0"), now: now)
        var user = account(history, id: id)
        let trusted = ExternalIdentity(provider: "apple", uid: "001.x", email: "a@icloud.com", isEmailVerified: true)
        #expect(trusted.isTrustedForEmail)
        let takeover = try user.takeOver(with: trusted, session: session("t0"), now: now)
        history += takeover
        user = account(history, id: id)
        #expect(user.signInMethods == ["apple"])
        #expect(user.passwordHash == nil)
        #expect(user.isEmailVerified)
        #expect(user.activeSessions.count == 1)
        #expect(user.validSince == now)
        let passwordSession = try #require(history.compactMap { event -> UUID? in
            if case .sessionStarted(let started) = event, started.refreshTokenHash == "p0" { return started.sessionId }
            return nil
        }.first)
        #expect(takeover.contains { event in
            if case .sessionEnded(let ended) = event { return ended.sessionId == passwordSession && ended.reason == "takeover" }
            return false
        })
        #expect(user.sessions[passwordSession] == nil, "the ended session left the state")
    }

    /// A squatter signs up with the owner's unproved address and links their own Google account, whose
    /// provider proved another address: when the owner comes with a provider that proves this one, the
    /// squatter's Google account goes too, as a reset would drop it.
    @Test func aTakeoverDropsIdentitiesWhoseProviderProvedAnotherAddress() throws {
        let id = UUID()
        let password = ExternalIdentity(provider: "password", uid: "v@icloud.com", email: "v@icloud.com", isEmailVerified: false)
        var history = UserAccount.register(id: id, identity: password, passwordHash: "scrypt$…", session: session("p0"), now: now)
        let squatters = ExternalIdentity(provider: "google", uid: "g-squatter", email: "squatter@gmail.com", isEmailVerified: true)
        history += try account(history, id: id).link(squatters)
        let apple = ExternalIdentity(provider: "apple", uid: "001.owner", email: "V@icloud.com", isEmailVerified: true)
        #expect(apple.isTrustedForEmail)
        let takeover = try account(history, id: id).takeOver(with: apple, session: session("t0"), now: now)
        let unlinked = takeover.compactMap { event -> String? in
            if case .identityUnlinked(let payload) = event, payload.reason == "takeover" { return payload.provider }
            return nil
        }
        #expect(unlinked == ["google", "password"])
        #expect(account(history + takeover, id: id).signInMethods == ["apple"])

        // The owner's own Google account proves a gmail address the squatter signed up with: the squatter's Google
        // identity goes and makes room for it, rather than the sign-in being refused as a second Google account.
        let gmail = ExternalIdentity(provider: "password", uid: "v@gmail.com", email: "v@gmail.com", isEmailVerified: false)
        var squatted = UserAccount.register(id: id, identity: gmail, passwordHash: "scrypt$…", session: nil, now: now)
        squatted += try account(squatted, id: id).link(squatters)
        let owners = ExternalIdentity(provider: "google", uid: "g-owner", email: "v@gmail.com", isEmailVerified: true)
        let regained = try account(squatted, id: id).takeOver(with: owners, session: session("t1"), now: now)
        let after = account(squatted + regained, id: id)
        #expect(after.signInMethods == ["google"])
        #expect(after.identities["google"]?.uid == "g-owner")
        // A Google account that proved this very address stays, and a second one is refused.
        let proving = ExternalIdentity(provider: "google", uid: "g-first", email: "v@gmail.com", isEmailVerified: true)
        let proved = UserAccount.register(id: id, identity: gmail, passwordHash: "scrypt$…", session: nil, now: now)
            + (try account(UserAccount.register(id: id, identity: gmail, passwordHash: "scrypt$…", session: nil, now: now), id: id).link(proving))
        #expect(throws: AccountError.providerAlreadyLinked) { try account(proved, id: id).takeOver(with: owners, session: session("t2"), now: now) }
    }

    /// A Firebase user made with a developer's uid keeps it through a takeover and a reset: the uid is how the
    /// developer's backend names them (their `localId`), no way in a squatter chose.
    @Test func aDevelopersUidSurvivesATakeoverAndAReset() throws {
        let id = UUID()
        let history = try UserAccount.create(id: id, profile: NewUserProfile(
            email: "u1@icloud.com", customUID: "u1", passwordHash: "scrypt$…"))
        let user = account(history, id: id)
        #expect(user.signInMethods == ["custom", "password"])
        let apple = ExternalIdentity(provider: "apple", uid: "001.u1", email: "u1@icloud.com", isEmailVerified: true)
        let takeover = try user.takeOver(with: apple, session: session("t0"), now: now)
        #expect(account(history + takeover, id: id).signInMethods == ["apple", "custom"])
        let codeId = UUID()
        let asked = history + (try user.issueEmailCode(
            .passwordReset, codeId: codeId, codeHash: "h", email: "u1@icloud.com", expiresAt: now.addingTimeInterval(600)))
        let code = try #require(account(asked, id: id).checkEmailCode("h", for: [.passwordReset], presentedFor: .passwordReset, now: now).code)
        let reset = try account(asked, id: id).resetPassword(with: code, passwordHash: "scrypt$new", now: now)
        #expect(account(asked + reset, id: id).signInMethods == ["custom", "password"])
        // Nor can anyone remove it, a user or an admin: the backend would lose the user's name.
        #expect(throws: AccountError.customIdentityKept) { try user.unlink(provider: "custom", byAdmin: false) }
        #expect(throws: AccountError.customIdentityKept) { try user.unlink(provider: "custom", byAdmin: true) }
        #expect(try user.unlink(provider: "password", byAdmin: false).map(\.type) == ["IdentityUnlinked"])
    }

    /// A user made with identities (an import) holds one of each provider, as linking keeps it: a second of a
    /// provider is refused before anything is written.
    @Test func aUserIsMadeWithOneIdentityOfEachProvider() throws {
        var profile = NewUserProfile(email: "imp@example.com", customUID: "imp")
        profile.identities = [
            ExternalIdentity(provider: "google", uid: "g1", email: nil, isEmailVerified: false),
            ExternalIdentity(provider: "apple", uid: "a1", email: nil, isEmailVerified: false),
        ]
        let made = try UserAccount.create(id: UUID(), profile: profile)
        #expect(made.filter { if case .identityLinked = $0 { true } else { false } }.count == 3)
        profile.identities.append(ExternalIdentity(provider: "google", uid: "g2", email: nil, isEmailVerified: false))
        #expect(throws: AccountError.self) { try UserAccount.create(id: UUID(), profile: profile) }
        profile.identities = [ExternalIdentity(provider: "custom", uid: "other", email: nil, isEmailVerified: false)]
        #expect(throws: AccountError.self) { try UserAccount.create(id: UUID(), profile: profile) }
    }

    /// One session ends from another live one of the user's, or by an admin; the end says which. A session that is
    /// not the user's live one is `sessionNotFound`, and an erased user has nothing an admin can end.
    @Test func oneSessionEndsFromALiveSessionOrByAnAdmin() throws {
        let id = UUID()
        let (phone, laptop) = (session("phone"), session("laptop"))
        let registered = UserAccount.register(id: id, identity: apple, session: phone, now: now)
        let user = account(registered + (try account(registered, id: id).signIn(with: apple, session: laptop, now: now)), id: id)
        let ends = { (events: [AccountEvent]) in
            events.compactMap { event -> String? in if case .sessionEnded(let ended) = event { "\(ended.sessionId) \(ended.reason)" } else { nil } }
        }
        #expect(ends(try user.endSession(laptop.id, by: .session(phone.id))) == ["\(laptop.id) sign_out"])
        #expect(ends(try user.endSession(laptop.id, by: .admin)) == ["\(laptop.id) ended_by_admin"])
        #expect(throws: AccountError.invalidToken) { try user.endSession(laptop.id, by: .session(UUID())) }
        #expect(throws: AccountError.sessionNotFound) { try user.endSession(UUID(), by: .admin) }
        let ended = account(registered + (try user.endSession(phone.id, by: .admin)), id: id)
        #expect(throws: AccountError.sessionNotFound) { try ended.endSession(phone.id, by: .admin) }
        let erased = account(registered + (try account(registered, id: id).erase(reason: nil)), id: id)
        #expect(throws: AccountError.notFound) { try erased.endSession(phone.id, by: .admin) }
    }

    /// A reissue continues the caller's sign-in: a session that would start the recent-sign-in window again (no sign-in
    /// time of its own, or a later one) is refused, whichever route asks.
    @Test func aReissueNeverSignsInLaterThanItsCaller() throws {
        let id = UUID()
        let caller = session("caller")
        let user = account(UserAccount.register(id: id, identity: apple, session: caller, now: now), id: id)
        var next = session("next")
        #expect(throws: AccountError.invalidToken) { try user.reissue(next, provider: "apple", continuing: caller.id, now: now) }
        next.authTime = now.addingTimeInterval(1)
        #expect(throws: AccountError.invalidToken) { try user.reissue(next, provider: "apple", continuing: caller.id, now: now) }
        next.authTime = now
        #expect(try user.reissue(next, provider: "apple", continuing: caller.id, now: now.addingTimeInterval(60)).contains { $0.type == "SessionStarted" })
        #expect(throws: AccountError.invalidToken) { try user.reissue(next, provider: "apple", continuing: UUID(), now: now) }
    }

    @Test func refreshRotatesAndAnOldTokenIsReuse() throws {
        let id = UUID()
        let first = session("h0")
        var history = UserAccount.register(id: id, identity: apple, session: first, now: now)
        let rotation = try account(history, id: id).refresh(session: first.id, presentedHash: "h0", newHash: "h1", presentedJKT: nil)
        history += rotation
        let user = account(history, id: id)
        #expect(user.sessions[first.id]?.refreshTokenHash == "h1")
        #expect(throws: AccountError.refreshTokenReused) {
            try user.refresh(session: first.id, presentedHash: "h0", newHash: "h2", presentedJKT: nil)
        }
        #expect(user.endAfterReuse(session: first.id).map(\.type) == ["SessionEnded"])
    }

    @Test func aBoundSessionRefreshesOnlyWithItsKey() throws {
        let id = UUID()
        let bound = session("h0", jkt: "thumb-A")
        let user = account(UserAccount.register(id: id, identity: apple, session: bound, now: now), id: id)
        #expect(throws: AccountError.invalidDPoPProof) {
            try user.refresh(session: bound.id, presentedHash: "h0", newHash: "h1", presentedJKT: nil)
        }
        #expect(throws: AccountError.invalidDPoPProof) {
            try user.refresh(session: bound.id, presentedHash: "h0", newHash: "h1", presentedJKT: "thumb-B")
        }
        #expect(try user.refresh(session: bound.id, presentedHash: "h0", newHash: "h1", presentedJKT: "thumb-A").count == 1)
    }

    @Test func aDisabledUserCannotSignInOrRefresh() throws {
        let id = UUID()
        let first = session()
        var history = UserAccount.register(id: id, identity: apple, session: first, now: now)
        history += try account(history, id: id).setDisabled(true, reason: "abuse", now: now)
        let user = account(history, id: id)
        #expect(throws: AccountError.userDisabled) { try user.signIn(with: apple, session: session(), now: now) }
        #expect(throws: AccountError.invalidToken) {
            try user.refresh(session: first.id, presentedHash: "h0", newHash: "h1", presentedJKT: nil)
        }
    }

    @Test func eventsSurviveTheirStoredForm() throws {
        let id = UUID()
        let command = UUID()
        let events = UserAccount.register(id: id, identity: apple, session: session(), now: now)
        for (index, event) in events.enumerated() {
            let stored = try AccountEventCodec.encode(event, userId: id, id: AccountEventCodec.eventID(command: command, index: index))
            let recorded = RecordedEvent(
                position: 1, transactionId: 1, stream: .user(id), version: index + 1, id: stored.id, type: stored.type,
                schema: stored.schema, data: stored.data, metadata: EventMetadata(), userId: id, occurredAt: now)
            #expect(try AccountEventCodec.decode(AccountEventCodec.upcasters.apply(to: recorded)) == event)
        }
        let ids = (0..<50).map { AccountEventCodec.eventID(command: command, index: $0) }
        #expect(Set(ids).count == 50)
        #expect(AccountEventCodec.eventID(command: command, index: 3) == AccountEventCodec.eventID(command: command, index: 3))
    }

    @Test func aSessionStartedBeforeSecretsHadKindsReadsAsAV1Session() throws {
        let sessionId = UUID()
        // A schema 1 payload, as stored before sessions recorded the kind of their secret.
        let old = Data(#"{"amr":["apple"],"authTime":"2026-11-01T10:00:00.000Z","refreshTokenHash":"ab","sessionId":"\#(sessionId.uuidString)"}"#.utf8)
        let recorded = RecordedEvent(
            position: 1, transactionId: 1, stream: .user(UUID()), version: 2, id: UUID(), type: "SessionStarted",
            schema: 1, data: old, metadata: EventMetadata(), userId: nil, occurredAt: now)
        let upcast = try AccountEventCodec.upcasters.apply(to: recorded)
        #expect(upcast.schema == 2)
        guard case .sessionStarted(let payload)? = try AccountEventCodec.decode(upcast) else {
            Issue.record("not a SessionStarted: \(String(decoding: upcast.data, as: UTF8.self))")
            return
        }
        #expect(payload.sessionId == sessionId)
        #expect(payload.secretKind == .accessAndRefreshTokens)
        // Without the upcaster, the old payload does not decode: the chain is what keeps old logs readable.
        #expect(throws: (any Error).self) { try AccountEventCodec.decode(recorded) }
    }

    @Test func aNewSessionRecordsItsKindOfSecretAtSchemaTwo() throws {
        let session = NewSession(id: UUID(), refreshTokenHash: "h", amr: ["pwd"], secretKind: .parseSessionToken)
        let events = UserAccount.register(id: UUID(), identity: apple, session: session, now: now)
        let stored = try events.compactMap { event -> NewEvent? in
            guard case .sessionStarted = event else { return nil }
            return try AccountEventCodec.encode(event, userId: UUID(), id: UUID())
        }
        #expect(stored.map(\.schema) == [2])
        #expect(String(decoding: stored[0].data, as: UTF8.self).contains(#""secretKind":"parse_session_token""#))
    }

    @Test func facebookEmailsAreNeverTrustedAndGmailOnlyFromGoogle() {
        #expect(!facebook.isTrustedForEmail)
        #expect(ExternalIdentity(provider: "google", uid: "g", email: "x@Gmail.com ", isEmailVerified: true).isTrustedForEmail)
        #expect(!ExternalIdentity(provider: "google", uid: "g", email: "x@example.com", isEmailVerified: true).isTrustedForEmail)
        #expect(!ExternalIdentity(provider: "apple", uid: "a", email: "x@icloud.com", isEmailVerified: false).isTrustedForEmail)
    }
}
