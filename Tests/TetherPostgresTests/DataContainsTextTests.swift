import Foundation
import Testing
@testable import TetherPostgres

@Suite("Finding a member name in an event's bytes")
struct DataContainsTextTests {
    @Test func findsTheTextWhereFoundationsSearchDoes() {
        let needle = PersonalDataVault.sealedMember
        var cases: [String] = [
            "", "s", needle, "\"\(needle)\":\"x\"", "{\"a\":1,\"\(needle)\":\"x\"}", "xx\(needle)",
            String(needle.dropLast()), "\(needle.dropLast())\(needle)", "ssssealedPersona", "sealedPersonaL",
            "{\"sealedWith\":\"k\"}", "ü\(needle)ü", String(repeating: "s", count: 40) + needle,
        ]
        // Random texts over the needle's own letters, where partial matches are common.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            cases.append(String((0..<Int.random(in: 0..<40, using: &generator)).map { _ in "sealP\"".randomElement(using: &generator)! }))
            cases.append(cases.last! + needle.prefix(Int.random(in: 0...needle.count, using: &generator)))
        }
        for text in cases {
            let data = Data(text.utf8)
            #expect(data.contains(text: needle) == (data.range(of: Data(needle.utf8)) != nil), "\(text)")
        }
        // A slice whose indices do not start at zero.
        let sliced = Data("xx\(needle)yy".utf8).dropFirst(2)
        #expect(sliced.contains(text: needle))
        #expect(!sliced.dropLast(3).contains(text: needle))
        #expect(Data().contains(text: ""))
    }
}
