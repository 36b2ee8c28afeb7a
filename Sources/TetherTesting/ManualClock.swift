import Foundation
import Synchronization
import TetherJOSE

/// A clock a test sets and moves by hand; every suite's stand-in for the wall clock.
public final class ManualClock: WallClock {
    private let current: Mutex<Date>

    /// A clock at `start`: by default the present, rounded down to a whole second (as `iat` is).
    public init(_ start: Date = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))) {
        current = Mutex(start)
    }

    public func now() -> Date { current.withLock { $0 } }

    /// Moves the clock by `seconds` (back, when negative).
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}
