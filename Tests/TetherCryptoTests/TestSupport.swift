import Foundation

extension [UInt8] {
    /// Bytes from a hex string; traps on malformed test data.
    init(hex: String) {
        let digits = Array(hex.utf8)
        precondition(digits.count % 2 == 0, "odd hex length")
        self = stride(from: 0, to: digits.count, by: 2).map { index in
            UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16)!
        }
    }

    /// The bytes as lowercase hex.
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}

/// Locates the shared, read-only test vectors next to the repository (never copied into it).
enum SharedTestData {
    static func url(_ relativePath: String, file: String = #filePath) -> URL {
        // Tests/<Target>/<File>.swift → repository root → ../shared/testdata
        URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("../shared/testdata").appendingPathComponent(relativePath).standardizedFileURL
    }

    static func data(_ relativePath: String) throws -> Data {
        try Data(contentsOf: url(relativePath))
    }
}
