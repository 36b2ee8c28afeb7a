import Foundation
import Synchronization
import TetherHTTP
import TetherPostgres

extension Commands {
    /// `tether replay [--projection NAME] [--verify]`.
    static func replay(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config", "projection"], switchFlags: ["verify"], positionals: 0)
        let projections: [Projection]
        if let name = options["projection"] {
            guard let projection = Projection.named(name) else {
                throw UsageError("no projection \"\(name)\" (known: \(Projection.all.map(\.name).joined(separator: ", ")))")
            }
            projections = [projection]
        } else {
            projections = Projection.all
        }
        let drifting: Int
        do {
            drifting = try await rebuild(projections, options: options)
        } catch let failure as CommandFailure where failure.status != 1 {
            throw failure // an interruption's own status
        } catch where options.has("verify") {
            // Drift is 1; a verification that could not run is 3, so a scheduled check tells the two apart.
            throw CommandFailure("the read models could not be verified: \(sentence(error))", status: 3)
        }
        if drifting > 0 {
            throw CommandFailure("the read models drift from the log: \(drifting) row\(drifting == 1 ? "" : "s") differ (listed above)")
        }
    }

    /// Rebuilds or verifies `projections`; answers how many rows drift (always 0 for a rebuild).
    private static func rebuild(_ projections: [Projection], options: Arguments) async throws -> Int {
        let configuration = try loadConfiguration(options)
        guard let url = configuration.databaseURL else {
            throw CommandFailure("TETHER_DATABASE_URL is not set: tether replay needs the database whose read models to rebuild")
        }
        // The login role owns the tables; replay never switches to tether_service. Three connections: the
        // run's own, a second for the other bulk reader or the read-ahead, and --verify's gate beside both.
        let database = PostgresClient(configuration: .init(
            url: url, maxConnections: 3, applicationName: "tether replay", masterKeys: try masterKeys(configuration)))
        defer { database.shutdown() }
        let mode: ProjectionReplay.Mode = options.has("verify") ? .verify : .replace
        let display = ReplayProgressDisplay()
        // The projections already swapped in, for the words of an interruption.
        let swapped = SwappedProjections()
        return try await interruptible(display: display, swapped: swapped) {
            var drifting = 0
            // One hold of the run lock for them all: no migration starts between two of them.
            try await ProjectionReplay.run(projections, mode, on: database, progress: display.show) { outcome in
                display.finish()
                for drift in outcome.drift {
                    print("drift: \(drift)")
                }
                drifting += outcome.drift.count
                print(summary(outcome))
                if mode == .replace { swapped.names.withLock { $0.append(outcome.projection) } }
            }
            return drifting
        }
    }

    /// `replayed accounts: 1234 events in 0.82 s (1505 events/s; bulk 1200 at 2100/s, then 34 at 140/s), swapped in`.
    private static func summary(_ outcome: ReplayOutcome) -> String {
        let verb = outcome.mode == .verify ? "verified" : "replayed"
        let result = switch outcome.mode {
        case .replace: "swapped in"
        case .verify: outcome.drift.isEmpty ? "read models match the log" : "\(outcome.drift.count) drifting rows"
        }
        let phases = outcome.bulkEvents == 0 ? "" : "; bulk \(outcome.bulkEvents) at \(Int(outcome.bulkEventsPerSecond))/s, "
            + "then \(outcome.events - outcome.bulkEvents) at \(Int(outcome.catchUpEventsPerSecond))/s"
        return "\(verb) \(outcome.projection): \(outcome.events) events in \(String(format: "%.2f", outcome.seconds)) s "
            + "(\(Int(outcome.eventsPerSecond)) events/s\(phases)), \(result)"
    }

    /// Runs `work`, cancelling it on SIGINT or SIGTERM; a replay then drops its copies.
    private static func interruptible<T: Sendable>(
        display: ReplayProgressDisplay, swapped: SwappedProjections, _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let signals = ShutdownSignal.listen()
        let received = Mutex<Int32?>(nil)
        let task = Task { try await work() }
        let watcher = Task {
            let signal = await signals.wait()
            received.withLock { $0 = signal }
            task.cancel()
        }
        defer { watcher.cancel() }
        do {
            return try await task.value
        } catch {
            display.finish()
            let done = swapped.names.withLock { $0 }
            let untouched = done.isEmpty ? "the live tables are untouched" : "\(done.joined(separator: ", ")) swapped in already, the other live tables untouched"
            guard let signal = received.withLock({ $0 }) else {
                // A failure after a projection was swapped in says so: the run is not all or nothing across projections.
                if done.isEmpty { throw error }
                throw CommandFailure("\(String(describing: error)) (\(untouched))")
            }
            let name = signal == SIGINT ? "SIGINT" : "SIGTERM"
            throw CommandFailure("interrupted by \(name): \(untouched), the shadow tables dropped", status: 128 + signal)
        }
    }
}

/// The projections a replay has swapped in so far.
private final class SwappedProjections: Sendable {
    let names = Mutex<[String]>([])
}
