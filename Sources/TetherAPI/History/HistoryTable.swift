import Foundation
import TetherCore

/// `tether history`'s table: one aligned line per event, oldest first.
public enum HistoryTable {
    /// The column titles, in order; the summary comes last and is not padded.
    public static let columns = ["TIME", "EVENT", "SURFACE", "ACTOR", "CLIENT IP", "SUMMARY"]

    /// The table, then a closing line that counts the events and says whether personal data was erased.
    public static func render(_ page: HistoryPage) -> String {
        let rows = page.entries.map { entry in
            [
                ISO8601Milliseconds.format(entry.occurredAt), entry.type, entry.surface ?? "-",
                actor(entry.actor, historyOf: page.userId), entry.clientIP ?? "-", entry.summary.text,
            ]
        }
        let user = page.userId.lowercasedText
        var closing = page.entries.count == 1 ? "1 event of user \(user)" : "\(page.entries.count) events of user \(user)"
        if page.entries.contains(where: \.summary.isPersonalDataErased) {
            closing += "; personal data has been erased where it shows \(EventSummary.erased)"
        }
        return TextTable.render(columns: columns, rows: rows) + closing + "\n"
    }

    /// `self` for the user themselves, `kind:id` otherwise, with ids that are UUIDs cut to eight characters.
    static func actor(_ actor: EventActor?, historyOf userId: UUID) -> String {
        guard let actor else { return "-" }
        guard let id = actor.id else { return actor.kind }
        if actor.kind == "user", UUID(text: id) == userId { return "self" }
        return actor.kind + ":" + (UUID(text: id) == nil ? id : String(id.prefix(8)))
    }
}
