import Foundation

/// The name of one event stream, such as `user-<uuid>`.
public struct StreamName: Hashable, Sendable, CustomStringConvertible {
    /// The stream's name as stored in the log.
    public let rawValue: String

    /// Wraps a stream name; names are `category-id`, for example `user-…` or `signin-…`.
    public init(_ rawValue: String) {
        self.rawValue = rawValue
    }

    /// The stream of everything that happens to one user.
    public static func user(_ id: UUID) -> StreamName {
        StreamName("user-\(id.lowercasedText)")
    }

    /// The name before the first `-` (the whole name when it has none), as `split_part(stream, '-', 1)` gives it:
    /// found among the bytes, not the characters (a `-` with a combining mark after it still splits, as there),
    /// and without breaking the name into characters, which the log reader paid for on every row.
    public var category: Substring {
        rawValue.utf8.firstIndex(of: UInt8(ascii: "-")).map { rawValue[..<$0] } ?? rawValue[...]
    }

    public var description: String { rawValue }
}

/// The version a writer expects a stream to be at before its append.
///
/// Versions count from 1: a stream holding three events is at version 3, and
/// a stream that does not exist yet is at version 0.
public enum ExpectedVersion: Sendable, Hashable, CustomStringConvertible {
    /// Append whatever the stream holds (no concurrency check).
    case any
    /// The stream must not exist yet.
    case noStream
    /// The stream must be exactly at this version.
    case exact(Int)

    /// Whether a stream currently at `actual` satisfies this expectation.
    public func isSatisfied(by actual: Int) -> Bool {
        switch self {
        case .any: true
        case .noStream: actual == 0
        case .exact(let version): actual == version
        }
    }

    public var description: String {
        switch self {
        case .any: "any"
        case .noStream: "no stream"
        case .exact(let version): "\(version)"
        }
    }
}

/// Who caused an event.
public struct EventActor: Codable, Sendable, Hashable {
    /// `user`, `admin` (an admin key), `operator` (a person at the command line), `system` or `anonymous`.
    public var kind: String
    /// The user id, admin key id, operator login, or system component name.
    public var id: String?

    public init(kind: String, id: String? = nil) {
        self.kind = kind
        self.id = id
    }

    /// Tether itself (migrations, replay, seeds).
    public static func system(_ component: String) -> EventActor { EventActor(kind: "system", id: component) }
    /// A signed-in user acting on their own account.
    public static func user(_ id: UUID) -> EventActor { EventActor(kind: "user", id: id.lowercasedText) }
    /// A caller that has not proven who it is yet (sign-in attempts).
    public static let anonymous = EventActor(kind: "anonymous")
}

/// What is recorded beside every event: where the command came from and why.
public struct EventMetadata: Codable, Sendable, Hashable {
    /// The command that produced the event (the `Idempotency-Key`, or a generated id).
    public var commandId: UUID?
    /// Groups the events of one user-visible operation across streams.
    public var correlationId: UUID?
    /// The event or command that directly caused this one.
    public var causationId: UUID?
    /// Who acted.
    public var actor: EventActor?
    /// The client's IP address, where known.
    public var clientIP: String?
    /// The client's `User-Agent`, where known: its first ``maxUserAgentBytes`` bytes.
    public var userAgent: String?
    /// The surface the command arrived on: `v1`, `parse`, `firebase`, `cli`.
    public var surface: String?

    public init(
        commandId: UUID? = nil, correlationId: UUID? = nil, causationId: UUID? = nil,
        actor: EventActor? = nil, clientIP: String? = nil, userAgent: String? = nil, surface: String? = nil
    ) {
        self.commandId = commandId
        self.correlationId = correlationId
        self.causationId = causationId
        self.actor = actor
        self.clientIP = clientIP
        self.userAgent = userAgent.map(Self.kept)
        self.surface = surface
    }

    /// The most of a `User-Agent` an event keeps. Every event of a request records it, refused sign-ins and
    /// codes among them: a client's header of tens of kilobytes would otherwise be stored that many times.
    public static let maxUserAgentBytes = 512

    /// `userAgent` cut to ``maxUserAgentBytes`` on a character's boundary.
    static func kept(_ userAgent: String) -> String {
        guard userAgent.utf8.count > maxUserAgentBytes else { return userAgent }
        var bytes = 0
        var end = userAgent.startIndex
        for index in userAgent.indices {
            let next = userAgent.index(after: index)
            bytes += userAgent.utf8.distance(from: index, to: next)
            guard bytes <= maxUserAgentBytes else { break }
            end = next
        }
        return String(userAgent[..<end])
    }
}

/// An event about to be appended.
public struct NewEvent: Sendable, Hashable {
    /// Globally unique id; appending an event whose id is already stored is a no-op
    /// that answers the first append's result (idempotency).
    public var id: UUID
    /// The event's type, such as `IdentityLinked`.
    public var type: String
    /// The version of the payload's shape for this type.
    public var schema: Int
    /// The payload as a JSON object.
    public var data: Data
    /// The user the event is about, if any (for per-user queries and erasure).
    public var userId: UUID?

    public init(id: UUID = UUID.random(), type: String, schema: Int = 1, data: Data, userId: UUID? = nil) {
        self.id = id
        self.type = type
        self.schema = schema
        self.data = data
        self.userId = userId
    }
}

/// Where a reader of the whole log has got to.
///
/// The log is read in `(transactionId, position)` order, not in `position`
/// order alone: positions are taken at insert time but become visible at commit,
/// so a reader that went by position could pass a position whose transaction
/// commits later. Ordering by transaction id and reading only transactions older
/// than the oldest one still running never skips anything.
public struct LogCheckpoint: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The `xid8` of the transaction that wrote the last event read.
    public var transactionId: UInt64
    /// The position of the last event read.
    public var position: Int64

    public init(transactionId: UInt64, position: Int64) {
        self.transactionId = transactionId
        self.position = position
    }

    /// Before the first event.
    public static let start = LogCheckpoint(transactionId: 0, position: 0)

    public static func < (lhs: LogCheckpoint, rhs: LogCheckpoint) -> Bool {
        (lhs.transactionId, lhs.position) < (rhs.transactionId, rhs.position)
    }

    public var description: String { "\(transactionId)/\(position)" }
}

/// An event as stored in the log.
public struct RecordedEvent: Sendable, Hashable {
    /// Global position, assigned at insert.
    public var position: Int64
    /// The transaction that wrote it.
    public var transactionId: UInt64
    public var stream: StreamName
    /// Version within the stream, counting from 1.
    public var version: Int
    public var id: UUID
    public var type: String
    /// The payload's schema after upcasting.
    public var schema: Int
    /// The payload as a JSON object (after upcasting).
    public var data: Data
    public var metadata: EventMetadata
    public var userId: UUID?
    public var occurredAt: Date

    public init(
        position: Int64, transactionId: UInt64, stream: StreamName, version: Int, id: UUID,
        type: String, schema: Int, data: Data, metadata: EventMetadata, userId: UUID?, occurredAt: Date
    ) {
        self.position = position
        self.transactionId = transactionId
        self.stream = stream
        self.version = version
        self.id = id
        self.type = type
        self.schema = schema
        self.data = data
        self.metadata = metadata
        self.userId = userId
        self.occurredAt = occurredAt
    }

    /// Where a reader stands after reading this event.
    public var checkpoint: LogCheckpoint { LogCheckpoint(transactionId: transactionId, position: position) }
}

/// The outcome of an append.
public struct AppendResult: Sendable, Hashable {
    /// Position of the first event written (or found, for a repeated append).
    public var firstPosition: Int64
    /// Position of the last event written.
    public var lastPosition: Int64
    /// The stream's version after the append; pass it as the next expected version.
    public var streamVersion: Int
    /// True when these events were already stored and nothing was written.
    public var wasAlreadyAppended: Bool

    public init(firstPosition: Int64, lastPosition: Int64, streamVersion: Int, wasAlreadyAppended: Bool) {
        self.firstPosition = firstPosition
        self.lastPosition = lastPosition
        self.streamVersion = streamVersion
        self.wasAlreadyAppended = wasAlreadyAppended
    }
}

/// An append found the stream at another version than the writer expected.
///
/// Writers re-run their decision on fresh state and try again (bounded).
public struct WrongExpectedVersion: Error, Sendable, Hashable, CustomStringConvertible {
    public var stream: StreamName
    public var expected: ExpectedVersion
    /// The version the stream was actually at.
    public var actual: Int

    public init(stream: StreamName, expected: ExpectedVersion, actual: Int) {
        self.stream = stream
        self.expected = expected
        self.actual = actual
    }

    public var description: String {
        "stream \(stream) is at version \(actual), expected \(expected)"
    }
}

/// Rewrites events stored under an old payload schema into today's shape when they are read.
///
/// Stored events are never rewritten in place; upcasting happens on every read.
public protocol EventUpcaster: Sendable {
    /// Event type this upcaster handles.
    var eventType: String { get }
    /// The schema it reads; it returns the payload at `fromSchema + 1`.
    var fromSchema: Int { get }
    /// Returns the payload in the next schema.
    func upcast(_ data: Data, metadata: EventMetadata) throws -> Data
}

/// Applies upcasters in sequence until an event reaches its newest schema.
public struct UpcasterChain: Sendable {
    private let upcasters: [String: [Int: any EventUpcaster]]

    public init(_ upcasters: [any EventUpcaster] = []) {
        var table: [String: [Int: any EventUpcaster]] = [:]
        for upcaster in upcasters {
            table[upcaster.eventType, default: [:]][upcaster.fromSchema] = upcaster
        }
        self.upcasters = table
    }

    /// Whether ``apply(to:)`` changes `event`: there is an upcaster for its type and schema.
    public func upcasts(_ event: RecordedEvent) -> Bool {
        upcasters[event.type]?[event.schema] != nil
    }

    /// Whether events of `type` have an upcaster from some schema.
    public func upcasts(type: String) -> Bool {
        upcasters[type] != nil
    }

    /// Upcasts `event` step by step; an event with no upcaster for its schema is returned unchanged.
    public func apply(to event: RecordedEvent) throws -> RecordedEvent {
        guard let steps = upcasters[event.type] else { return event }
        var event = event
        while let step = steps[event.schema] {
            event.data = try step.upcast(event.data, metadata: event.metadata)
            event.schema += 1
        }
        return event
    }
}
