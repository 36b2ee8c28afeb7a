import Foundation
import Synchronization
import Testing
import TetherCore

@Suite("SideBySide: work split over cores, joined in order")
struct SideBySideTests {
    @Test(arguments: [0, 1, 99, 100, 199, 200, 201, 500, 1001])
    func rangesCoverEveryItemOnceInOrderWithPartsOfTheMinimumOrMore(count: Int) {
        for cores in 1...4 {
            let ranges = SideBySide.ranges(count, minimumPart: 100, cores: cores)
            #expect(ranges.flatMap { Array($0) } == Array(0..<count), "\(count) on \(cores)")
            #expect(ranges.count == max(1, min(cores, count / 100)), "\(count) on \(cores)")
            if ranges.count > 1 {
                #expect(ranges.allSatisfy { $0.count >= 100 }, "\(ranges)")
                #expect(ranges.map(\.count).max()! - ranges.map(\.count).min()! <= 1, "\(ranges)")
            }
        }
    }

    @Test func resultsAreJoinedInRangeOrderAndEachRangeRunsOnce() throws {
        let runs = Mutex<[Range<Int>]>([])
        let squares = try SideBySide.map(1_000, minimumPart: 10) { part in
            runs.withLock { $0.append(part) }
            return part.map { $0 * $0 }
        }
        #expect(squares == (0..<1_000).map { $0 * $0 })
        let ran = runs.withLock { $0 }.sorted { $0.lowerBound < $1.lowerBound }
        #expect(ran == SideBySide.ranges(1_000, minimumPart: 10))
    }

    @Test func theFirstFailingRangeInOrderIsThrownAfterEveryRangeRan() {
        struct Failed: Error, Equatable { let at: Int }
        let runs = Mutex(0)
        let parts = SideBySide.ranges(400, minimumPart: 100)
        #expect(throws: Failed(at: parts.count > 1 ? parts[1].lowerBound : 0)) {
            _ = try SideBySide.map(400, minimumPart: 100) { part -> [Int] in
                runs.withLock { $0 += 1 }
                if parts.count == 1 || part.lowerBound > 0 { throw Failed(at: part.lowerBound) }
                return Array(part)
            }
        }
        #expect(runs.withLock { $0 } == parts.count)
    }
}
