import Foundation
import Testing
import TetherCore

/// Sign-in routing, the email policy and whom a provider vouches for: pure rules, no database.
@Suite("Sign-in routing")
struct SignInRouteTests {
    private let now = Date(timeIntervalSince1970: 1_800_000_000)

    private func identity(_ provider: String, _ uid: String, email: String?, verified: Bool = true) -> ExternalIdentity {
        ExternalIdentity(provider: provider, uid: uid, email: email, isEmailVerified: verified)
    }

    /// A user registered with `identity`, as their stream would rebuild them.
    private func account(with identity: ExternalIdentity) -> UserAccount {
        let id = UUID()
        let session = NewSession(id: UUID(), refreshTokenHash: "h", amr: [identity.provider])
        let events = UserAccount.register(id: id, identity: identity, session: session, now: now)
        return UserAccount(id: id, history: events.map { ($0, now) }, version: events.count)
    }

    @Test func anIdentityLinkedToAUserSignsThatUserIn() throws {
        let apple = identity("apple", "001.a", email: "a@privaterelay.appleid.com")
        let owner = account(with: apple)
        let other = account(with: identity("password", "a@privaterelay.appleid.com", email: "a@privaterelay.appleid.com", verified: false))
        #expect(try SignInRoute.route(apple, owner: owner, emailOwner: other) == .returning(owner.id))
    }

    @Test func anUnknownIdentityWhoseAddressNoOneHoldsMakesANewUser() throws {
        #expect(try SignInRoute.route(identity("apple", "001.b", email: "b@icloud.com"), owner: nil, emailOwner: nil) == .register)
        #expect(try SignInRoute.route(identity("apple", "001.c", email: nil), owner: nil, emailOwner: nil) == .register)
    }

    /// A password sign-in makes no user: its account went (erased, or moved to another address) while the
    /// password was being checked, or its password changed meanwhile.
    @Test func aPasswordSignsInOnlyToTheAccountThatStillHasIt() throws {
        let password = identity("password", "p@example.com", email: "p@example.com", verified: false)
        #expect(throws: AccountError.invalidCredential) { try SignInRoute.route(password, owner: nil, emailOwner: nil) }
        let holder = account(with: password)
        #expect(throws: AccountError.invalidCredential) { try SignInRoute.route(password, owner: nil, emailOwner: holder) }

        let userId = UUID()
        let events = UserAccount.register(
            id: userId, identity: password, passwordHash: "hash-1", session: NewSession(id: UUID(), refreshTokenHash: "h", amr: ["password"]), now: now)
        let user = UserAccount(id: userId, history: events.map { ($0, now) }, version: events.count)
        var checked = password
        checked.verifiedPasswordHash = "hash-1"
        #expect(try !user.signIn(with: checked, session: NewSession(id: UUID(), refreshTokenHash: "h2", amr: ["password"]), now: now).isEmpty)
        checked.verifiedPasswordHash = "hash-0"
        #expect(throws: AccountError.invalidCredential) {
            try user.signIn(with: checked, session: NewSession(id: UUID(), refreshTokenHash: "h3", amr: ["password"]), now: self.now)
        }
    }

    @Test func aTrustedProviderTakesOverAnAccountWhoseEmailIsUnverified() throws {
        let unverified = account(with: identity("password", "c@gmail.com", email: "c@gmail.com", verified: false))
        let google = identity("google", "g-1", email: "C@Gmail.com")
        #expect(try SignInRoute.route(google, owner: nil, emailOwner: unverified) == .takeOver(unverified.id))
    }

    @Test func anAccountWithAVerifiedEmailIsNeverTakenOver() {
        let verified = account(with: identity("apple", "001.d", email: "d@gmail.com", verified: true))
        let google = identity("google", "g-2", email: "d@gmail.com")
        #expect(throws: AccountError.accountExistsWithDifferentCredential(email: "d@gmail.com", signInMethods: ["apple"], owner: verified.id)) {
            try SignInRoute.route(google, owner: nil, emailOwner: verified)
        }
    }

    /// An account whose last way in went (a provider's consent-revoked, an admin's unlink) is reached by a
    /// provider that proves its address, verified or not; by no other.
    @Test func anAccountWithNoWayInLeftIsTakenOverByAProviderThatProvesItsAddress() throws {
        let apple = identity("apple", "001.s", email: "s@privaterelay.appleid.com", verified: true)
        let registered = account(with: apple)
        let stranded = registered.appending(
            try registered.unlink(provider: "apple", byAdmin: true).map { ($0, now) }, version: registered.version + 1)
        #expect(stranded.signInMethods.isEmpty && stranded.isEmailVerified)
        #expect(try SignInRoute.route(apple, owner: nil, emailOwner: stranded) == .takeOver(stranded.id))
        let facebook = identity("facebook", "10002", email: "s@privaterelay.appleid.com", verified: true)
        #expect(throws: AccountError.self) { try SignInRoute.route(facebook, owner: nil, emailOwner: stranded) }
    }

    @Test func facebookNeverVouchesForAnEmailSoItCannotTakeOver() {
        let unverified = account(with: identity("password", "e@example.com", email: "e@example.com", verified: false))
        let facebook = identity("facebook", "10001", email: "e@example.com", verified: true)
        #expect(!facebook.isTrustedForEmail)
        #expect(throws: AccountError.accountExistsWithDifferentCredential(email: "e@example.com", signInMethods: ["password"], owner: unverified.id)) {
            try SignInRoute.route(facebook, owner: nil, emailOwner: unverified)
        }
    }

    @Test func aProviderVouchesOnlyForItsOwnDomains() {
        let unverified = account(with: identity("password", "f@example.com", email: "f@example.com", verified: false))
        // Google is trusted for Gmail, not for another domain.
        #expect(throws: AccountError.self) {
            try SignInRoute.route(identity("google", "g-3", email: "f@example.com"), owner: nil, emailOwner: unverified)
        }
    }

    @Test func onlyTheOneAccountPerEmailPolicyMakesAnAddressExclusive() {
        let apple = identity("apple", "001.g", email: " G@iCloud.com ")
        #expect(EmailPolicy.oneAccountPerEmail.exclusiveEmail(of: apple) == apple.normalizedEmail)
        #expect(EmailPolicy.allowDuplicateEmails.exclusiveEmail(of: apple) == nil)
        #expect(EmailPolicy.oneAccountPerEmail.exclusiveEmail(of: identity("apple", "001.h", email: nil)) == nil)
    }

    /// Addresses that need no trim skip Foundation's: the answer is still what trimming and lowercasing give.
    @Test func addressesAreTrimmedAndLowercasedAsFoundationTrimsThem() {
        for email in [
            // Nothing to trim: ASCII at both ends, anything between.
            "G@iCloud.com", "Zoë@Example.COM", "~a@b.c!", "A", "a b@c.d", "a\u{85}b@c.d", "x\u{A0}@y.z", "xİ@y.TR", "e\u{301}@x.fr",
            "a\u{2003}\n\tb",
            // Trimmed by Foundation, as before.
            " G@iCloud.com ", "\tA@B.c\n", "a@b.c\u{A0}", "\u{2003}a@b.c", "ÉLÉ@x.fr", "a@b.c \u{301}", "", " ", "İ@x.tr", "a\u{85}",
            "\u{7F}a@b.c\u{7F}",
        ] {
            #expect(ExternalIdentity.normalize(email) == email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased(), "\(email)")
        }
    }

    @Test func theLastSignInMethodStays() throws {
        let only = account(with: identity("apple", "001.i", email: nil))
        #expect(throws: AccountError.lastSignInMethod) { try only.unlink(provider: "apple", byAdmin: false) }
    }
}
