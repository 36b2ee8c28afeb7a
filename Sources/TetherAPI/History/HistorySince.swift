import Foundation
import TetherCore

/// The `--since` of `tether history`: a date, a date and time, or a span back from now.
public enum HistorySince {
    /// `2026-11-29` (midnight UTC), `2026-11-29T13:00:00Z` (any ISO 8601 date and time with a zone),
    /// or `90m`, `24h`, `7d` (that long before `now`; `s` for seconds).
    public static func parse(_ text: String, now: Date = Date()) throws(AdminError) -> Date {
        let text = text.trimmingCharacters(in: .whitespaces)
        if let span = seconds(inSpan: text) {
            return now.addingTimeInterval(-span)
        }
        if let date = ISO8601Milliseconds.parse(text) {
            return date
        }
        if let day = try? Date.ISO8601FormatStyle().year().month().day().parse(text) {
            return day
        }
        throw .invalidRequest("--since takes a date (2026-11-29), a date and time (2026-11-29T13:00:00Z) or a span (90m, 24h, 7d), not \"\(text)\"")
    }

    /// The seconds of a span such as `90m`, `24h`, `30d` (`s` for seconds); nil for anything else.
    public static func seconds(inSpan text: String) -> TimeInterval? {
        let text = text.trimmingCharacters(in: .whitespaces)
        guard let unit = text.last, let seconds = ["s": 1.0, "m": 60, "h": 3600, "d": 86400][unit],
              let count = Int(text.dropLast()), count >= 0 else { return nil }
        return Double(count) * seconds
    }
}
