import Testing
import TetherHTTP

/// Run alone (`scripts/test.sh`): the figures are the whole process's, and a block is mapped apart only when
/// the arenas have no free space for it, which a process that ran the other suites first has plenty of.
@Suite("malloc (run alone)", .serialized)
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

    /// With the threshold fixed, a large block freed does not raise it: blocks of half its size are
    /// still mapped apart (glibc left alone would serve them from an arena), and go back when freed.
    @Test func largeBlocksStayMappedAfterALargerOneIsFreed() {
        #expect(Malloc.fixMappingThreshold(environment: [:]) == 128 << 10)
        let large = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 16)
        large.deallocate()
        let half = 512 << 10
        // Block by block, so that other tests' blocks mapped or unmapped meanwhile hardly touch the count.
        var mappedApart = 0
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<8 {
            let before = Malloc.usage.mapped
            blocks.append(UnsafeMutableRawPointer.allocate(byteCount: half, alignment: 16))
            if Malloc.usage.mapped - before >= half { mappedApart += 1 }
        }
        var givenBack = 0
        for block in blocks {
            let before = Malloc.usage.mapped
            block.deallocate()
            if before - Malloc.usage.mapped >= half { givenBack += 1 }
        }
        #expect(mappedApart >= 6, "\(mappedApart) of 8 blocks of 512 KiB mapped apart")
        #expect(givenBack >= 6, "\(givenBack) of 8 given back when freed")
    }

    /// An operator's choice of the threshold, by either spelling, is left to glibc.
    @Test func theEnvironmentsThresholdIsKept() {
        #expect(Malloc.fixMappingThreshold(environment: ["MALLOC_MMAP_THRESHOLD_": "65536"]) == nil)
        #expect(Malloc.fixMappingThreshold(environment: ["GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"]) == nil)
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
