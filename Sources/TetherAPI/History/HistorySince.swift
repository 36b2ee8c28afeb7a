import Foundation
import TetherCore

/// The `--since` of `tether history`: a date, a date and time, or a span back from now.
public enum HistorySince {
    /// `2026-11-29` (midnight UTC), `2026-11-29T13:00:00Z` (any ISO 8601 date and time with a zone),
    /// or `90m`, `24h`, `7d` (that long before `now`; `s` for seconds).
    public static func parse(_ text: String, now: Date = Date()) throws(AdminError) -> Date {
        let text = text.trimmingCharacters(in: .whitespaces)
        let date: Date
        if let span = seconds(inSpan: text) {
            date = now.addingTimeInterval(-span)
        } else if let parsed = ISO8601Milliseconds.parse(text) ?? (try? Date.ISO8601FormatStyle().year().month().day().parse(text)),
                  isCalendarDate(text, parsed) {
            date = parsed
        } else {
            throw .invalidRequest(
                "--since takes a date (2026-11-29), a date and time (2026-11-29T13:00:00Z) or a span of up to 100 years (90m, 24h, 7d), not \"\(text)\"")
        }
        // Nothing here happened before 1970, and a time the database cannot hold is no question to ask.
        guard date >= earliest else { throw .invalidRequest("--since must be 1970-01-01 or later, not \"\(text)\"") }
        return date
    }

    /// The earliest `--since`.
    static let earliest = Date(timeIntervalSince1970: 0)

    /// Whether `text`'s calendar date is the one `date` has: `2026-02-30` or `T25:00` parse by rolling over.
    private static func isCalendarDate(_ text: String, _ date: Date) -> Bool {
        let day = text.prefix(10)
        // The zone as written: `+05:30`, `+0530`, `+05`, or `Z` (none for a date alone).
        guard day.count == 10, let offset = text.dropFirst(10).range(of: "[+-][0-9]{2}(:?[0-9]{2})?$", options: .regularExpression)
                .map({ text.dropFirst(10)[$0] }) ?? (text.count == 10 || text.hasSuffix("Z") ? "+00:00" : nil),
              let hours = Int(offset.dropFirst().prefix(2)), let minutes = offset.count > 3 ? Int(offset.suffix(2)) : 0
        else { return false }
        let seconds = (hours * 3600 + minutes * 60) * (offset.hasPrefix("-") ? -1 : 1)
        let local = date.addingTimeInterval(TimeInterval(seconds))
        guard local.formatted(Date.ISO8601FormatStyle().year().month().day()) == day else { return false }
        // A time of day must name itself too (T25:00:00Z rolls into the next day's first hour).
        guard text.count > 10 else { return true }
        let time = text.dropFirst(11).prefix(8)
        return local.formatted(Date.ISO8601FormatStyle().time(includingFractionalSeconds: false)).hasPrefix(time)
    }

    /// The seconds of a span such as `90m`, `24h`, `30d` (`s` for seconds), of at most about a hundred years;
    /// nil for anything else.
    public static func seconds(inSpan text: String) -> TimeInterval? {
        let text = text.trimmingCharacters(in: .whitespaces)
        guard let unit = text.last, let seconds = ["s": 1.0, "m": 60, "h": 3600, "d": 86400][unit],
              let count = Int(text.dropLast()), count >= 0, Double(count) * seconds <= 36_525 * 86_400 else { return nil }
        return Double(count) * seconds
    }
}
