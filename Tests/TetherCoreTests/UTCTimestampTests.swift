import Foundation
import Testing
@testable import TetherCore

@Suite("UTC timestamps as text")
struct UTCTimestampTests {
    /// Instants across centuries, leap days, both sides of 1970 and the rounding of a fraction into the
    /// next day. (Foundation's calendar turns Julian before 1582; these and the random ones stay after.)
    static let instants: [Double] = [
        0, -1, -0.0004, 0.0005, 59.9996, 86_399.9995, 951_782_400, 951_868_799.999, 1_795_958_985.123,
        -2_208_988_800.25, -11_676_096_000, 253_402_300_799.999, 4_107_542_400.5, 1_709_164_800.0001,
    ]

    @Test func millisecondsMatchFoundationsISO8601Style() throws {
        var generator = SystemRandomNumberGenerator()
        let randomInstants = (0..<2_000).map { _ in Double(Int64.random(in: -11_676_096_000_000...253_402_300_799_999, using: &generator)) / 1000 }
        for seconds in Self.instants + randomInstants {
            let date = Date(timeIntervalSince1970: seconds)
            let text = ISO8601Milliseconds.format(date)
            // Whole seconds in Foundation's style, then the milliseconds: the form event payloads have always had.
            let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
            let whole = milliseconds >= 0 || milliseconds % 1000 == 0 ? milliseconds / 1000 : milliseconds / 1000 - 1
            let fraction = milliseconds - whole * 1000
            let expected = Date(timeIntervalSince1970: Double(whole)).formatted(Date.ISO8601FormatStyle()).dropLast()
                + "." + String(String(fraction + 1000).dropFirst()) + "Z"
            #expect(text == expected, "\(seconds)")
            let rounded = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            let parsed = try #require(ISO8601Milliseconds.parse(text))
            #expect(abs(parsed.timeIntervalSince1970 - rounded.timeIntervalSince1970) < 0.000_001, "\(text)")
            // Foundation's parser is exact to about 30 µs only.
            let foundation = try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)
            #expect(abs(parsed.timeIntervalSince1970 - foundation.timeIntervalSince1970) < 0.000_1, "\(text)")
        }
    }

    @Test(arguments: [
        ("2026-11-29T13:29:45Z", 1_795_958_985.0),
        ("2026-11-29T13:29:45.5Z", 1_795_958_985.5),
        ("2026-11-29T13:29:45.123456789Z", 1_795_958_985.123456),
        ("2026-11-29T14:29:45+01:00", 1_795_958_985.0),
        ("2026-11-29T08:59:45-0430", 1_795_958_985.0),
        ("2026-11-29T15:29:45+02", 1_795_958_985.0),
        ("2024-02-29T00:00:00Z", 1_709_164_800.0),
    ])
    func iso8601TextParses(text: String, seconds: Double) throws {
        let date = try #require(ISO8601Milliseconds.parse(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_001)
    }

    @Test(arguments: [
        "", "2026-11-29", "2026-11-29T13:29:45", "2026-11-29 13:29:45Z", "2026-13-01T00:00:00Z",
        "2026-11-32T00:00:00Z", "2026-11-29T24:00:00Z", "2026-11-29T13:60:00Z", "2026-11-29T13:29:45.Z",
        "2026-11-29T13:29:45Zjunk", "2026-11-29T13:29:45+01:", "2026-11-29T13:29:45+1", "２０２６-11-29T13:29:45Z",
        "2026-11-29T13:29:4５Z", "yesterday",
    ])
    func malformedISO8601TextIsRefused(text: String) {
        #expect(ISO8601Milliseconds.parse(text) == nil)
    }

    /// A date from a token's claim may be of any size: it is written at the edge of the range, not trapped on.
    @Test(arguments: [1e308, -1e308, .infinity, 9.3e12])
    func aDateBeyondInt64sMicrosecondsIsWrittenClamped(seconds: Double) {
        let text = UTCTimestamp.format(Date(timeIntervalSince1970: seconds), separator: UInt8(ascii: "T"), fractionDigits: 6, zone: "Z")
        #expect(text == (seconds > 0 ? "287168-08-24T16:00:00.000000Z" : "-283229-05-10T08:00:00.000000Z"), "\(text)")
    }

    @Test func microsecondsWithAnOffsetZoneRoundTrip() throws {
        for seconds in Self.instants + [-62_135_596_800, -62_135_596_800.000_001] {
            let date = Date(timeIntervalSince1970: seconds)
            let text = UTCTimestamp.format(date, separator: UInt8(ascii: " "), fractionDigits: 6, zone: "+00")
            let parsed = try #require(UTCTimestamp.parse(text, separators: [UInt8(ascii: " ")], zoneRequired: false))
            #expect(abs(parsed.timeIntervalSince1970 - seconds) <= 0.000_000_5 + abs(seconds) * 1e-15, "\(text)")
        }
        #expect(UTCTimestamp.format(Date(timeIntervalSince1970: 86_399.9999996), separator: UInt8(ascii: " "),
                                    fractionDigits: 6, zone: "+00") == "1970-01-02 00:00:00.000000+00")
        #expect(UTCTimestamp.parse("2026-11-29 13:29:45", separators: [UInt8(ascii: " ")], zoneRequired: false)?
            .timeIntervalSince1970 == 1_795_958_985)
        #expect(UTCTimestamp.parse("2026-11-29 13:29:45", separators: [UInt8(ascii: " ")], zoneRequired: true) == nil)
    }

    @Test func civilDaysRoundTripOverFourHundredYears() {
        var previous: (year: Int64, month: Int64, day: Int64)?
        for days in Int64(-146_097)...Int64(146_097) {
            let civil = UTCTimestamp.civil(fromDays: days)
            #expect(UTCTimestamp.days(fromCivil: civil.year, civil.month, civil.day) == days)
            if let previous, civil.day != previous.day + 1 {
                #expect(civil.day == 1)
                #expect(civil.month == previous.month % 12 + 1)
            }
            previous = civil
        }
    }
}
