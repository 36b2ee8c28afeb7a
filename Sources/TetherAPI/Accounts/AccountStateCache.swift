import Foundation
import Synchronization
import TetherCore
import TetherPostgres

/// Users' states as of a stream version, kept between commands, so that a command reads and
/// decodes only the events appended since (decoding a whole stream was most of a sign-in's CPU).
///
/// Only ever a starting point: a command still reads, under the user's lock, every event after
/// the cached version and the stream's current version, and a cached state that does not lead
/// exactly to that version is dropped and the stream read whole. So states written by another
/// instance, and a database put back to an earlier point, are not hidden by the cache. A log put back
/// and then written again, by another instance, up to or past a kept state's version is seen by the
/// transaction id of the event at the kept version: whether or not a hint led the command, the state's
/// last event must be the log's, by the same transaction (a transaction id the server hands out again
/// after a restore or a failover that lost transactions is the one case this cannot tell).
/// Bounded in number and in size (a user may hold up to a hundred live sessions): the least recently
/// used states go first.
public final class AccountStateCache: Sendable {
    /// A state and what its last event was written by.
    struct Entry: Sendable {
        var account: UserAccount
        /// The transaction id of the stream's last event (the append-order check needs it).
        var lastTransaction: UInt64
        /// The user's data key as stored and as opened, when the command that kept the state had it: a
        /// later command whose read finds the same stored key uses it without unwrapping it again. (The
        /// state holds the user's personal data opened already; a key stored anew, re-wrapped or destroyed
        /// is read as it is.)
        var key: KeptKey? = nil
    }

    /// A user's data key as `personal_data_keys` stores it, and opened.
    struct KeptKey: Sendable {
        var stored: [UInt8]
        var opened: [UInt8]

        /// The key `stored` opens: `kept`'s when it was opened from the same stored bytes, else unwrapped now.
        static func opening(_ stored: [UInt8]?, of userId: UUID, kept: KeptKey?, masterKeys: MasterKeyRing?) throws -> KeptKey? {
            guard let stored else { return nil }
            if let kept, kept.stored == stored { return kept }
            return KeptKey(stored: stored, opened: try PersonalDataVault.opened(stored, of: userId, masterKeys: masterKeys)!)
        }
    }

    private struct Slot: Sendable {
        var entry: Entry
        var lastUse: UInt64
        var bytes: Int
    }

    private struct State: Sendable {
        var slots: [UUID: Slot] = [:]
        /// The estimated size of the states kept.
        var bytes = 0
        /// Which user a hint (an identity, a refresh token's hash) named when last seen; checked by the read.
        /// Two generations: a hint set or found since the last turn is in `owners`, one from the turn before
        /// in `earlierOwners`, and the older ones are gone (see ``name(_:by:in:capacity:)``).
        var owners: [Hint: UUID] = [:]
        var earlierOwners: [Hint: UUID] = [:]
        var clock: UInt64 = 0
    }

    /// The most states kept.
    let capacity: Int
    /// About the most memory the states take (estimated by ``estimatedSize(of:)``).
    let byteBudget: Int
    /// Commands on different users rarely meet on one lock: states are spread over shards by user.
    private let shards: [Shard]
    /// Where commands' loads started their users' states, and the snapshots they wrote (`/metrics`).
    let loads = Loads()

    /// Counts of loads by where they started: a kept state, the user's snapshot (``AccountSnapshot``), or the
    /// log's first event; and of snapshots written, and passed over.
    final class Loads: Sendable {
        enum Origin: String, CaseIterable { case kept, snapshot, log }

        private let fromKept = Atomic<Int>(0), fromSnapshot = Atomic<Int>(0), fromLog = Atomic<Int>(0)
        let snapshotsWritten = Atomic<Int>(0)
        /// Snapshots read and not used: the log does not go on from them (written again since), or they did not open.
        let snapshotsPassedOver = Atomic<Int>(0)

        func count(_ origin: Origin) {
            switch origin {
            case .kept: fromKept.add(1, ordering: .relaxed)
            case .snapshot: fromSnapshot.add(1, ordering: .relaxed)
            case .log: fromLog.add(1, ordering: .relaxed)
            }
        }

        subscript(origin: Origin) -> Int {
            switch origin {
            case .kept: fromKept.load(ordering: .relaxed)
            case .snapshot: fromSnapshot.load(ordering: .relaxed)
            case .log: fromLog.load(ordering: .relaxed)
            }
        }
    }

    /// One lock's share of the states.
    private final class Shard: Sendable {
        let state = Mutex(State())

        func withLock<T>(_ body: (inout State) -> T) -> T {
            state.withLock { body(&$0) }
        }
    }

    /// The default byte budget: 256 MB (`TETHER_STATE_CACHE_MB`). A state is cheap to keep and dear to lose (a command
    /// on a user whose state went reads their snapshot and the events since, ``AccountSnapshot``; before snapshots, their
    /// whole stream), and users who sign in often hold up to 100 live sessions each (about 57 KB): `make bench`'s 2,256
    /// such users need about 128 MB. A budget below that (64 MB by the older, lower estimate, against their 101 MB by it)
    /// sent the least recently used on every other sign-in, and sign-ins fell from about 1,200 a second to 100.
    public static let defaultByteBudget = 256 << 20

    init(capacity: Int = 10_000, byteBudget: Int = defaultByteBudget, shards: Int = 16) {
        self.capacity = max(1, capacity)
        self.byteBudget = max(1, byteBudget)
        self.shards = (0..<max(1, shards)).map { _ in Shard() }
    }

    private func shard(_ key: some Hashable) -> Shard {
        shards[Int(UInt(bitPattern: key.hashValue) % UInt(shards.count))]
    }

    private var shardCapacity: Int { max(1, capacity / shards.count) }
    private var shardBudget: Int { max(1, byteBudget / shards.count) }

    /// About what a state takes in memory: malloc's bytes for users built as commands build them, measured
    /// by `StateSizeCalibrationTests` (within about 11% from no session to a hundred). Sessions (a refresh token's
    /// hash, methods, a dictionary slot) are most of a busy user's.
    static func estimatedSize(of account: UserAccount) -> Int {
        512 + 560 * account.sessions.count + 384 * account.identities.count
            + 256 * (account.mfa.challenges.count + account.mfa.factors.count + account.emailCodes.count)
            + 64 * account.mfa.recoveryCodes.count
    }

    /// The estimated size of the states kept, and how many there are.
    var usage: (states: Int, bytes: Int) {
        shards.reduce(into: (0, 0)) { total, shard in
            shard.withLock { state in
                total.0 += state.slots.count
                total.1 += state.bytes
            }
        }
    }

    /// The state kept for `userId`, if any.
    func entry(for userId: UUID) -> Entry? {
        shard(userId).withLock { state in
            state.clock += 1
            state.slots[userId]?.lastUse = state.clock
            return state.slots[userId]?.entry
        }
    }

    /// The state kept for the user `hint` last named, if any.
    func entry(forHint hint: Hint) -> Entry? {
        let owner = shard(hint).withLock { state -> UUID? in
            if let owner = state.owners[hint] { return owner }
            // Found in the earlier generation: it was used, so it moves to the current one.
            guard let owner = state.earlierOwners.removeValue(forKey: hint) else { return nil }
            Self.name(owner, by: hint, in: &state, capacity: shardCapacity)
            return owner
        }
        return owner.flatMap(entry(for:))
    }

    /// Records that `hint` names `owner`. Past `2 × capacity` hints in the current generation, it becomes the
    /// earlier one and the hints of the one before are dropped: hints of rotated refresh tokens, never asked for
    /// again, go after two turns, while an identity or a live token asked for in between stays. (Dropping every
    /// hint at the bound, as before, sent the next command of every user back to reading their whole stream.)
    private static func name(_ owner: UUID, by hint: Hint, in state: inout State, capacity: Int) {
        state.owners[hint] = owner
        if state.owners.count > 2 * capacity {
            state.earlierOwners = state.owners
            state.owners = [:]
        }
    }

    /// How many hints are kept, in both generations (for the tests of their bound).
    var hintCount: Int {
        shards.reduce(0) { total, shard in shard.withLock { total + $0.owners.count + $0.earlierOwners.count } }
    }

    /// Keeps `entry` (a committed state), unless a later one is kept already; `hints` name its user from now on.
    func store(_ entry: Entry, hints: [Hint] = []) {
        let id = entry.account.id
        let capacity = shardCapacity, budget = shardBudget
        let bytes = Self.estimatedSize(of: entry.account)
        // What it replaces is released after the lock, not under it.
        let replaced: [UUID: Slot]? = shard(id).withLock { state in
            state.clock += 1
            if let kept = state.slots[id], kept.entry.account.version > entry.account.version { return nil }
            let old = state.slots.updateValue(Slot(entry: entry, lastUse: state.clock, bytes: bytes), forKey: id)
            state.bytes += bytes - (old?.bytes ?? 0)
            if state.slots.count > capacity || state.bytes > budget {
                return Self.evict(&state, keeping: capacity * 9 / 10, bytes: budget * 9 / 10)
            }
            return old.map { [id: $0] }
        }
        _ = replaced
        for hint in hints {
            shard(hint).withLock { state in Self.name(id, by: hint, in: &state, capacity: capacity) }
        }
    }

    /// Forgets the state of `userId` (it did not match the log).
    func forget(_ userId: UUID) {
        _ = shard(userId).withLock { state in
            let removed = state.slots.removeValue(forKey: userId)
            state.bytes -= removed?.bytes ?? 0
            return removed
        }
    }

    /// Keeps the most recently used states of a shard, at most `count` of them and `bytes` in all (the newest
    /// always); answers the others, to be released after the lock.
    private static func evict(_ state: inout State, keeping count: Int, bytes: Int) -> [UUID: Slot] {
        var kept = Set<UUID>(), keptBytes = 0
        for (id, slot) in state.slots.sorted(by: { $0.value.lastUse > $1.value.lastUse }) {
            guard kept.count < max(1, count), kept.isEmpty || keptBytes + slot.bytes <= bytes else { break }
            kept.insert(id)
            keptBytes += slot.bytes
        }
        let evicted = state.slots.filter { !kept.contains($0.key) }
        state.slots = state.slots.filter { kept.contains($0.key) }
        state.bytes = keptBytes
        return evicted
    }

    /// What names a user in the cache: 128 bits of a keyed hash of an identity or a refresh token's hash.
    /// Fixed-size, so that the tens of thousands a busy instance keeps cost no allocation each (they were
    /// strings of ~70 bytes); two keys sharing a hint only cost a re-read, as any stale hint does.
    struct Hint: Hashable, Sendable {
        private let first: Int
        private let second: Int

        /// The parts are hashed as they are: no text is joined for it (hints are made on every sign-in and refresh).
        fileprivate init(_ parts: String...) {
            var first = Hasher(), second = Hasher()
            first.combine(0 as UInt8)
            second.combine(1 as UInt8)
            for part in parts {
                first.combine(part)
                second.combine(part)
            }
            self.first = first.finalize()
            self.second = second.finalize()
        }
    }

    /// The hint of an identity.
    static func hint(provider: String, uid: String) -> Hint { Hint("identity", provider, uid) }

    /// The hint of a refresh token (by its hash).
    static func hint(refreshTokenHash: String) -> Hint { Hint("refresh", refreshTokenHash) }
}
