import Foundation

/// The signing keys not yet retired at one load, and the rotation rules over them.
///
/// Pure, so that which key signs and when a successor is due can be decided the
/// same way from a cache in memory and from rows read under the rotation lock.
struct SigningKeyRing: Sendable {
    /// What rotation needs doing at a given moment.
    enum RotationStep: Sendable, Equatable {
        /// The current key is young enough, or its successor is already published.
        case none
        /// No key may sign: make one that signs at once (first start, or after a long outage).
        case activateNow
        /// The current key is due for rotation: publish a successor that starts signing at the given time.
        case prepublish(activatingAt: Date)
    }

    /// Keys in order of activation, oldest first.
    let keys: [SigningKey]

    init(keys: [SigningKey]) {
        self.keys = keys.sorted { ($0.activatedAt, $0.keyID) < ($1.activatedAt, $1.keyID) }
    }

    /// The key that signs at `now`: the most recently activated one still published.
    ///
    /// With none active yet, a first key activating within `tolerance` signs:
    /// "now" is read on different clocks and before waiting for the rotation
    /// lock, so the key another caller has just made may look a moment early.
    /// Without this, every such caller would make a key of its own.
    func signingKey(at now: Date, tolerance: TimeInterval) -> SigningKey? {
        keys.last { $0.activatedAt <= now && $0.isPublished(at: now) }
            ?? keys.first { $0.activatedAt <= now.addingTimeInterval(tolerance) && $0.isPublished(at: now) }
    }

    /// Every key verifiers should accept at `now`, including a successor not yet signing.
    func publishedKeys(at now: Date) -> [SigningKey] {
        keys.filter { $0.isPublished(at: now) }
    }

    /// The rotation due at `now` under `configuration`.
    func rotationStep(at now: Date, configuration: SigningKeyStore.Configuration) -> RotationStep {
        guard let current = signingKey(at: now, tolerance: configuration.clockSkewTolerance) else { return .activateNow }
        if keys.contains(where: { $0.activatedAt > current.activatedAt }) { return .none }
        let due = current.activatedAt.addingTimeInterval(configuration.rotationInterval)
        // Published one pre-publication interval ahead, so JWKS caches elsewhere hold it before its first token.
        guard now >= due.addingTimeInterval(-configuration.prepublicationInterval) else { return .none }
        return .prepublish(activatingAt: max(due, now.addingTimeInterval(configuration.prepublicationInterval)))
    }
}
