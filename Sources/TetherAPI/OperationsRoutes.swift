import Foundation
import Synchronization
import TetherHTTP
import TetherPostgres

/// `GET /healthz` and `GET /readyz`.
public struct OperationsRoutes: Sendable {
    let database: PostgresClient
    let migrations: MigrationRunner
    /// Whether the stored keys open with the database client's master keys: the one check of them, running or
    /// done, whose answer is nil or a problem's description. `serve` checks at start, but not when the database
    /// did not answer then.
    private let masterKeyVerdict = MasterKeyVerdict()
    /// Where a database that does not answer is described: `/readyz` answers anyone, so it says only that.
    let logger: Logger?

    public init(database: PostgresClient, migrations: MigrationRunner, logger: Logger? = nil) {
        self.database = database
        self.migrations = migrations
        self.logger = logger
    }

    private final class MasterKeyVerdict: Sendable {
        struct State {
            /// The last count's answer (nil, or a problem's description) and when it ended, once one has.
            var verdict: (problem: String?, ended: ContinuousClock.Instant)?
            /// The count running, if one is.
            var running: Task<String?, any Error>?
        }
        let state = Mutex(State())
    }

    /// How long a count of the stored keys stands: `tether keys rotate-master` re-wraps them under a running
    /// server, and one left without the new key must stop being ready.
    static let masterKeyCheckInterval: Duration = .seconds(60)

    /// Adds the routes to `router`.
    public func register(on router: inout Router) {
        router.get("/healthz") { _ in
            try HTTPResponse.json(["status": "ok"])
        }
        router.get("/readyz") { _ in
            try await readiness()
        }
    }

    /// 200 when the database answers, every migration is applied unchanged, no read-model rebuild a
    /// migration asked for is pending and the stored keys open with the configured master key; 503 otherwise.
    func readiness() async throws -> HTTPResponse {
        let status: MigrationStatus
        let masterKeyProblem: String?
        do {
            status = try await migrations.status(database)
            masterKeyProblem = status.isCurrent ? try await self.masterKeyProblem() : nil
        } catch let error as PostgresError {
            // libpq's words name the database's host, port, user and name: for the operator's log, not for any
            // client of an unauthenticated route.
            logger?.warn("readyz: the database did not answer", [("error", error.description)])
            throw Problem.serviceUnavailable(retryAfterSeconds: 5, detail: "database unreachable (the server's log says why)")
        }
        guard status.isCurrent else {
            var reasons: [String] = []
            if !status.pending.isEmpty { reasons.append("pending migrations: \(status.pending.joined(separator: ", ")) (run tether migrate)") }
            if !status.changed.isEmpty { reasons.append("changed after being applied: \(status.changed.joined(separator: ", "))") }
            throw Problem.serviceUnavailable(retryAfterSeconds: 5, detail: reasons.joined(separator: "; "))
        }
        if let pending = try RebuildPending(try await database.query(RebuildPending.statement)) {
            throw Problem.serviceUnavailable(retryAfterSeconds: 5, detail: pending.description)
        }
        if let masterKeyProblem { throw Problem.serviceUnavailable(retryAfterSeconds: 5, detail: masterKeyProblem) }
        return try HTTPResponse.json(["status": "ready", "database": "ok", "migrations": "current"])
    }

    /// Why the stored keys do not open with the configured master keys, or nil when they do. They are counted (a
    /// scan of every stored key) once, then again in the background a ``masterKeyCheckInterval`` after each count
    /// ended, since a master-key rotation re-wraps them under a running server: a probe waits only for the first
    /// count, and answers from the last one after. One count runs at a time; a probe giving up does not cancel it,
    /// and one that failed (the database went away) runs again at the next probe.
    private func masterKeyProblem() async throws -> String? {
        guard let ring = database.configuration.masterKeys else { return nil }
        let verdict = masterKeyVerdict
        let (known, running) = verdict.state.withLock { state -> (String??, Task<String?, any Error>?) in
            let isDue = state.verdict.map { ContinuousClock.now >= $0.ended + Self.masterKeyCheckInterval } ?? true
            if isDue, state.running == nil {
                state.running = Task { [database] () async throws -> String? in
                    do {
                        let report = try await MasterKeyRotation.check(on: database, ring: ring)
                        let problem = report.unknown == 0 ? nil
                            : "\(report.unknown) stored keys are wrapped by a master key this configuration lacks (a wrong TETHER_MASTER_KEY_FILE?); "
                                + "restart with the right one (tether keys check counts them)"
                        verdict.state.withLock { $0 = MasterKeyVerdict.State(verdict: (problem, ContinuousClock.now), running: nil) }
                        return problem
                    } catch {
                        verdict.state.withLock { $0.running = nil }
                        throw error
                    }
                }
            }
            let known: String?? = if let verdict = state.verdict { .some(verdict.problem) } else { .none }
            return (known, state.running)
        }
        if let known { return known }
        return try await running!.value
    }
}
