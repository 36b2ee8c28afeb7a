import Testing
import TetherHTTP

@Suite("malloc")
struct MallocTests {
    /// mallopt takes the limit; never fewer than two arenas.
    @Test func theArenaLimitIsSetAndIsAtLeastTwo() {
        #expect(Malloc.limitArenas(to: 1, environment: [:]) == 2)
        #expect(Malloc.limitArenas(to: 3, environment: [:]) == 3)
    }

    /// An operator's MALLOC_ARENA_MAX is left to glibc.
    @Test func theEnvironmentsChoiceIsKept() {
        #expect(Malloc.limitArenas(to: 2, environment: ["MALLOC_ARENA_MAX": "8"]) == nil)
    }

    /// The figures move with what is allocated: 64 MB held (and touched) shows in use, within what malloc holds.
    @Test func theHeapInUseCountsWhatIsAllocated() {
        let size = 64 << 20
        let before = Malloc.usage
        let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        block.initializeMemory(as: UInt8.self, repeating: 1, count: size)
        let during = Malloc.usage
        block.deallocate()
        let after = Malloc.usage
        #expect(during.inUse - before.inUse >= size * 3 / 4, "\(before) → \(during)")
        #expect(during.held >= during.inUse)
        #expect(during.inUse - after.inUse >= size * 3 / 4, "\(during) → \(after)")
    }
}
