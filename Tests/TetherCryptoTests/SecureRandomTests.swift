import Testing
import TetherCrypto

/// Random bytes served from the pool: each byte handed out once, across refills and threads.
@Suite("Secure random bytes")
struct SecureRandomTests {
    @Test func drawsNeverRepeatAcrossTheSizesThePoolServesAndRefills() {
        // 3,000 nonces (about nine fills of the pool) with draws of other sizes between them, some past
        // what the pool serves: every 12-byte value is new, and every draw has its size.
        var seen = Set<[UInt8]>()
        for index in 0..<3_000 {
            let nonce = SecureRandom.bytes(count: 12)
            #expect(nonce.count == 12)
            #expect(seen.insert(nonce).inserted, "draw \(index) repeated an earlier one")
            let other = [1, 5, 255, 256, 257, 4_096, 10_000][index % 7]
            #expect(SecureRandom.bytes(count: other).count == other)
        }
        #expect(SecureRandom.bytes(count: 0).isEmpty)
    }

    @Test func theBytesSpreadOverEveryValue() {
        // 64 KiB of 12-byte draws: each of the 256 values is expected 256 times. A pool handed out
        // zeroed, or the same bytes again, is far outside these bounds.
        var counts = [Int](repeating: 0, count: 256)
        for _ in 0..<(65_536 / 16) {
            for byte in SecureRandom.bytes(count: 16) { counts[Int(byte)] += 1 }
        }
        #expect(counts.min()! > 150 && counts.max()! < 380, "counts from \(counts.min()!) to \(counts.max()!)")
    }

    @Test func concurrentDrawsNeverShareBytes() async {
        let draws = await withTaskGroup(of: [[UInt8]].self) { group in
            for _ in 0..<8 {
                group.addTask { (0..<2_000).map { _ in SecureRandom.bytes(count: 12) } }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(draws.count == 16_000)
        #expect(Set(draws).count == draws.count)
    }
}
