import Foundation
import Testing
@testable import TetherCore

@Suite("UUIDs made, written and ordered without Foundation's C helpers")
struct UUIDTextTests {
    /// Ids at the edges of every byte, and random ones.
    static func samples(_ count: Int) -> [UUID] {
        let edges = [
            UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
            UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)),
            UUID(uuid: (0x0f, 0xf0, 0x9a, 0xa9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01)),
        ]
        return edges + (0..<count).map { _ in UUID() }
    }

    /// Nothing may follow the 36 characters: not a NUL (where a C-string read stops), not a space.
    @Test func anIdWithAnythingAfterItIsNoId() {
        let id = UUID()
        #expect(UUID(text: id.lowercasedText) == id)
        for tail in ["\u{0}", "\u{0}evil", " ", "0", "\n"] {
            #expect(UUID(text: id.lowercasedText + tail) == nil, "tail \(Array(tail.utf8))")
        }
    }

    @Test func everyByteAtEveryPlaceIsReadAsADigitADashOrARefusal() {
        let id = UUID(uuid: (0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10))
        let text = Array(id.uuidString.utf8)
        for place in text.indices {
            for byte in UInt8.min...UInt8.max {
                var changed = text
                changed[place] = byte
                let isDash = [8, 13, 18, 23].contains(place)
                let digit: UInt8? = switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
                default: nil
                }
                let parsed = changed.withUnsafeBufferPointer { UUID(utf8: $0) }
                if isDash {
                    #expect((parsed == id) == (byte == UInt8(ascii: "-")), "byte \(byte) at \(place)")
                    #expect((parsed == nil) == (byte != UInt8(ascii: "-")), "byte \(byte) at \(place)")
                } else if let digit {
                    // The digit lands in its byte's high or low half, the rest unchanged.
                    let slot = (place - [8, 13, 18, 23].filter { $0 < place }.count) / 2
                    let isHigh = (place - [8, 13, 18, 23].filter { $0 < place }.count).isMultiple(of: 2)
                    var expected = withUnsafeBytes(of: id.uuid) { Array($0) }
                    expected[slot] = isHigh ? digit << 4 | expected[slot] & 0x0f : expected[slot] & 0xf0 | digit
                    #expect(parsed.map { withUnsafeBytes(of: $0.uuid) { Array($0) } } == expected, "byte \(byte) at \(place)")
                } else {
                    #expect(parsed == nil, "byte \(byte) at \(place)")
                }
            }
        }
        for length in [0, 35, 37] {
            #expect(Array(repeating: UInt8(ascii: "0"), count: length).withUnsafeBufferPointer { UUID(utf8: $0) } == nil)
        }
    }

    @Test func randomIdsAreVersionFourOfTheRFCVariantAndDistinct() {
        let ids = (0..<20_000).map { _ in UUID.random() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.uuid.6 >> 4 == 4, "\(id)")
            #expect(id.uuid.8 >> 6 == 0b10, "\(id)")
        }
        // Every other bit takes both values across the ids: the bytes are not left zeroed or fixed.
        var seenSet = [UInt8](repeating: 0, count: 16), seenClear = [UInt8](repeating: 0, count: 16)
        for id in ids {
            withUnsafeBytes(of: id.uuid) { bytes in
                for index in 0..<16 {
                    seenSet[index] |= bytes[index]
                    seenClear[index] |= ~bytes[index]
                }
            }
        }
        let fixed: [Int: UInt8] = [6: 0xf0, 8: 0xc0]
        for index in 0..<16 {
            #expect(seenSet[index] & seenClear[index] | (fixed[index] ?? 0) == 0xff, "byte \(index)")
        }
        // What Foundation parses back is the same id, version and all.
        #expect(ids.prefix(100).allSatisfy { UUID(uuidString: $0.uuidString) == $0 })
    }

    @Test func textsAreFoundationsInBothCases() {
        for id in Self.samples(2_000) {
            #expect(id.uppercasedText == id.uuidString)
            #expect(id.lowercasedText == id.uuidString.lowercased())
            #expect(UUID(text: id.lowercasedText) == id)
            #expect(UUID(text: id.uppercasedText) == id)
        }
    }

    /// Kept states list sessions, challenges and factors in this order, and events record the lists:
    /// it must stay the order of the ids' texts that it replaced.
    @Test func sortsBeforeIsTheOrderOfTheTexts() {
        let ids = Self.samples(400)
        // Pairs that share a prefix of every length, so that each byte decides once.
        var pairs = zip(ids, ids.reversed()).map { ($0, $1) }
        for id in ids.prefix(50) {
            for byte in 0..<16 {
                var other = id.uuid
                withUnsafeMutableBytes(of: &other) { $0[byte] ^= 0x81 }
                pairs.append((id, UUID(uuid: other)))
            }
            pairs.append((id, id))
        }
        for (left, right) in pairs {
            #expect(left.sortsBefore(right) == (left.uuidString < right.uuidString), "\(left) \(right)")
            #expect(right.sortsBefore(left) == (right.uuidString < left.uuidString), "\(right) \(left)")
        }
        #expect(ids.sorted { $0.sortsBefore($1) } == ids.sorted { $0.uuidString < $1.uuidString })
    }
}
