import Foundation

/// UTC timestamps as text (`YYYY-MM-DD?HH:MM:SS.fff…` and a zone), formatted and parsed with
/// integer arithmetic on the proleptic Gregorian calendar: no `Calendar` or format style, which
/// cost microseconds a call on the command path. Event payloads (`ISO8601Milliseconds`) and
/// PostgreSQL's timestamps (`PostgresTimestamp`) both go through it.
public enum UTCTimestamp {
    /// `YYYY-MM-DD`, `separator`, `HH:MM:SS`, a fraction of `fractionDigits` digits (rounded to
    /// the nearest), then `zone`.
    public static func format(_ date: Date, separator: UInt8, fractionDigits: Int, zone: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(20 + fractionDigits + zone.utf8.count)
        write(date, separator: separator, fractionDigits: fractionDigits, zone: zone, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the text of ``format(_:separator:fractionDigits:zone:)`` to `bytes`.
    public static func write(_ date: Date, separator: UInt8, fractionDigits: Int, zone: String, to bytes: inout [UInt8]) {
        var unitsPerSecond: Int64 = 1
        for _ in 0..<fractionDigits { unitsPerSecond *= 10 }
        // Clamped within Int64's range (about year 287,000 in microseconds): a date of any size is written, never trapped on.
        let limit = 9e18 / Double(unitsPerSecond)
        let since1970 = date.timeIntervalSince1970.isNaN ? 0 : min(max(date.timeIntervalSince1970, -limit), limit)
        let total = Int64((since1970 * Double(unitsPerSecond)).rounded())
        let unitsPerDay = 86_400 * unitsPerSecond
        let days = total.flooredDivision(by: unitsPerDay)
        let unitsOfDay = total - days * unitsPerDay
        let (year, month, day) = civil(fromDays: days)
        let seconds = unitsOfDay / unitsPerSecond
        if year >= 0 && year <= 9999 {
            append(year, width: 4, to: &bytes)
        } else {
            bytes.append(contentsOf: String(year).utf8)
        }
        bytes.append(UInt8(ascii: "-"))
        append(month, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        append(day, width: 2, to: &bytes)
        bytes.append(separator)
        append(seconds / 3600, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        append(seconds / 60 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        append(seconds % 60, width: 2, to: &bytes)
        if fractionDigits > 0 {
            bytes.append(UInt8(ascii: "."))
            append(unitsOfDay % unitsPerSecond, width: fractionDigits, to: &bytes)
        }
        bytes.append(contentsOf: zone.utf8)
    }

    /// Parses `YYYY-MM-DD`, one of `separators`, `HH:MM:SS`, an optional fraction (any number of
    /// digits, kept to the microsecond) and a zone: `Z`, or `+`/`-` with `HH`, `HH:MM`, `HHMM` or
    /// `HH:MM:SS`. Without a zone the text is UTC when `zoneRequired` is false, and refused otherwise.
    public static func parse(_ text: String, separators: [UInt8], zoneRequired: Bool) -> Date? {
        var text = text
        return text.withUTF8 { parse(bytes: $0, separators: separators, zoneRequired: zoneRequired) }
    }

    /// ``parse(_:separators:zoneRequired:)`` of the UTF-8 bytes of the text.
    public static func parse(bytes: UnsafeBufferPointer<UInt8>, separators: [UInt8], zoneRequired: Bool) -> Date? {
        guard let read = read(bytes, separators: separators, zoneRequired: zoneRequired) else { return nil }
        return Date(timeIntervalSince1970: Double(read.seconds) + Double(read.micros) / 1_000_000)
    }

    /// The microseconds since 1970-01-01 00:00 UTC that PostgreSQL reads `text` as (a `timestamptz`, given
    /// its zone), for text of the form ``parse(_:separators:zoneRequired:)`` reads; nil for any other text and
    /// for text PostgreSQL would read otherwise or refuse: more than six fractional digits (it rounds them),
    /// a day the month does not have, the year 0, a zone more than 15 hours off UTC or with 60 minutes or seconds.
    public static func microseconds(_ text: String, separators: [UInt8], zoneRequired: Bool) -> Int64? {
        var text = text
        return text.withUTF8 { bytes in
            guard let read = read(bytes, separators: separators, zoneRequired: zoneRequired), read.fractionDigits <= 6,
                  read.year >= 1, read.day <= daysIn(month: read.month, of: read.year), read.zoneInRange else { return nil }
            return read.seconds * 1_000_000 + read.micros
        }
    }

    /// The microseconds since 1970-01-01 00:00 UTC that PostgreSQL reads from the text of
    /// ``format(_:separator:fractionDigits:zone:)`` of `date` with three fractional digits and zone `Z`
    /// (``ISO8601Milliseconds/format(_:)``): `date` rounded to the nearest millisecond, as that text is; nil
    /// outside the years 1 to 9999, whose text is not of that form.
    public static func microseconds(millisecondsOf date: Date) -> Int64? {
        guard let milliseconds = Int64(exactly: (date.timeIntervalSince1970 * 1000).rounded()),
              milliseconds >= days(fromCivil: 1, 1, 1) * 86_400_000, milliseconds < days(fromCivil: 10_000, 1, 1) * 86_400_000
        else { return nil }
        return milliseconds * 1000
    }

    /// Days in `month` (1–12) of the proleptic Gregorian `year`.
    static func daysIn(month: Int64, of year: Int64) -> Int64 {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// The text's parts: whole seconds since 1970 (zone applied), the fraction kept to the microsecond and
    /// how many fractional digits it had, the civil date as written, and whether the zone's offset is one
    /// PostgreSQL takes (at most 15 hours, minutes and seconds below 60).
    private static func read(
        _ bytes: UnsafeBufferPointer<UInt8>, separators: [UInt8], zoneRequired: Bool
    ) -> (seconds: Int64, micros: Int64, fractionDigits: Int, year: Int64, month: Int64, day: Int64, zoneInRange: Bool)? {
        var index = 0
        func number(_ width: Int) -> Int64? {
            guard index + width <= bytes.count else { return nil }
            var value: Int64 = 0
            for offset in index..<(index + width) {
                let byte = bytes[offset]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            index += width
            return value
        }
        func expect(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect(UInt8(ascii: "-")), let month = number(2), expect(UInt8(ascii: "-")),
              let day = number(2), index < bytes.count, separators.contains(bytes[index]) else { return nil }
        index += 1
        guard let hour = number(2), expect(UInt8(ascii: ":")), let minute = number(2), expect(UInt8(ascii: ":")),
              let second = number(2) else { return nil }
        var micros: Int64 = 0
        var digits = 0
        if expect(UInt8(ascii: ".")) {
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                if digits < 6 { micros = micros * 10 + Int64(bytes[index] - UInt8(ascii: "0")) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in min(digits, 6)..<6 { micros *= 10 }
        }
        var offsetSeconds: Int64 = 0
        var zoneInRange = true
        if expect(UInt8(ascii: "Z")) {
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign: Int64 = bytes[index] == UInt8(ascii: "+") ? 1 : -1
            index += 1
            guard let offsetHours = number(2) else { return nil }
            offsetSeconds = offsetHours * 3600
            zoneInRange = offsetHours <= 15
            let colon = expect(UInt8(ascii: ":"))
            if index < bytes.count {
                guard let offsetMinutes = number(2) else { return nil }
                offsetSeconds += offsetMinutes * 60
                zoneInRange = zoneInRange && offsetMinutes < 60
                if colon, expect(UInt8(ascii: ":")) {
                    guard let extra = number(2) else { return nil }
                    offsetSeconds += extra
                    zoneInRange = zoneInRange && extra < 60
                }
            } else if colon {
                return nil
            }
            offsetSeconds *= sign
        } else if zoneRequired {
            return nil
        }
        guard index == bytes.count, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60,
              second < 61 else { return nil }
        let seconds = days(fromCivil: year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return (seconds, micros, digits, year, month, day, zoneInRange)
    }

    /// Days since 1970-01-01 of a civil date (Howard Hinnant's days-from-civil).
    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = shiftedYear.flooredDivision(by: 400)
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The civil date of a count of days since 1970-01-01 (civil-from-days).
    static func civil(fromDays count: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let days = count + 719_468
        let era = days.flooredDivision(by: 146_097)
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Appends `value`'s last `width` decimal digits, zero-padded.
    private static func append(_ value: Int64, width: Int, to bytes: inout [UInt8]) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
            divisor /= 10
        }
    }
}

extension Int64 {
    /// Division rounding toward negative infinity.
    func flooredDivision(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
