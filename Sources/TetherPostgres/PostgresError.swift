/// A failure talking to PostgreSQL, with the server's SQLSTATE where it sent one.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    private enum Kind: Sendable {
        case connectionFailed
        case connectionLost
        case server
        case decoding
        case poolTimeout
        case poolClosed
        case protocolViolation
    }

    private let kind: Kind
    /// A one-line explanation, fit for a log line or a terminal.
    public let message: String
    /// The five-character SQLSTATE code the server reported, if any.
    public let sqlState: String?
    /// The constraint a violation named, if any.
    public let constraint: String?
    /// The server's DETAIL line, if any.
    public let detail: String?

    private init(_ kind: Kind, _ message: String, sqlState: String? = nil, constraint: String? = nil, detail: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
        self.constraint = constraint
        self.detail = detail
    }

    static func connectionFailed(_ message: String) -> PostgresError { .init(.connectionFailed, message) }
    static func connectionLost(_ message: String) -> PostgresError { .init(.connectionLost, message) }
    static func server(_ message: String, sqlState: String?, constraint: String?, detail: String?) -> PostgresError {
        .init(.server, message, sqlState: sqlState, constraint: constraint, detail: detail)
    }
    static func decoding(_ message: String) -> PostgresError { .init(.decoding, message) }
    static func poolTimeout(_ message: String) -> PostgresError { .init(.poolTimeout, message) }
    static let poolClosed = PostgresError(.poolClosed, "the connection pool is shut down")
    static func protocolViolation(_ message: String) -> PostgresError { .init(.protocolViolation, message) }

    /// True when the database could not be reached or the connection broke:
    /// the operation may succeed if retried later (HTTP 503, not 500).
    public var isUnavailable: Bool {
        switch kind {
        case .connectionFailed, .connectionLost, .poolTimeout, .poolClosed: true
        case .server: sqlState.map { $0.hasPrefix("08") || $0 == "57P01" || $0 == "57P03" } ?? false
        case .decoding, .protocolViolation: false
        }
    }

    /// True for `unique_violation` (23505).
    public var isUniqueViolation: Bool { sqlState == "23505" }

    /// True for `lock_not_available` (55P03): a lock wait outlasted `lock_timeout`.
    public var isLockNotAvailable: Bool { sqlState == "55P03" }

    /// True for serialization failures and deadlocks, which a retry resolves.
    public var isTransient: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// True for a statement cancelled by `statement_timeout` (57014) or a lock wait past `lock_timeout`
    /// (55P03): the database did not get to it in time, and the transaction rolled back.
    public var isTimeout: Bool { sqlState == "57014" || sqlState == "55P03" }

    public var description: String {
        var text = message
        if let sqlState { text += " (SQLSTATE \(sqlState))" }
        if let detail { text += ": \(detail)" }
        return text
    }
}
