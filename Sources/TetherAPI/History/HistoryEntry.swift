import Foundation
import TetherCore
import TetherHTTP
import TetherJOSE

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
        self.init(event, payload: nil)
    }

    /// The entry for a stored event; `payload`, when given, is its `data` already parsed.
    public init(_ event: RecordedEvent, payload: JOSEObject?) {
        position = event.position
        occurredAt = event.occurredAt
        type = event.type
        stream = event.stream.rawValue
        surface = event.metadata.surface
        actor = event.metadata.actor
        clientIP = event.metadata.clientIP
        userAgent = event.metadata.userAgent
        commandId = event.metadata.commandId
        summary = payload.map { EventSummary.describe(type: event.type, payload: $0) } ?? EventSummary.describe(type: event.type, data: event.data)
    }

    /// The JSON form (every member always present, `null` when unknown), as documented in the OpenAPI paths:
    /// the text ``write(to:)`` writes, read back, so that the two cannot differ.
    public var json: JSONValue {
        var text: [UInt8] = []
        write(to: &text)
        guard let value = try? CompactJSONDecoder().decode(JSONValue.self, from: text) else {
            preconditionFailure("a history entry wrote text that is not JSON: \(String(decoding: text, as: UTF8.self))")
        }
        return value
    }

    /// Appends the entry's JSON text: members in UTF-8 order of their names, as ``JSONValue/jsonBytes()``
    /// writes an object, each written where it is read, with no tree of them made first (a page of
    /// 500 entries is the support API's largest answer).
    func write(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"actor":"#, to: &output)
        if let actor {
            JSONText.writeVerbatim(#"{"id":"#, to: &output)
            JSONText.writeString(actor.id, to: &output)
            JSONText.writeVerbatim(#","kind":"#, to: &output)
            JSONText.writeString(actor.kind, to: &output)
            output.append(UInt8(ascii: "}"))
        } else {
            JSONText.writeVerbatim("null", to: &output)
        }
        JSONText.writeVerbatim(#","clientIP":"#, to: &output)
        JSONText.writeString(clientIP, to: &output)
        JSONText.writeVerbatim(#","commandId":"#, to: &output)
        if let commandId {
            JSONText.writeLowercased(commandId, to: &output)
        } else {
            JSONText.writeVerbatim("null", to: &output)
        }
        JSONText.writeVerbatim(#","personalDataErased":"#, to: &output)
        JSONText.writeBool(summary.isPersonalDataErased, to: &output)
        JSONText.writeVerbatim(#","position":"#, to: &output)
        output += String(position).utf8
        JSONText.writeVerbatim(#","stream":"#, to: &output)
        JSONText.writeString(stream, to: &output)
        JSONText.writeVerbatim(#","summary":"#, to: &output)
        JSONText.writeString(summary.text, to: &output)
        JSONText.writeVerbatim(#","surface":"#, to: &output)
        JSONText.writeString(surface, to: &output)
        JSONText.writeVerbatim(#","time":""#, to: &output)
        ISO8601Milliseconds.write(occurredAt, to: &output)
        JSONText.writeVerbatim(#"","type":"#, to: &output)
        JSONText.writeString(type, to: &output)
        JSONText.writeVerbatim(#","userAgent":"#, to: &output)
        JSONText.writeString(userAgent, to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

/// A page of one user's history, oldest first.
public struct HistoryPage: Sendable, Hashable {
    public var userId: UUID
    public var entries: [HistoryEntry]
    /// Where the next page starts (`after=`); nil when this page reaches the end.
    public var nextAfter: Int64?
    /// When a read replica answered (`TETHER_DATABASE_READ_URL`): how far behind the primary it may be, in seconds.
    public var replicaLagSeconds: Double?

    public init(userId: UUID, entries: [HistoryEntry], nextAfter: Int64?, replicaLagSeconds: Double? = nil) {
        self.userId = userId
        self.entries = entries
        self.nextAfter = nextAfter
        self.replicaLagSeconds = replicaLagSeconds
    }

    /// `{"userId", "events": [...], "nextAfter"}`, and `replicaLagSeconds` when a replica answered.
    public var json: JSONValue {
        .object(Dictionary(uniqueKeysWithValues: members(events: .array(entries.map(\.json))).map { ($0.name, $0.value) }))
    }

    /// The text of `json.jsonBytes()`, written entry by entry without building the page's tree first
    /// (a page of 500 entries is the support API's largest answer).
    public func jsonBytes() throws -> [UInt8] {
        // A large page is written in parts side by side, each part's text then appended in order.
        let entries = entries
        let parts = try SideBySide.map(entries.count, minimumPart: UserHistory.minimumPart) { part in
            [Self.text(of: entries[part], first: part.lowerBound == 0)]
        }
        return try jsonBytes(eventsText: parts)
    }

    /// The text of entries of `events` (after a comma unless they are the `first`).
    static func text(of entries: some Collection<HistoryEntry>, first: Bool) -> [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(400 * entries.count)
        for (index, entry) in entries.enumerated() {
            if index > 0 || !first { text.append(UInt8(ascii: ",")) }
            entry.write(to: &text)
        }
        return text
    }

    /// ``jsonBytes()`` with `events` holding the texts of `parts` (of ``text(of:first:)``) in order, not `entries`.
    func jsonBytes(eventsText parts: [[UInt8]]) throws -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(parts.reduce(100) { $0 + $1.count })
        // `events` comes first in name order; its entries are written straight into the output.
        JSONText.writeVerbatim(#"{"events":["#, to: &output)
        for part in parts { output += part }
        output.append(UInt8(ascii: "]"))
        for member in members(events: .null).dropFirst() {
            output.append(UInt8(ascii: ","))
            JSONText.writeString(member.name, to: &output)
            output.append(UInt8(ascii: ":"))
            try member.value.writeJSON(to: &output)
        }
        output.append(UInt8(ascii: "}"))
        return output
    }

    /// The page's members in UTF-8 order of their names, with `events` as given.
    private func members(events: JSONValue) -> [(name: String, value: JSONValue)] {
        [
            ("events", events),
            ("nextAfter", nextAfter.map { .int(Int($0)) } ?? .null),
        ] + (replicaLagSeconds.map { [("replicaLagSeconds", JSONValue.double($0))] } ?? []) + [
            ("userId", .string(userId.lowercasedText)),
        ]
    }
}
