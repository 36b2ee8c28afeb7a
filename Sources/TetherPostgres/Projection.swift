import TetherCore

/// What `tether replay` needs to know about one projection: its tables, the events
/// it reads, and how one event changes its tables.
///
/// Replay rebuilds the tables in a shadow schema that comes first on the search
/// path, so `apply` must name its tables unqualified (`INSERT INTO users …`): the
/// same code then writes the live tables inline and the shadow tables on replay.
/// Adding a table to a projection means listing it in `tables`; replay copies its
/// shape from the live table, so nothing in replay changes. Every column of those
/// tables must follow from the events: a value written without an event (a counter
/// bumped in place) is lost at the next swap, and `--verify` reports it as drift.
public struct Projection: Sendable {
    /// The name `tether replay --projection NAME` takes.
    public var name: String
    /// The tables the projection owns, unqualified, in an order safe for deleting rows
    /// (tables that reference others first).
    public var tables: [String]
    /// Stream categories it reads: `user` selects every `user-<id>` stream.
    public var categories: [String]
    /// Rewrites old payload schemas into today's shape before `apply` sees them.
    public var upcasters: UpcasterChain
    /// Applies one event; `occurredAt` is the event's `occurred_at` as PostgreSQL prints it.
    public var apply: @Sendable (_ event: RecordedEvent, _ occurredAt: String, _ connection: PostgresConnection) async throws -> Void
    /// The statements `apply` runs for one event, when the projection can say them without running any:
    /// replay then sends a whole batch's statements in one pipelined round trip instead of one by one.
    public var statements: (@Sendable (_ event: RecordedEvent, _ occurredAt: String) throws -> [PostgresQuery])?

    public init(
        name: String, tables: [String], categories: [String], upcasters: UpcasterChain = UpcasterChain(),
        statements: (@Sendable (RecordedEvent, String) throws -> [PostgresQuery])? = nil,
        apply: @escaping @Sendable (RecordedEvent, String, PostgresConnection) async throws -> Void
    ) {
        self.name = name
        self.tables = tables
        self.categories = categories
        self.upcasters = upcasters
        self.statements = statements
        self.apply = apply
    }

    /// Every projection `tether replay` rebuilds, in the order it rebuilds them.
    public static let all: [Projection] = [.accounts, .adminKeys]

    /// The projection called `name`, if there is one.
    public static func named(_ name: String) -> Projection? {
        all.first { $0.name == name }
    }
}

extension Projection {
    /// Users, identities, sessions, refresh tokens and MFA read models from `user-<id>` streams.
    public static let accounts = Projection(
        name: "accounts", tables: AccountProjection.tables, categories: ["user"],
        upcasters: AccountEventCodec.upcasters, statements: accountStatements
    ) { event, occurredAt, connection in
        for statement in try accountStatements(event, occurredAt) {
            try await connection.query(statement)
        }
    }

    /// What one account event does to the read models, replayed: the projection's statements, then the
    /// stream version. Inline, a command records the version once after its events; recording it after every
    /// event leaves the same value once the command's last event is applied.
    private static func accountStatements(_ event: RecordedEvent, _ occurredAt: String) throws -> [PostgresQuery] {
        guard let userId = event.userId else { return [] }
        var statements: [PostgresQuery] = []
        if let decoded = try AccountEventCodec.decode(event) {
            statements = try AccountProjection.statements(for: decoded, userId: userId, at: "\(occurredAt)::timestamptz")
        }
        statements.append(AccountProjection.recordVersion(event.version, of: userId))
        return statements
    }
}

extension Projection {
    /// Admin keys from `admin-key-<id>` streams (their request events change no table).
    public static let adminKeys = Projection(name: "admin-keys", tables: AdminKeyProjection.tables, categories: ["admin"]) {
        event, occurredAt, connection in
        if let decoded = try AdminEventCodec.decode(event) {
            try await AdminKeyProjection.apply(decoded, at: occurredAt, on: connection)
        }
    }
}
