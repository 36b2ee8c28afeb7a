import Foundation

/// Remembers DPoP proof identifiers so a captured proof cannot be replayed (RFC 9449 §11.1).
public protocol DPoPReplayStore: Sendable {
    /// Records `identifier` until `expiry`; returns false when it was already recorded and has not expired.
    func recordFirstUse(of identifier: String, until expiry: Date) async throws -> Bool
}

/// A ``DPoPReplayStore`` in process memory, for a single instance and for tests.
///
/// Entries are dropped once expired; past ``maximumEntryCount`` new proofs are
/// refused rather than forgetting live ones, which would reopen replay.
public actor InMemoryDPoPReplayStore: DPoPReplayStore {
    /// The most identifiers held at once.
    public let maximumEntryCount: Int
    private let clock: any WallClock
    private var expiries: [String: Date] = [:]
    private var nextPurge = Date.distantPast

    /// A store holding up to `maximumEntryCount` live identifiers.
    public init(maximumEntryCount: Int = 1_000_000, clock: any WallClock = SystemWallClock()) {
        self.maximumEntryCount = maximumEntryCount
        self.clock = clock
    }

    /// Records `identifier` unless a live entry exists.
    public func recordFirstUse(of identifier: String, until expiry: Date) throws -> Bool {
        let now = clock.now()
        if now >= nextPurge || expiries.count >= maximumEntryCount {
            expiries = expiries.filter { $0.value > now }
            nextPurge = now.addingTimeInterval(60)
        }
        if let existing = expiries[identifier], existing > now { return false }
        guard expiries.count < maximumEntryCount else {
            throw JOSEError.replay.with(detail: "replay store is full")
        }
        expiries[identifier] = expiry
        return true
    }
}
