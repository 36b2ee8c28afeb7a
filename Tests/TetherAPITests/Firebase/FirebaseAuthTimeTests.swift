import Foundation
import Testing
@testable import TetherAPI
import TetherCore

/// `auth_time` of a Firebase session's first ID token: the sign-in time the session keeps, which every refresh
/// repeats. It was the moment the token was made, a second later than the session's whenever the sign-in's work
/// (a password's hash) crossed a second, so the claim moved on the first refresh.
@Suite("Firebase surface: auth_time of a new session")
struct FirebaseAuthTimeTests {
    @Test func theFirstTokenNamesTheSessionsSignInTime() {
        let id = UUID(), signedInAt = Date(timeIntervalSince1970: 1_796_596_517.9)
        let session = NewSession(id: UUID(), refreshTokenHash: "hash", amr: ["pwd"], jkt: nil)
        let identity = ExternalIdentity(provider: "password", uid: "ann@example.com", email: "ann@example.com", isEmailVerified: false)
        let events = UserAccount.register(id: id, identity: identity, passwordHash: "scrypt$…", session: session, now: signedInAt)
        let account = UserAccount(id: id, history: events.map { ($0, signedInAt) }, version: events.count)
        #expect(FirebaseRoutes.authTime(of: session, in: account) == signedInAt)
        var given = session
        given.authTime = signedInAt.addingTimeInterval(-600)
        #expect(FirebaseRoutes.authTime(of: given, in: account) == given.authTime, "a session that carries its own keeps it")
    }
}
