import Foundation
import TetherHTTP

/// The query parameters of one admin route, checked against the names it accepts.
///
/// An unknown name is refused rather than ignored, so that a misspelt filter
/// (`emial=`) cannot silently widen a search. An empty value (or one of spaces)
/// counts as absent only for the names in `emptyAsAbsent`, those whose schema in
/// `schema/openapi.yaml` admits an empty value (a search form's fields, the feed's
/// filters); any other name given empty is refused (`after=` of a search is no
/// user id, `limit=` no number).
struct AdminQuery {
    private let values: [String: String]

    init(_ request: HTTPRequest, accepting names: Set<String>, emptyAsAbsent: Set<String> = []) throws(AdminError) {
        if let unknown = request.queryItems.first(where: { !names.contains($0.name) }) {
            let accepted = names.isEmpty ? "takes no query parameters" : "accepts " + names.sorted().joined(separator: ", ")
            throw .invalidRequest("Unknown query parameter '\(unknown.name)'; this route \(accepted).")
        }
        var values: [String: String] = [:]
        for item in request.queryItems {
            let value = String(item.value.trimmingWhiteSpace())
            guard !value.isEmpty else {
                guard emptyAsAbsent.contains(item.name) else {
                    throw .invalidRequest("The query parameter '\(item.name)' is empty; leave it out instead.")
                }
                continue
            }
            guard values[item.name] == nil else { throw .invalidRequest("The query parameter '\(item.name)' is given twice.") }
            // No filter, term or cursor holds one, and PostgreSQL's text cannot hold a NUL.
            guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw .invalidRequest("The query parameter '\(item.name)' holds a control character.")
            }
            values[item.name] = value
        }
        self.values = values
    }

    subscript(_ name: String) -> String? { values[name] }

    /// `limit`: 1 to `maximum`, `standard` when absent.
    func limit(standard: Int, maximum: Int) throws(AdminError) -> Int {
        guard let text = values["limit"] else { return standard }
        guard let limit = Int(text), (1...maximum).contains(limit) else {
            throw .invalidRequest("limit must be a whole number from 1 to \(maximum).")
        }
        return limit
    }

    /// A history cursor: a log position, 0 or more.
    func position(_ name: String) throws(AdminError) -> Int64? {
        guard let text = values[name] else { return nil }
        // Digits only, as nextAfter writes it (Int64 also reads "+5").
        guard text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let position = Int64(text) else {
            throw .invalidRequest("\(name) must be an event position (a whole number, 0 or more) from a previous page's nextAfter.")
        }
        return position
    }

    /// A user id.
    func userID(_ name: String) throws(AdminError) -> UUID? {
        guard let text = values[name] else { return nil }
        guard let id = UUID(text: text) else { throw .invalidRequest("\(name) must be a user id (a UUID).") }
        return id
    }
}
