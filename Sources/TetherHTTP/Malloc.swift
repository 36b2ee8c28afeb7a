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

    /// Fixes the size from which malloc maps a block of its own at `bytes` (glibc's starting value, 128 KiB),
    /// unless `MALLOC_MMAP_THRESHOLD_` or a `glibc.malloc.mmap_threshold` tunable in `environment` already
    /// chose; answers the threshold set, or nil when none was.
    ///
    /// Left alone, glibc raises the threshold to the size of each mapped block freed (up to 32 MiB) and
    /// the trimming threshold to twice that, so after one large block is freed, later ones of that
    /// size come out of the arenas, and freed, stay there as holes. Two pairs of
    /// 30-minute soaks side by side (2 MB of kept states): what malloc held ended at 16.4 and 15.2 MB
    /// with the threshold fixed against 18.5 and 16.2 without, growing 0.14 and 0.19 MB a minute over
    /// the second half against 0.28 and 0.23, for the same live heap; at the default budget a third pair
    /// showed no difference. It narrows the creep at best; it does not end it.
    @discardableResult
    public static func fixMappingThreshold(
        at bytes: Int = 128 << 10, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Int? {
        guard !environment.choseMalloc("mmap_threshold") else { return nil }
        let threshold = Int32(clamping: bytes)
        return mallopt(M_MMAP_THRESHOLD, threshold) == 1 ? Int(threshold) : nil
    }

    /// For a batch command that allocates and frees blocks of the same few sizes over and over: blocks up to
    /// `mappingThreshold` (glibc's largest, 32 MiB) come from the arenas, and freed space stays there until
    /// more than `trimThreshold` of it is free at the top, unless the environment chose either
    /// (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_` or their `GLIBC_TUNABLES`); answers the thresholds
    /// set, or nil when none were.
    ///
    /// `tether replay` reads the log in pages of 2,000 events, each page's arrays a few hundred KiB: mapped
    /// apart (``fixMappingThreshold(at:environment:)``), every one is mapped, faulted in page by page and
    /// unmapped again, thousands of times. Over a log of 7.1 million events the page faults were a tenth of
    /// the process's CPU samples. The resident set stays near the largest heap the run needs, which a
    /// replay, streaming the log, keeps small; a server, whose heap is long-lived, keeps the fixed threshold.
    @discardableResult
    public static func keepFreedBlocks(
        mappingThreshold: Int = 32 << 20, trimThreshold: Int = 256 << 20,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> (mapping: Int, trim: Int)? {
        guard !environment.choseMalloc("mmap_threshold"), !environment.choseMalloc("trim_threshold") else { return nil }
        let mapping = Int32(clamping: mappingThreshold), trim = Int32(clamping: trimThreshold)
        guard mallopt(M_MMAP_THRESHOLD, mapping) == 1, mallopt(M_TRIM_THRESHOLD, trim) == 1 else { return nil }
        return (Int(mapping), Int(trim))
    }

    /// Bytes malloc has handed out and not had back (`inUse`), bytes it holds from the system for
    /// them (`held`: its arenas and its separately mapped large blocks), and of those the mapped blocks
    /// (`mapped`). A resident set that grows with `inUse` is live memory; one that grows while `inUse`
    /// stays is fragmentation or freed pieces kept.
    ///
    /// Walks each arena's free lists under the arena's lock: fine for a scrape, not for a hot path.
    public static var usage: (inUse: Int, held: Int, mapped: Int) {
        let info = mallinfo2()
        return (Int(info.uordblks + info.hblkhd), Int(info.arena + info.hblkhd), Int(info.hblkhd))
    }
}

extension [String: String] {
    /// Whether this environment sets glibc malloc's `parameter` (`mmap_threshold`, `trim_threshold`), as
    /// `MALLOC_MMAP_THRESHOLD_` and the like or as a `glibc.malloc.…` tunable: then Tether leaves it alone.
    fileprivate func choseMalloc(_ parameter: String) -> Bool {
        self["MALLOC_\(parameter.uppercased())_"] != nil || (self["GLIBC_TUNABLES"] ?? "").contains("glibc.malloc.\(parameter)")
    }
}
