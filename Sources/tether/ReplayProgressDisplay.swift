import Foundation
import Synchronization
import TetherPostgres

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Shows `tether replay`'s progress on standard error: a bar redrawn in place on a
/// terminal, plain lines every few seconds otherwise (logs, CI).
final class ReplayProgressDisplay: Sendable {
    private struct State {
        var lastDraw: ContinuousClock.Instant?
        var lastPhase: ReplayProgress.Phase?
        var lastLineEvents = 0
        var isBarShown = false
    }

    private let isTerminal: Bool
    private let clock = ContinuousClock()
    private let state = Mutex(State())
    /// A plain line at least this often, or every `lineEvents` events.
    private let lineInterval: Duration = .seconds(5)
    private let lineEvents = 50_000

    init(isTerminal: Bool = isatty(STDERR_FILENO) == 1) {
        self.isTerminal = isTerminal
    }

    /// Takes one report from the replay.
    func show(_ progress: ReplayProgress) {
        let now = clock.now
        let text: String? = state.withLock { state in
            let phaseChanged = state.lastPhase != progress.phase
            defer { state.lastPhase = progress.phase }
            if isTerminal {
                if !phaseChanged, let last = state.lastDraw, now - last < .milliseconds(100) { return nil }
                state.lastDraw = now
                state.isBarShown = true
                return "\r\u{1B}[K" + Self.bar(progress)
            }
            let due = state.lastDraw.map { now - $0 >= lineInterval } ?? true
            guard phaseChanged || due || progress.applied - state.lastLineEvents >= lineEvents else { return nil }
            state.lastDraw = now
            state.lastLineEvents = progress.applied
            return Self.line(progress) + "\n"
        }
        if let text { FileHandle.standardError.write(Data(text.utf8)) }
    }

    /// Ends the bar's line, so that what follows starts on a line of its own.
    func finish() {
        let wasShown = state.withLock { state in
            defer { state = State() }
            return state.isBarShown
        }
        if wasShown { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    /// `accounts [##########..........]  52%  12,345/23,456 events  3,210 events/s  ETA 0:03  rebuilding`.
    static func bar(_ progress: ReplayProgress, width: Int = 24) -> String {
        let fraction = progress.total > 0 ? min(1, Double(progress.applied) / Double(progress.total)) : 1
        let filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        return "\(progress.projection) [\(bar)] \(String(format: "%3d", Int(fraction * 100)))%  "
            + "\(progress.applied)/\(progress.total) events  \(Int(progress.eventsPerSecond)) events/s  "
            + "ETA \(eta(progress))  \(progress.phase.rawValue)"
    }

    /// `replay accounts: rebuilding, 12345/23456 events (52%), 3210 events/s, ETA 0:03`.
    static func line(_ progress: ReplayProgress) -> String {
        let percent = progress.total > 0 ? min(100, progress.applied * 100 / progress.total) : 100
        return "replay \(progress.projection): \(progress.phase.rawValue), \(progress.applied)/\(progress.total) events "
            + "(\(percent)%), \(Int(progress.eventsPerSecond)) events/s, ETA \(eta(progress))"
    }

    /// Minutes and seconds left, or `-` before there is a rate to go by.
    static func eta(_ progress: ReplayProgress) -> String {
        guard let remaining = progress.estimatedRemaining else { return "-" }
        let seconds = Int(remaining.components.seconds)
        return "\(seconds / 60):" + (seconds % 60 < 10 ? "0" : "") + "\(seconds % 60)"
    }
}
