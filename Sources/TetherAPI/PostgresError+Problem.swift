import TetherHTTP
import TetherPostgres

/// A database that cannot be reached is a 503 the client may retry, never a 500
/// and never a reason to sign a user out.
extension PostgresError: ProblemConvertible {
    public var problem: Problem {
        if isUnavailable || isTransient {
            return .serviceUnavailable(retryAfterSeconds: 2, detail: "the database is unavailable; retry shortly")
        }
        if sqlState == "42P01" {
            // A table the build expects is not there: the database's migrations are pending, not the request wrong.
            return .serviceUnavailable(retryAfterSeconds: 5, detail: "the database's schema is not current (run tether migrate); retry later")
        }
        if isTimeout {
            // Rolled back: nothing of the request was written, and it can be sent again.
            return .serviceUnavailable(retryAfterSeconds: 2, detail: "the database did not answer in time; nothing was changed; retry shortly")
        }
        return .internal
    }
}

/// Read models waiting for a migration's rebuild cannot answer lookups yet: 503 until `tether migrate` ran it.
extension RebuildPending: ProblemConvertible {
    public var problem: Problem {
        .serviceUnavailable(retryAfterSeconds: 5, detail: description)
    }
}
