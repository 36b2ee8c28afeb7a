import Foundation
import Testing
import TetherCore

/// The domain rules the anonymous users and Parse sessions brought (pure, no database).
@Suite("Anonymous users and non-rotating sessions (pure)")
struct AnonymousAndParseSessionTests {
    let now = Date(timeIntervalSince1970: 1_795_958_985)
    let anonymous = ExternalIdentity(provider: "anonymous", uid: "1f0e7a34-6c0e-4a0e-9d43-3f7c8a5b1e22")
    let apple = ExternalIdentity(provider: "apple", uid: "001.apple", email: "a@icloud.com", isEmailVerified: true)

    private func account(_ events: [AccountEvent], id: UUID) -> UserAccount {
        UserAccount(id: id, history: events.map { ($0, now) }, version: events.count)
    }

    private func parseSession(installation: String?) -> NewSession {
        NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: ["anonymous"], secretKind: .parseSessionToken,
                   installationId: installation, expiresAt: now.addingTimeInterval(365 * 86400))
    }

    @Test func linkingARealIdentityDropsTheAnonymousOneInTheSameCommand() throws {
        let id = UUID()
        let user = account(UserAccount.register(id: id, identity: anonymous, session: nil, now: now), id: id)
        #expect(user.isAnonymous)
        let events = try user.link(apple)
        #expect(events.map(\.type) == ["IdentityLinked", "IdentityUnlinked"])
        guard case .identityUnlinked(let unlinked) = events[1] else { Issue.record("no unlink"); return }
        #expect(unlinked.provider == "anonymous" && unlinked.reason == "upgraded")
        let upgraded = user.appending(events.map { ($0, now) }, version: user.version + events.count)
        #expect(!upgraded.isAnonymous)
        #expect(upgraded.signInMethods == ["apple"])
        #expect(throws: AccountError.self) { try upgraded.link(anonymous) }
        #expect(throws: AccountError.lastSignInMethod) { try user.unlink(provider: "anonymous", byAdmin: false) }
    }

    @Test func aPasswordIsLinkedWithItsHashAndOnlyThen() throws {
        let id = UUID()
        let user = account(UserAccount.register(id: id, identity: anonymous, session: nil, now: now), id: id)
        let password = ExternalIdentity(provider: "password", uid: "ada@example.com", email: "ada@example.com")
        #expect(throws: AccountError.self) { try user.link(password) }
        #expect(throws: AccountError.self) { try user.link(apple, passwordHash: "scrypt$x") }
        #expect(try user.link(password, passwordHash: "scrypt$x").map(\.type) == ["IdentityLinked", "PasswordSet", "IdentityUnlinked"])
    }

    @Test func aNewSessionOfAnInstallationEndsTheEarlierOnesOfIt() throws {
        let id = UUID()
        let first = parseSession(installation: "install-1")
        var user = account(UserAccount.register(id: id, identity: anonymous, session: first, now: now), id: id)
        let other = parseSession(installation: "install-2")
        user = user.appending(try user.signIn(with: anonymous, session: other, now: now).map { ($0, now) }, version: user.version + 2)
        let again = parseSession(installation: "install-1")
        let events = try user.signIn(with: anonymous, session: again, now: now)
        #expect(events.map(\.type) == ["SessionEnded", "SignedIn", "SessionStarted"])
        user = user.appending(events.map { ($0, now) }, version: user.version + events.count)
        #expect(Set(user.activeSessions.map(\.id)) == [other.id, again.id])
        #expect(user.sessions[again.id]?.installationId == "install-1")
        #expect(user.sessions[again.id]?.expiresAt == again.expiresAt)
    }

    @Test func aParseSessionIsNeverRefreshedAndAPasswordChangeEndsEverySession() throws {
        let id = UUID()
        let session = parseSession(installation: nil)
        let password = ExternalIdentity(provider: "password", uid: "ada@example.com", email: "ada@example.com")
        var user = account(UserAccount.register(id: id, identity: password, passwordHash: "scrypt$1", session: session, now: now), id: id)
        #expect(throws: AccountError.invalidToken) {
            try user.refresh(session: session.id, presentedHash: session.refreshTokenHash, newHash: "next", presentedJKT: nil)
        }
        let replacement = parseSession(installation: nil)
        let events = try user.changePassword(passwordHash: "scrypt$2", session: replacement, now: now)
        #expect(events.map(\.type) == ["PasswordSet", "SessionEnded", "SignedIn", "SessionStarted"])
        user = user.appending(events.map { ($0, now) }, version: user.version + events.count)
        #expect(user.activeSessions.map(\.id) == [replacement.id])
        #expect(user.passwordHash == "scrypt$2")
        let appleId = UUID()
        let apple = account(UserAccount.register(id: appleId, identity: self.apple, session: nil, now: now), id: appleId)
        #expect(throws: AccountError.self) { try apple.changePassword(passwordHash: "x", session: replacement, now: now) }
    }
}
