import Foundation
import TetherCore
import TetherJOSE
import TetherHTTP
import TetherPostgres

/// Reads a user's history: every event whose `user_id` is theirs, from every stream, in position order.
///
/// That includes their own stream and the admin-key streams' records of who
/// looked at them or acted on them. Each query's duration goes to `latency`
/// (`tether_history_query_duration_seconds` on `/metrics`).
public struct UserHistory: Sendable {
    /// Events per page when the caller does not say.
    public static let defaultPageSize = 50
    /// The largest page.
    public static let maxPageSize = 500
    /// The fewest entries a page opens or writes out on a core of its own (``SideBySide``): below about
    /// 100, handing over costs more than it saves.
    public static let minimumPart = 100

    let store: PostgresEventStore
    let latency: Histogram?
    /// Where ``startWriting(of:from:limit:replicaLagSeconds:)`` writes a page's text.
    let writingQueue: DispatchQueue

    public init(database: PostgresClient, latency: Histogram? = nil, writingOn queue: DispatchQueue = .global(qos: .userInitiated)) {
        self.store = PostgresEventStore(client: database, upcasters: AccountEventCodec.upcasters)
        self.latency = latency
        self.writingQueue = queue
    }

    /// Registers `tether_history_query_duration_seconds` in `registry`.
    public static func latencyHistogram(in registry: MetricsRegistry) -> Histogram {
        registry.histogram(
            "tether_history_query_duration_seconds", help: "Duration of one page of a user's history, from its read to its written text.",
            buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5])
    }

    /// Up to `limit` events after position `after`; with `since`, only those that occurred then or later.
    public func page(of userId: UUID, after: Int64 = 0, since: Date? = nil, limit: Int = defaultPageSize) async throws -> HistoryPage {
        let statements = pageStatements(of: userId, after: after, since: since, limit: limit)
        // The rows decoded where they arrive, on the connection's thread.
        return try await timed {
            try await store.client.withConnection { connection in
                try await connection.run { [self] job in try page(of: userId, from: try job.pipeline(statements)[...], limit: limit) }
            }
        }
    }

    /// Runs `read`, a query of a page (alone or with others), timed into `latency`.
    func timed<T>(_ read: () async throws -> T) async throws -> T {
        if let latency { try await latency.time(body: read) } else { try await read() }
    }

    /// The statements that read the page ``page(of:after:since:limit:)`` answers, for a caller that sends
    /// them with others (the request's own record); ``page(of:from:limit:)`` reads their rows.
    public func pageStatements(of userId: UUID, after: Int64 = 0, since: Date? = nil, limit: Int = defaultPageSize) -> [PostgresQuery] {
        precondition((1...Self.maxPageSize).contains(limit), "a history page holds 1 to \(Self.maxPageSize) events")
        // One more than asked says whether another page follows.
        return PostgresEventStore.userEventsStatements(
            userId, after: after, since: since, limit: limit + 1, limitIsUsual: limit == Self.defaultPageSize || limit == Self.maxPageSize)
    }

    /// The page of the rows of ``pageStatements(of:after:since:limit:)``.
    public func page(of userId: UUID, from rows: ArraySlice<PostgresRows>, limit: Int) throws -> HistoryPage {
        // The row past the limit only says that another page follows: it is not decoded.
        let count = PostgresEventStore.userEventRows(rows).count
        // A large page is opened in parts side by side: the reader waits for the part of one core.
        let entries = try SideBySide.map(min(count, limit), minimumPart: Self.minimumPart) { [store] part in
            try store.decodeUserEventsParsed(rows, in: part, payloadsOnly: true).map { HistoryEntry($0.event, payload: $0.payload) }
        }
        return HistoryPage(userId: userId, entries: entries, nextAfter: count > limit ? entries.last?.position : nil)
    }

    /// How many entries the rows of ``pageStatements(of:after:since:limit:)`` make a page of `limit` hold,
    /// without opening any: the row past the limit only says that another page follows.
    public static func entryCount(in rows: ArraySlice<PostgresRows>, limit: Int) -> Int {
        min(PostgresEventStore.userEventRows(rows).count, limit)
    }

    /// The JSON text of the page of the rows of ``pageStatements(of:after:since:limit:)``, as
    /// ``HistoryPage/jsonBytes()`` writes it: a large page in parts side by side, each part's entries
    /// opened and written out on one core, with no page of entries made first.
    public func text(of userId: UUID, from rows: ArraySlice<PostgresRows>, limit: Int, replicaLagSeconds: Double? = nil) throws -> [UInt8] {
        let count = PostgresEventStore.userEventRows(rows).count
        let parts = try SideBySide.map(min(count, limit), minimumPart: Self.minimumPart) { [store] part in
            var text: [UInt8] = []
            text.reserveCapacity(400 * part.count)
            var last: Int64?
            // Each entry written out as its event is opened: no array of events or of entries.
            try store.forEachUserEvent(rows, in: part, payloadsOnly: true) { event, payload in
                if last != nil || part.lowerBound > 0 { text.append(UInt8(ascii: ",")) }
                HistoryEntry(event, payload: payload).write(to: &text)
                last = event.position
            }
            return [(text: text, last: last)]
        }
        let page = HistoryPage(userId: userId, entries: [], nextAfter: count > limit ? parts.last?.last : nil, replicaLagSeconds: replicaLagSeconds)
        return try page.jsonBytes(eventsText: parts.map(\.text))
    }

    /// Starts ``text(of:from:limit:replicaLagSeconds:)`` on a dispatch thread and returns at once: a caller that
    /// commits before it answers (the support API's record of the read) commits meanwhile, and no lock or
    /// connection is held while the page is opened and written out.
    public func startWriting(
        of userId: UUID, from rows: ArraySlice<PostgresRows>, limit: Int, replicaLagSeconds: Double? = nil
    ) -> BlockingWork.Pending<[UInt8]> {
        BlockingWork.start(on: writingQueue) { [self] in try text(of: userId, from: rows, limit: limit, replicaLagSeconds: replicaLagSeconds) }
    }

    /// The whole history (page after page of the largest size).
    public func all(of userId: UUID, since: Date? = nil) async throws -> HistoryPage {
        var entries: [HistoryEntry] = []
        var after: Int64 = 0
        while true {
            let page = try await page(of: userId, after: after, since: since, limit: Self.maxPageSize)
            entries += page.entries
            guard let next = page.nextAfter else { break }
            after = next
        }
        return HistoryPage(userId: userId, entries: entries, nextAfter: nil)
    }
}
