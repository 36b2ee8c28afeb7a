import Foundation
import Synchronization
import TetherCore
import TetherPostgres

/// Backends' reader of the log: pages of public events (``PublicEvent``) after a cursor, gap-safe and
/// in log order, optionally waiting for new ones. The event feed and every webhook read through it.
public struct EventFeed: Sendable {
    /// A position in the log as backends hold it: `<tx>-<position>` of the last event looked at.
    public struct Cursor: Sendable, Hashable, CustomStringConvertible {
        public var checkpoint: LogCheckpoint

        public init(_ checkpoint: LogCheckpoint) {
            self.checkpoint = checkpoint
        }

        /// Parses `<tx>-<position>`; `0` is the start of the log.
        public init?(parsing text: String) {
            if text == "0" {
                checkpoint = .start
                return
            }
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            // Digits only: `+5-+3` is no cursor this feed gave (and a `+` in a query is a space).
            guard parts.count == 2, parts.allSatisfy({ $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
                  let tx = UInt64(parts[0]), let position = Int64(parts[1]) else { return nil }
            checkpoint = LogCheckpoint(transactionId: tx, position: position)
        }

        public var description: String { checkpoint == .start ? "0" : "\(checkpoint.transactionId)-\(checkpoint.position)" }

        /// Why a cursor past the log's newest event is refused.
        public static let pastTheLog = "names a point past the newest event of this log (a cursor of another database?)"
    }

    /// A page: the public events and where to read on.
    public struct Page: Sendable {
        /// One public event and the place in the log of the event behind it.
        public struct Item: Sendable {
            public var json: JSONValue
            public var checkpoint: LogCheckpoint
        }

        public var items: [Item]
        public var next: Cursor

        public var events: [JSONValue] { items.map(\.json) }
    }

    /// The most events a page holds.
    public static let maxPageSize = 500
    /// The longest a request may wait for new events.
    public static let maxWait: Duration = .seconds(30)

    /// Whether readers may still wait: a stopping server ends its readers' waits.
    public final class Waits: Sendable {
        private let ended = Atomic<Bool>(false)

        public init() {}

        /// Answers every wait under way at its next look, with what it has, and every later one at once: a
        /// stopping server's readers then ask another instance instead of holding its stop for up to ``maxWait``.
        public func end() { ended.store(true, ordering: .relaxed) }

        var haveEnded: Bool { ended.load(ordering: .relaxed) }
    }

    let store: PostgresEventStore
    /// How often a waiting reader looks again.
    let pollInterval: Duration
    let waits: Waits

    public init(store: PostgresEventStore, pollInterval: Duration = .milliseconds(200), waits: Waits = Waits()) {
        self.store = store
        self.pollInterval = pollInterval
        self.waits = waits
    }

    /// The internal types behind public `types` (every public type when nil); nil for an unknown name.
    /// A name may end in `*` (`user.*`, or `*` alone) to take every type it starts.
    public static func internalTypes(for types: [String]?) -> [String]? {
        guard let types else { return PublicEvent.internalTypes }
        var wanted: [String] = []
        for type in types {
            // A prefix is a whole group (`user.*`) or everything (`*`): `user*` would also take a `users.` group.
            guard !type.hasSuffix("*") || type == "*" || type.hasSuffix(".*") else { return nil }
            let prefix = type.hasSuffix("*") ? String(type.dropLast()) : nil
            let matching = PublicEvent.internalTypes.filter { internalType in
                guard let publicType = PublicEvent.type(of: internalType) else { return false }
                return prefix.map { publicType.hasPrefix($0) } ?? (publicType == type)
            }
            guard !matching.isEmpty else { return nil }
            wanted += matching.filter { !wanted.contains($0) }
        }
        return wanted
    }

    /// The events after `cursor` of the internal `types` (``internalTypes(for:)``), of `userId` when given.
    /// With `wait`, an empty page is asked again until an event comes, the wait is over or the waits end
    /// (``Waits/end()``).
    public func page(
        after cursor: Cursor, types: [String], userId: UUID?, limit: Int, personal: Bool, wait: Duration = .zero
    ) async throws -> Page {
        let deadline = ContinuousClock.now.advanced(by: min(wait, Self.maxWait))
        var checkpoint = cursor.checkpoint
        while true {
            let (events, next) = try await store.follow(after: checkpoint, types: types, userId: userId, limit: limit)
            checkpoint = next
            if !events.isEmpty || ContinuousClock.now >= deadline || waits.haveEnded {
                let items = events.compactMap { event in
                    PublicEvent.json(event, personal: personal).map {
                        Page.Item(json: $0, checkpoint: LogCheckpoint(transactionId: event.transactionId, position: event.position))
                    }
                }
                return Page(items: items, next: Cursor(next))
            }
            try await Task.sleep(for: pollInterval)
        }
    }
}
