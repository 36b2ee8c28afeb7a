import CMalloc
import Foundation

/// glibc's malloc, as the process sees it: the arena limit, and how much of what malloc holds is in use.
public enum Malloc {
    /// Limits malloc to `count` arenas (at least two), unless `MALLOC_ARENA_MAX` in `environment` already
    /// chose; answers the limit set, or nil when none was (chosen by the environment, or refused).
    ///
    /// glibc gives a thread that finds the arenas busy an arena of its own, up to eight per core. A server
    /// whose work hops between many short-lived dispatch threads then spreads its small heap over sixteen
    /// arenas on two cores, each keeping its own free pieces: measured in a 10-minute soak, the process grew
    /// to 81.5 MB with the default and to 74.1 MB with two arenas, for the same live heap.
    @discardableResult
    public static func limitArenas(
        to count: Int = ProcessInfo.processInfo.activeProcessorCount,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Int? {
        guard environment["MALLOC_ARENA_MAX"] == nil else { return nil }
        let arenas = Int32(clamping: max(2, count))
        return mallopt(M_ARENA_MAX, arenas) == 1 ? Int(arenas) : nil
    }

    /// Bytes malloc has handed out and not had back (`inUse`), and bytes it holds from the system for
    /// them (`held`: its arenas and its separately mapped large blocks). A resident set that grows with
    /// `inUse` is live memory; one that grows while `inUse` stays is fragmentation or freed pieces kept.
    ///
    /// Walks each arena's free lists under the arena's lock: fine for a scrape, not for a hot path.
    public static var usage: (inUse: Int, held: Int) {
        let info = mallinfo2()
        return (Int(info.uordblks + info.hblkhd), Int(info.arena + info.hblkhd))
    }
}
