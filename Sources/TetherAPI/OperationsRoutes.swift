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

    public init(database: PostgresClient, migrations: MigrationRunner) {
        self.database = database
        self.migrations = migrations
    }

    private final class MasterKeyVerdict: Sendable {
        let check = Mutex<(task: Task<String?, any Error>, started: ContinuousClock.Instant)?>(nil)
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
            throw Problem.serviceUnavailable(retryAfterSeconds: 5, detail: "database unreachable: \(error.message)")
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

    /// Why the stored keys do not open with the configured master keys, or nil when they do: counted (a scan of
    /// every stored key) at most once a ``masterKeyCheckInterval``, since a master-key rotation re-wraps them under
    /// a running server. Probes that come while a count runs wait for it, and a probe giving up does not cancel it;
    /// one that failed (the database went away) runs again.
    private func masterKeyProblem() async throws -> String? {
        guard let ring = database.configuration.masterKeys else { return nil }
        let check = masterKeyVerdict.check.withLock { check in
            if let check, ContinuousClock.now < check.started + Self.masterKeyCheckInterval { return check.task }
            let started = Task { [database] () async throws -> String? in
                let report = try await MasterKeyRotation.check(on: database, ring: ring)
                return report.unknown == 0 ? nil
                    : "\(report.unknown) stored keys are wrapped by a master key this configuration lacks (a wrong TETHER_MASTER_KEY_FILE?); "
                        + "restart with the right one (tether keys check counts them)"
            }
            check = (started, ContinuousClock.now)
            return started
        }
        do {
            return try await check.value
        } catch {
            masterKeyVerdict.check.withLock { if $0?.task == check { $0 = nil } }
            throw error
        }
    }
}
