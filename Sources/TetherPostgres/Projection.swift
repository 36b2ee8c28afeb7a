import Foundation
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
    /// Applies one event; `occurredAt` is the event's `occurred_at` as PostgreSQL prints it; personal data
    /// goes into the tables sealed with `seal` (``ReadModelSeal``).
    public var apply: @Sendable (
        _ event: RecordedEvent, _ occurredAt: String, _ connection: PostgresConnection, _ seal: ReadModelSeal
    ) async throws -> Void
    /// The statements that apply a batch of events in log order, when the projection can say them without
    /// running any: replay then sends a whole batch's statements in one pipelined round trip instead of
    /// running `apply` event by event.
    public var statements: (@Sendable (
        _ events: [(event: RecordedEvent, occurredAt: String)], _ seal: ReadModelSeal
    ) throws -> [PostgresQuery])?

    /// How `tether replay`'s bulk phase computes the final rows of each user's events in memory and
    /// writes them with `COPY`; nil: the projection is rebuilt by its statements alone.
    public var bulkRows: BulkRows?

    /// Whether `apply`, `statements`, the bulk fold or the upcasters read the events' metadata (actor,
    /// client address, command id). When none does, replay leaves it unread and they see empty metadata:
    /// parsing it was a tenth of a replay's CPU.
    public var readsMetadata: Bool
    /// References between the projection's tables that no foreign key keeps (for the cost of checking one
    /// at every write): `tether replay --verify` reports each row whose referenced row is not there.
    public var references: [Reference]

    /// `table.column` names a row of `referenced` by its `referencedColumn`.
    public struct Reference: Sendable, Hashable {
        public var table: String
        public var column: String
        public var referenced: String
        public var referencedColumn: String

        public init(_ table: String, _ column: String, to referenced: String, _ referencedColumn: String) {
            self.table = table
            self.column = column
            self.referenced = referenced
            self.referencedColumn = referencedColumn
        }
    }

    /// A projection whose rows each belong to one user: the final rows of a user follow from that
    /// user's events alone, in their order, whatever other users' events lie between them.
    public struct BulkRows: Sendable {
        /// The columns written, table by table, in `COPY` order (every column of each table).
        public var columns: [String: [String]]
        /// A new fold of one user's rows; the bulk phase applies that user's events to it one by one,
        /// in log order, then has it write the rows (it never holds a user's events, only their rows),
        /// sealing personal data with `seal`.
        public var fold: @Sendable (_ userId: UUID, _ seal: ReadModelSeal) -> any BulkFold
        /// Event types whose sealed part (personal data, client address) the fold reads nothing of and
        /// that decode without it: the bulk phase leaves it sealed, sparing a decryption an event.
        public var leavingSealed: Set<String>
        /// Event types whose payload the fold reads nothing of (it takes only their place in the log and when
        /// they occurred): the bulk phase does not ask PostgreSQL for their `data`, and the fold is given
        /// them with empty data, neither opened nor upcast. A type here must have no upcaster.
        public var leavingData: Set<String>

        public init(
            columns: [String: [String]], leavingSealed: Set<String> = [], leavingData: Set<String> = [],
            fold: @escaping @Sendable (UUID, ReadModelSeal) -> any BulkFold
        ) {
            self.columns = columns
            self.leavingSealed = leavingSealed
            self.leavingData = leavingData
            self.fold = fold
        }
    }

    public init(
        name: String, tables: [String], categories: [String], upcasters: UpcasterChain = UpcasterChain(),
        statements: (@Sendable ([(event: RecordedEvent, occurredAt: String)], ReadModelSeal) throws -> [PostgresQuery])? = nil,
        bulkRows: BulkRows? = nil, readsMetadata: Bool = true, references: [Reference] = [],
        apply: @escaping @Sendable (RecordedEvent, String, PostgresConnection, ReadModelSeal) async throws -> Void
    ) {
        self.readsMetadata = readsMetadata
        self.references = references
        self.name = name
        self.tables = tables
        self.categories = categories
        self.upcasters = upcasters
        self.statements = statements
        self.bulkRows = bulkRows
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
        upcasters: AccountEventCodec.upcasters, statements: accountStatements,
        bulkRows: BulkRows(columns: AccountRows.columns, leavingSealed: AccountRows.leavingSealed, leavingData: AccountRows.leavingData) {
            AccountRows(userId: $0, seal: $1)
        },
        readsMetadata: false,
        // Written at every sign-in and refresh: their foreign keys went (029_session_writes_without_foreign_keys.sql).
        references: [
            Reference("sessions", "user_id", to: "users", "id"),
            Reference("refresh_tokens", "session_id", to: "sessions", "id"),
        ]
    ) { event, occurredAt, connection, seal in
        for statement in try accountStatements([(event, occurredAt)], seal: seal) {
            try await connection.query(statement)
        }
    }

    /// A batch of account events, each command's events folded as the command itself wrote them
    /// (``AccountProjection/statements(for:userId:at:recordingVersion:)``: the version once, in the
    /// sign-in's own update of the row when there is one). A command is one transaction on one user
    /// stream, so its events lie next to each other in the log: consecutive events of one stream, one
    /// transaction and one time, at consecutive versions. Replayed, a returning sign-in's two events
    /// are three statements instead of five.
    private static func accountStatements(
        _ events: [(event: RecordedEvent, occurredAt: String)], seal: ReadModelSeal
    ) throws -> [PostgresQuery] {
        var statements: [PostgresQuery] = []
        var start = events.startIndex
        while start < events.endIndex {
            let first = events[start]
            var end = start + 1
            while end < events.endIndex, events[end].event.stream == first.event.stream,
                  events[end].event.transactionId == first.event.transactionId, events[end].occurredAt == first.occurredAt,
                  events[end].event.version == events[end - 1].event.version + 1 {
                end += 1
            }
            if let userId = first.event.userId {
                let decoded = try events[start..<end].compactMap { try AccountEventCodec.decode($0.event) }
                statements += try AccountProjection.statements(
                    for: decoded, userId: userId, at: "\(first.occurredAt)::timestamptz", recordingVersion: events[end - 1].event.version,
                    seal: seal)
            }
            start = end
        }
        return statements
    }
}

extension Projection {
    /// Admin keys from `admin-key-<id>` streams (their request events change no table).
    public static let adminKeys = Projection(name: "admin-keys", tables: AdminKeyProjection.tables, categories: ["admin"]) {
        event, occurredAt, connection, _ in
        if let decoded = try AdminEventCodec.decode(event) {
            try await AdminKeyProjection.apply(decoded, at: occurredAt, on: connection)
        }
    }
}

/// One user's rows being rebuilt by the bulk phase of `tether replay` (``Projection/BulkRows``).
public protocol BulkFold {
    /// Applies the user's next event (with the text of its `occurred_at`).
    mutating func apply(_ event: RecordedEvent, occurredAt: String) throws
    /// Appends the rows the events applied so far leave, one `COPY` line per row.
    func write(to copy: inout CopyRows) throws
}
