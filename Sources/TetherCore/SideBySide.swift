import Dispatch
import Foundation
import Synchronization

/// Splits one large piece of CPU work over the machine's cores, for a caller that waits for all of it.
///
/// A support reader's page of 500 events is opened, decrypted and written out by one thread while the
/// rest of the machine may be idle; in halves on two cores, the reader waits about half as long. Small
/// work stays on the calling thread: a split costs a few microseconds of hand-over.
public enum SideBySide {
    /// The cores work is split over.
    public static let cores = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// `body` of consecutive ranges that cover `0..<count`, each of at least `minimumPart` items (all of
    /// `count` in one range when it is smaller than two such parts), run side by side, their results joined
    /// in range order. The calling thread runs one range itself. The first range's error in range order is
    /// thrown, after every range has finished.
    public static func map<T: Sendable>(
        _ count: Int, minimumPart: Int, _ body: @Sendable (Range<Int>) throws -> [T]
    ) throws -> [T] {
        let parts = ranges(count, minimumPart: minimumPart)
        guard parts.count > 1 else { return try body(0..<count) }
        let results = Mutex<[Result<[T], any Error>?]>(Array(repeating: nil, count: parts.count))
        DispatchQueue.concurrentPerform(iterations: parts.count) { index in
            let result = Result { try body(parts[index]) }
            results.withLock { $0[index] = result }
        }
        let finished = try results.withLock { $0 }.map { result in
            guard let result else { preconditionFailure("concurrentPerform returned before a range ran") }
            return try result.get()
        }
        var joined: [T] = []
        joined.reserveCapacity(finished.reduce(0) { $0 + $1.count })
        for part in finished { joined += part }
        return joined
    }

    /// The ranges ``map(_:minimumPart:_:)`` runs: as many as there are cores, each of at least `minimumPart`
    /// items, sizes differing by one at most.
    public static func ranges(_ count: Int, minimumPart: Int, cores: Int = cores) -> [Range<Int>] {
        let parts = max(1, min(cores, count / max(1, minimumPart)))
        return (0..<parts).map { part in (count * part / parts)..<(count * (part + 1) / parts) }
    }
}
