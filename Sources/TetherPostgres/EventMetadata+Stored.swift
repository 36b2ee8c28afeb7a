import Foundation
import TetherCore
import TetherJOSE

extension EventMetadata {
    /// The metadata of a stored event, from its `metadata` column.
    ///
    /// Read with the JOSE parser: every event read (a history page, a replay batch) decodes its
    /// metadata, and `JSONDecoder` cost more than the rest of the row. A document of another
    /// shape than Tether writes (a member of the wrong type) goes to `JSONDecoder`, whose
    /// answer, or error, stays the reference.
    static func decodeStored(_ data: Data) throws -> EventMetadata {
        if let metadata = decodeWritten(data) { return metadata }
        return try PostgresJSON(data: data).decode(EventMetadata.self)
    }

    /// The metadata, when every member it knows has the type Tether writes; unknown members are
    /// skipped and `null` reads as absent, as the `Codable` conformance does.
    private static func decodeWritten(_ data: Data) -> EventMetadata? {
        guard let object = try? JOSEObject(parsing: data) else { return nil }
        var metadata = EventMetadata()
        for (name, value) in object.members {
            if value == .null { continue }
            switch name {
            case "commandId", "correlationId", "causationId":
                guard let text = value.stringValue, let id = UUID(text: text) else { return nil }
                switch name {
                case "commandId": metadata.commandId = id
                case "correlationId": metadata.correlationId = id
                default: metadata.causationId = id
                }
            case "clientIP", "userAgent", "surface":
                guard let text = value.stringValue else { return nil }
                switch name {
                case "clientIP": metadata.clientIP = text
                case "userAgent": metadata.userAgent = text
                default: metadata.surface = text
                }
            case "actor":
                guard let actor = value.objectValue, let kind = actor["kind"]?.stringValue else { return nil }
                let id = actor["id"]
                guard id == nil || id == .null || id?.stringValue != nil else { return nil }
                metadata.actor = EventActor(kind: kind, id: id?.stringValue)
            default:
                continue
            }
        }
        return metadata
    }
}
