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

    /// With freed blocks kept (`tether replay`), blocks of 512 KiB come from the arenas instead of being mapped
    /// apart, and freed, stay there for the next ones: nothing is handed back to the system.
    @Test func keptBlocksComeFromTheArenasAndStayThereWhenFreed() throws {
        let set = try #require(Malloc.keepFreedBlocks(environment: [:]))
        #expect(set.mapping == 32 << 20 && set.trim == 256 << 20)
        defer { _ = Malloc.keepFreedBlocks(mappingThreshold: 128 << 10, trimThreshold: 128 << 10, environment: [:]) }
        let half = 512 << 10
        var mappedApart = 0
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<8 {
            let before = Malloc.usage.mapped
            let block = UnsafeMutableRawPointer.allocate(byteCount: half, alignment: 16)
            block.initializeMemory(as: UInt8.self, repeating: 1, count: half)
            blocks.append(block)
            if Malloc.usage.mapped - before >= half { mappedApart += 1 }
        }
        let held = Malloc.usage.held
        for block in blocks { block.deallocate() }
        #expect(mappedApart <= 2, "\(mappedApart) of 8 blocks of 512 KiB mapped apart")
        #expect(Malloc.usage.held >= held - half, "held \(held) → \(Malloc.usage.held) after freeing 4 MiB")
    }

    /// An operator's choice of either threshold, by either spelling, is left to glibc.
    @Test func theEnvironmentsThresholdsAreKeptByKeepFreedBlocks() {
        #expect(Malloc.keepFreedBlocks(environment: ["MALLOC_TRIM_THRESHOLD_": "65536"]) == nil)
        #expect(Malloc.keepFreedBlocks(environment: ["MALLOC_MMAP_THRESHOLD_": "65536"]) == nil)
        #expect(Malloc.keepFreedBlocks(environment: ["GLIBC_TUNABLES": "glibc.malloc.trim_threshold=65536"]) == nil)
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
