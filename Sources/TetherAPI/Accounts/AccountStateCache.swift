import Foundation
import Synchronization
import TetherCore

/// Users' states as of a stream version, kept between commands, so that a command reads and
/// decodes only the events appended since (decoding a whole stream was most of a sign-in's CPU).
///
/// Only ever a starting point: a command still reads, under the user's lock, every event after
/// the cached version and the stream's current version, and a cached state that does not lead
/// exactly to that version is dropped and the stream read whole. So states written by another
/// instance, or a database put back to an earlier point, are never hidden by the cache.
/// Bounded: the least recently used states go first.
final class AccountStateCache: Sendable {
    /// A state and what its last event was written by.
    struct Entry: Sendable {
        var account: UserAccount
        /// The transaction id of the stream's last event (the append-order check needs it).
        var lastTransaction: UInt64
    }

    private struct Slot {
        var entry: Entry
        var lastUse: UInt64
    }

    private struct State {
        var slots: [UUID: Slot] = [:]
        /// Which user a hint (an identity, a refresh token's hash) named when last seen; checked by the read.
        var owners: [String: UUID] = [:]
        var clock: UInt64 = 0
    }

    /// The most states kept.
    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
    }

    /// The state kept for `userId`, if any.
    func entry(for userId: UUID) -> Entry? {
        state.withLock { state in
            state.clock += 1
            state.slots[userId]?.lastUse = state.clock
            return state.slots[userId]?.entry
        }
    }

    /// The state kept for the user `hint` last named, if any.
    func entry(forHint hint: String) -> Entry? {
        let owner = state.withLock { $0.owners[hint] }
        return owner.flatMap(entry(for:))
    }

    /// Keeps `entry` (a committed state), unless a later one is kept already; `hints` name its user from now on.
    func store(_ entry: Entry, hints: [String] = []) {
        state.withLock { state in
            state.clock += 1
            let id = entry.account.id
            if let kept = state.slots[id], kept.entry.account.version > entry.account.version { return }
            state.slots[id] = Slot(entry: entry, lastUse: state.clock)
            for hint in hints { state.owners[hint] = id }
            if state.slots.count > capacity { Self.evict(&state, keeping: capacity * 9 / 10) }
        }
    }

    /// Forgets the state of `userId` (it did not match the log).
    func forget(_ userId: UUID) {
        _ = state.withLock { $0.slots.removeValue(forKey: userId) }
    }

    /// How many states are kept.
    var count: Int { state.withLock { $0.slots.count } }

    private static func evict(_ state: inout State, keeping count: Int) {
        let kept = Set(state.slots.sorted { $0.value.lastUse > $1.value.lastUse }.prefix(count).map(\.key))
        state.slots = state.slots.filter { kept.contains($0.key) }
        state.owners = state.owners.filter { kept.contains($0.value) }
        // Hints of rotated refresh tokens are never asked for again: keep a bounded number of them.
        if state.owners.count > 4 * count { state.owners = [:] }
    }

    /// The hint of an identity.
    static func hint(provider: String, uid: String) -> String { "identity\u{0}" + provider + "\u{0}" + uid }

    /// The hint of a refresh token (by its hash).
    static func hint(refreshTokenHash: String) -> String { "refresh\u{0}" + refreshTokenHash }
}
