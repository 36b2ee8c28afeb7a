import Foundation
import TetherHTTP

/// The process's memory at scrape time: what is resident, and what of it malloc holds and has in use, so that
/// a rising resident set can be told apart as live memory (in use rises too) or as what malloc keeps.
struct MemoryMetrics: MetricsCollector {
    func collect() async throws -> [MetricFamily] {
        let heap = Malloc.usage
        return [
            .gauge("process_resident_memory_bytes", help: "Resident memory size in bytes.",
                   samples: Self.residentBytes().map { [([], Double($0))] } ?? []),
            .gauge("tether_malloc_in_use_bytes", help: "Bytes malloc has handed out and not had back.",
                   samples: [([], Double(heap.inUse))]),
            .gauge("tether_malloc_held_bytes", help: "Bytes malloc holds from the system (its arenas and large blocks).",
                   samples: [([], Double(heap.held))]),
        ]
    }

    /// The resident set, from `/proc/self/statm` (its second field, in pages); nil where there is none.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
