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

    /// Hints are bounded by turning generations: a hint asked for between two turns stays, however many
    /// refresh tokens' hints come and go; one never asked for again is gone after two turns.
    @Test func hintsInUseOutliveTheRotatedOnesAroundThem() throws {
        let cache = AccountStateCache(capacity: 16, shards: 1)  // a generation turns past 32 hints
        let user = try Self.account(sessions: 1)
        let identity = AccountStateCache.hint(provider: "apple", uid: "001.kept")
        let firstToken = AccountStateCache.hint(refreshTokenHash: "token-0")
        cache.store(.init(account: user, lastTransaction: 1), hints: [identity, firstToken])
        for rotation in 1...500 {
            // A refresh rotates the token: its new hint is stored, the old one never asked for again.
            cache.store(.init(account: user, lastTransaction: 1), hints: [AccountStateCache.hint(refreshTokenHash: "token-\(rotation)")])
            if rotation.isMultiple(of: 25) {
                #expect(cache.entry(forHint: identity)?.account.id == user.id, "the identity's hint, asked for every 25 rotations, after \(rotation)")
            }
            #expect(cache.hintCount <= 4 * 16 + 1)
        }
        #expect(cache.entry(forHint: firstToken) == nil, "a rotated token's hint is gone")
        #expect(cache.entry(forHint: AccountStateCache.hint(refreshTokenHash: "token-500"))?.account.id == user.id)
    }
}
