import Foundation
import TetherCore
import TetherHTTP

/// One line of a user's history: an event with who caused it, from where, and what it did.
public struct HistoryEntry: Sendable, Hashable {
    /// The event's position in the log; pages continue after it.
    public var position: Int64
    public var occurredAt: Date
    public var type: String
    public var stream: String
    /// `v1`, `parse`, `firebase`, `admin`, `cli`, where recorded.
    public var surface: String?
    public var actor: EventActor?
    public var clientIP: String?
    public var userAgent: String?
    /// Groups the events of one command.
    public var commandId: UUID?
    public var summary: EventSummary

    /// The entry for a stored event.
    public init(_ event: RecordedEvent) {
        position = event.position
        occurredAt = event.occurredAt
        type = event.type
        stream = event.stream.rawValue
        surface = event.metadata.surface
        actor = event.metadata.actor
        clientIP = event.metadata.clientIP
        userAgent = event.metadata.userAgent
        commandId = event.metadata.commandId
        summary = EventSummary.describe(type: event.type, data: event.data)
    }

    /// The JSON form (every member always present, `null` when unknown), as documented in the OpenAPI paths.
    public var json: JSONValue {
        [
            "position": .int(Int(position)),
            "time": .string(ISO8601Milliseconds.format(occurredAt)),
            "type": .string(type),
            "stream": .string(stream),
            "surface": surface.map(JSONValue.string) ?? .null,
            "actor": actor.map { ["kind": .string($0.kind), "id": $0.id.map(JSONValue.string) ?? .null] } ?? .null,
            "clientIP": clientIP.map(JSONValue.string) ?? .null,
            "userAgent": userAgent.map(JSONValue.string) ?? .null,
            "commandId": commandId.map { .string($0.uuidString.lowercased()) } ?? .null,
            "summary": .string(summary.text),
            "personalDataErased": .bool(summary.isPersonalDataErased),
        ]
    }
}

/// A page of one user's history, oldest first.
public struct HistoryPage: Sendable, Hashable {
    public var userId: UUID
    public var entries: [HistoryEntry]
    /// Where the next page starts (`after=`); nil when this page reaches the end.
    public var nextAfter: Int64?

    public init(userId: UUID, entries: [HistoryEntry], nextAfter: Int64?) {
        self.userId = userId
        self.entries = entries
        self.nextAfter = nextAfter
    }

    /// `{"userId", "events": [...], "nextAfter"}`.
    public var json: JSONValue {
        [
            "userId": .string(userId.uuidString.lowercased()),
            "events": .array(entries.map(\.json)),
            "nextAfter": nextAfter.map { .int(Int($0)) } ?? .null,
        ]
    }
}
