import Testing
import TetherHTTP

@Suite("malloc arenas")
struct MallocArenasTests {
    /// mallopt is found and takes the limit; never fewer than two arenas.
    @Test func theLimitIsSetAndIsAtLeastTwo() {
        #expect(MallocArenas.limit(to: 1, environment: [:]) == 2)
        #expect(MallocArenas.limit(to: 3, environment: [:]) == 3)
    }

    /// An operator's MALLOC_ARENA_MAX is left to glibc.
    @Test func theEnvironmentsChoiceIsKept() {
        #expect(MallocArenas.limit(to: 2, environment: ["MALLOC_ARENA_MAX": "8"]) == nil)
    }
}
