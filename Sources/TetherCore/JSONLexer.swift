import Foundation

/// A mistake in JSON text, and the byte where it was found.
public struct JSONSyntaxError: Error, Sendable, CustomStringConvertible {
    public let detail: String
    public let offset: Int

    public var description: String { "\(detail) at byte \(offset)" }
}

/// The lexical parts of strict JSON (RFC 8259) over UTF-8 bytes: whitespace, literals, strings (escapes,
/// surrogate pairs and UTF-8 checked) and numbers. Tether's two parsers share it and keep their own
/// structure: JOSE's (doubles, duplicate names refused) and ``CompactJSONDecoder``'s (exact numbers).
public struct JSONLexer {
    public let bytes: UnsafeRawBufferPointer
    public var index = 0

    public init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// The byte at the current index, if any.
    public var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    public func failure(_ detail: String) -> JSONSyntaxError {
        JSONSyntaxError(detail: detail, offset: index)
    }

    public mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Consumes `literal` (`true`, `false`, `null`).
    public mutating func expectLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count, memcmp(bytes.baseAddress! + index, literal.utf8Start, count) == 0 else {
            throw failure("invalid literal")
        }
        index += count
    }

    /// A number's text from the current index (`-`, a digit), checked against the grammar: no leading
    /// zero, digits after `.` and in the exponent. `isInteger` when it has neither fraction nor exponent.
    public mutating func number() throws(JSONSyntaxError) -> (text: UnsafeRawBufferPointer, isInteger: Bool) {
        let start = index
        var isInteger = true
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, first.isDigit else { throw failure("invalid number") }
        if first == UInt8(ascii: "0") {
            index += 1
            guard !(current?.isDigit ?? false) else { throw failure("leading zero") }
        } else {
            skipDigits()
        }
        if current == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard current?.isDigit ?? false else { throw failure("invalid fraction") }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard current?.isDigit ?? false else { throw failure("invalid exponent") }
            skipDigits()
        }
        return (UnsafeRawBufferPointer(rebasing: bytes[start..<index]), isInteger)
    }

    private mutating func skipDigits() {
        while let byte = current, byte.isDigit { index += 1 }
    }

    /// A string from its opening quote: escapes decoded, surrogates paired, UTF-8 checked.
    public mutating func string() throws(JSONSyntaxError) -> String {
        index += 1
        let start = index
        // The usual case: no escape, so the bytes between the quotes are the string.
        var isASCII = true
        skipPlainASCII()
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let run = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                guard let text = Self.text(of: run, isASCII: isASCII) else { throw failure("invalid UTF-8") }
                return text
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            if byte >= 0x80 { isASCII = false }
            index += 1
        }
        var output = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = output.withUnsafeBytes({ Self.text(of: $0, isASCII: !$0.contains { $0 >= 0x80 }) }) else {
                    throw failure("invalid UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard let escaped = current else { throw failure("unterminated escape") }
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(escaped)
                case UInt8(ascii: "b"): output.append(0x08)
                case UInt8(ascii: "f"): output.append(0x0C)
                case UInt8(ascii: "n"): output.append(0x0A)
                case UInt8(ascii: "r"): output.append(0x0D)
                case UInt8(ascii: "t"): output.append(0x09)
                case UInt8(ascii: "u"): output += try unicodeEscape()
                default: throw failure("invalid escape")
                }
            case 0..<0x20:
                throw failure("control character in string")
            default:
                output.append(byte)
                index += 1
            }
        }
        throw failure("unterminated string")
    }

    /// From a string's opening quote, the bytes between its quotes when they are ASCII without a control
    /// character or an escape, so that they are the string itself (an id, a date, a member's name); nil
    /// for any other string, the index left where the scan stopped (the caller gives up on the text).
    mutating func plainASCIIString() -> UnsafeRawBufferPointer? {
        index += 1
        let start = index
        skipPlainASCII()
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return UnsafeRawBufferPointer(rebasing: bytes[start..<(index - 1)])
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return nil }
            index += 1
        }
        return nil
    }

    /// Moves past whole 8-byte words of printable ASCII other than `"` and `\\`, the bytes a string's
    /// scan passes over without a look (the byte-by-byte scan goes on from the first word that has any
    /// other byte). Tokens, hashes and sealed values run to dozens of such bytes.
    private mutating func skipPlainASCII() {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        /// High bit set in each byte of `word` that is zero (and perhaps in some above one that is): never missed.
        func zeroBytes(_ word: UInt64) -> UInt64 { (word &- ones) & ~word & highs }
        while index + 8 <= bytes.count {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            let special = zeroBytes(word ^ (ones &* 0x22)) | zeroBytes(word ^ (ones &* 0x5C))
                | ((word &- ones &* 0x20) & ~word & highs) | (word & highs)
            if special != 0 { return }
            index += 8
        }
    }

    /// The string of UTF-8 `bytes`, nil when they are not valid UTF-8. ASCII (`isASCII`, as a scan saw)
    /// needs no validation and takes the standard library's specialised path; `String(validating:as:)`
    /// is generic at run time here, and looking up its metadata cost more than the copy.
    private static func text(of bytes: UnsafeRawBufferPointer, isASCII: Bool) -> String? {
        isASCII ? String(decoding: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self) : String(validating: bytes, as: UTF8.self)
    }

    /// The hex digits after `\u` (and a following low surrogate), as the scalar's UTF-8.
    private mutating func unicodeEscape() throws(JSONSyntaxError) -> [UInt8] {
        var scalar = try hex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw failure("lone high surrogate")
            }
            index += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw failure("invalid low surrogate") }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw failure("lone low surrogate")
        }
        return Array(String(Character(Unicode.Scalar(scalar)!)).utf8)
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("short unicode escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("invalid unicode escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }
}

private extension UInt8 {
    var isDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
}
