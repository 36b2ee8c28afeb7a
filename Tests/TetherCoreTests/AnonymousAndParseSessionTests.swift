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

    /// An anonymous user who was given an address gets a password from a reset, or from an admin: either way
    /// it stops being anonymous, and its anonymous identity goes in the same command, as a link drops it.
    @Test(arguments: [true, false])
    func aPasswordFromAResetOrAnAdminUpgradesAnAnonymousUser(verified: Bool) throws {
        let id = UUID()
        var history = UserAccount.register(id: id, identity: anonymous, session: nil, now: now)
        history += try account(history, id: id).changeEmail(to: "ada@example.com", verified: verified)
        let codeId = UUID()
        history += try account(history, id: id).issueEmailCode(
            .passwordReset, codeId: codeId, codeHash: "hash", email: "ada@example.com", expiresAt: now.addingTimeInterval(600))
        let user = account(history, id: id)
        let code = try #require(user.checkEmailCode("hash", for: [.passwordReset], presentedFor: .passwordReset, now: now).code)
        for events in [try user.resetPassword(with: code, passwordHash: "scrypt$…", now: now), try user.setPassword("scrypt$…", now: now)] {
            let upgraded = account(history + events, id: id)
            #expect(upgraded.signInMethods == ["password"], "\(events.map(\.type))")
            #expect(!upgraded.isAnonymous)
            // Once, as an upgrade, whether or not the address was proved before.
            let unlinks = events.compactMap { event -> String? in
                if case .identityUnlinked(let payload) = event { return payload.provider + ":" + payload.reason }
                return nil
            }
            #expect(unlinks == ["anonymous:upgraded"], "\(unlinks)")
        }
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
        // The old tokens are void too (validSince), so a backend that checks revocation refuses them.
        #expect(events.map(\.type) == ["PasswordSet", "SessionEnded", "SessionsRevoked", "SignedIn", "SessionStarted"])
        user = user.appending(events.map { ($0, now) }, version: user.version + events.count)
        #expect(user.validSince == now)
        #expect(user.activeSessions.map(\.id) == [replacement.id])
        #expect(user.passwordHash == "scrypt$2")
        let appleId = UUID()
        let apple = account(UserAccount.register(id: appleId, identity: self.apple, session: nil, now: now), id: appleId)
        #expect(throws: AccountError.self) { try apple.changePassword(passwordHash: "x", session: replacement, now: now) }
    }

    /// A password set with a session continues it: the session must still be live when the command decides (a
    /// revocation or a log-out while the password was hashed leaves nothing to continue), and the new session keeps
    /// its sign-in time (setting a password proves no more than the session did).
    @Test func aPasswordSetWithASessionNeedsItLiveAndKeepsItsSignInTime() throws {
        let id = UUID()
        let session = parseSession(installation: nil)
        let password = ExternalIdentity(provider: "password", uid: "ada@example.com", email: "ada@example.com")
        let signedIn = now.addingTimeInterval(-600)
        let user = UserAccount(
            id: id, history: UserAccount.register(id: id, identity: password, passwordHash: "scrypt$1", session: session, now: signedIn)
                .map { ($0, signedIn) }, version: 4)
        let replacement = parseSession(installation: nil)
        let events = try user.changePassword(passwordHash: "scrypt$2", session: replacement, continuing: session.id, now: now)
        let changed = user.appending(events.map { ($0, now) }, version: user.version + events.count)
        #expect(changed.sessions[replacement.id]?.authTime == signedIn, "the sign-in time of the session it continues")
        #expect(throws: AccountError.invalidToken, "the session it continued has ended") {
            try changed.changePassword(passwordHash: "scrypt$3", session: parseSession(installation: nil), continuing: session.id, now: now)
        }
        #expect(throws: AccountError.invalidToken) {
            try changed.restartingSessions(with: parseSession(installation: nil), continuing: UUID(), now: now)
        }
        // Without a session to continue (an admin's), the new one starts now.
        let reset = try changed.changePassword(passwordHash: "scrypt$3", session: parseSession(installation: nil), now: now)
        #expect(reset.contains { if case .sessionStarted(let started) = $0 { started.authTime == now } else { false } })
    }

    @Test func aSessionPastTheLimitEndsTheOldestAndAnInstallationsOwnEndFirst() throws {
        let id = UUID()
        var user = account(UserAccount.register(id: id, identity: anonymous, session: nil, now: now), id: id)
        func apply(_ events: [AccountEvent], at date: Date) {
            user = user.appending(events.map { ($0, date) }, version: user.version + events.count)
        }
        func start(_ sessionId: UUID, installation: String? = nil, at date: Date) throws {
            var session = parseSession(installation: installation)
            session.id = sessionId
            apply(try user.signIn(with: anonymous, session: session, now: date), at: date)
        }
        // Two sessions in one second, …002 before …001 in the log; then sessions …200 down to …100, each
        // a second older than the one before it in the log (…160 for installation `i-1`, …140 for `i-2`), three
        // of them signed out before the last three: 100 live.
        let tied = ["00000000-0000-4000-8000-000000000002", "00000000-0000-4000-8000-000000000001"].map { UUID(uuidString: $0)! }
        let ids = (0...100).map { UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", 200 - $0))! }
        for session in tied { try start(session, at: now) }
        for (index, session) in ids.enumerated() {
            if index == 98 { for ended in ids[0...2] { apply(try user.signOut(session: ended), at: now) } }
            try start(session, installation: [40: "i-1", 60: "i-2"][index], at: now.addingTimeInterval(Double(1000 - index)))
        }
        let live = user.activeSessions.map(\.id)
        #expect(live.count == UserAccount.maxLiveSessions)
        #expect(live.prefix(2) == [tied[1], tied[0]], "a tie in time goes by id")
        #expect(Array(live.dropFirst(2).prefix(3)) == [ids[100], ids[99], ids[98]], "oldest first")
        #expect(live.last == ids[3])

        func endedBySignIn(installation: String?) throws -> [String] {
            try user.signIn(with: anonymous, session: parseSession(installation: installation), now: now).compactMap {
                if case .sessionEnded(let ended) = $0 { "\(ended.sessionId.uuidString.suffix(3)) \(ended.reason)" } else { nil }
            }
        }
        #expect(try endedBySignIn(installation: nil) == ["001 session_limit"])
        #expect(try endedBySignIn(installation: "i-3") == ["001 session_limit"])
        #expect(try endedBySignIn(installation: "i-1") == ["160 replaced"], "the installation's own, which makes room")
        #expect(try endedBySignIn(installation: "i-2") == ["140 replaced"])

        // A state past the limit (a lower limit, or sessions from before it): the sign-in ends as many as it must.
        for _ in 0..<2 {
            let elsewhere = UserAccount.register(id: UUID(), identity: anonymous, session: parseSession(installation: nil), now: now)
            apply(elsewhere.filter { if case .sessionStarted = $0 { true } else { false } }, at: now.addingTimeInterval(2000))
        }
        #expect(user.activeSessions.count == UserAccount.maxLiveSessions + 2)
        #expect(try endedBySignIn(installation: nil) == ["001 session_limit", "002 session_limit", "100 session_limit"])
    }
}
