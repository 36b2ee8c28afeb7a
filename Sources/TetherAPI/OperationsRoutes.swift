import Foundation
import TetherHTTP
import TetherPostgres

/// `GET /healthz` and `GET /readyz`.
public struct OperationsRoutes: Sendable {
    let database: PostgresClient
    let migrations: MigrationRunner

    public init(database: PostgresClient, migrations: MigrationRunner) {
        self.database = database
        self.migrations = migrations
    }

    /// Adds the routes to `router`.
    public func register(on router: inout Router) {
        router.get("/healthz") { _ in
            try HTTPResponse.json(["status": "ok"])
        }
        router.get("/readyz") { _ in
            try await readiness()
        }
    }

    /// 200 when the database answers, every migration is applied unchanged and no read-model rebuild a
    /// migration asked for is pending; 503 otherwise.
    func readiness() async throws -> HTTPResponse {
        let status: MigrationStatus
        do {
            status = try await migrations.status(database)
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
        return try HTTPResponse.json(["status": "ready", "database": "ok", "migrations": "current"])
    }
}
