import Foundation
import Testing
@testable import TetherAPI
import TetherCore

/// The kept states are bounded in memory, not only in number: a user may hold a hundred live sessions.
@Suite("Users' states kept between commands: bounds")
struct AccountStateCacheBoundsTests {
    private static let now = Date(timeIntervalSince1970: 1_795_958_985)

    /// A user with `sessions` live sessions, built event by event as commands build it, with the sizes of real
    /// values (Apple's uid and relay address, refresh tokens' hashes).
    static func account(sessions: Int) throws -> UserAccount {
        let id = UUID()
        let apple = ExternalIdentity(
            provider: "apple", uid: "001234.\(id.uuidString.lowercased().filter { $0 != "-" }).0123",
            email: "\(id.uuidString.prefix(10).lowercased())@privaterelay.appleid.com", isEmailVerified: true)
        var user = UserAccount(id: id)
        var version = 0
        func apply(_ events: [AccountEvent]) {
            version += events.count
            user = user.appending(events.map { ($0, Self.now) }, version: version)
        }
        apply(UserAccount.register(id: id, identity: apple, session: nil, now: Self.now))
        for _ in 0..<sessions {
            apply(try user.signIn(with: apple, session: NewSession(id: UUID(), refreshTokenHash: RefreshTokens.hash(UUID().uuidString), amr: ["apple"]), now: Self.now))
        }
        return user
    }

    @Test func heavyStatesAreEvictedByTheirSizeAndTheNewestStays() throws {
        let budget = 100_000
        let cache = AccountStateCache(capacity: 1_000, byteBudget: budget, shards: 1)
        let heavy = try Self.account(sessions: 50)
        #expect(heavy.sessions.count == 50)
        #expect(AccountStateCache.estimatedSize(of: heavy) > 20_000)
        var stored: [UUID] = []
        for _ in 0..<20 {
            let user = try Self.account(sessions: 50)
            cache.store(.init(account: user, lastTransaction: 1))
            stored.append(user.id)
            #expect(cache.usage.bytes <= budget)
        }
        let usage = cache.usage
        #expect(usage.states >= 2 && usage.states < 20, "\(usage)")
        #expect(cache.entry(for: stored.last!) != nil, "the state just stored is kept")
        #expect(cache.entry(for: stored.first!) == nil, "the least recently used went first")
    }

    @Test func lightStatesAreBoundedByNumber() throws {
        let cache = AccountStateCache(capacity: 10, byteBudget: 1 << 30, shards: 1)
        for _ in 0..<25 { cache.store(.init(account: try Self.account(sessions: 1), lastTransaction: 1)) }
        #expect(cache.usage.states <= 10)
    }

    @Test func forgettingAStateReleasesItsShare() throws {
        let cache = AccountStateCache(capacity: 10, byteBudget: 1 << 30, shards: 1)
        let user = try Self.account(sessions: 3)
        cache.store(.init(account: user, lastTransaction: 1))
        #expect(cache.usage.bytes == AccountStateCache.estimatedSize(of: user))
        cache.forget(user.id)
        #expect(cache.usage.bytes == 0 && cache.usage.states == 0)
    }
}
