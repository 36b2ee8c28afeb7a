#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import TetherCore

/// Where the server writes its log lines: one JSON object per line, without the newline.
public struct LogSink: Sendable {
    private let writeLine: @Sendable (String) -> Void
    /// Whether `info` lines are written: when not, the server does not build its access lines at all.
    public let admitsInfo: Bool

    /// Creates a sink that hands every line to `writeLine`, from any thread.
    public init(admitsInfo: Bool = true, _ writeLine: @escaping @Sendable (String) -> Void) {
        self.admitsInfo = admitsInfo
        self.writeLine = writeLine
    }

    /// Writes one line.
    public func write(_ line: String) {
        writeLine(line)
    }

    /// Writes each line to standard error with a single `write(2)`, so concurrent lines never interleave.
    public static let standardError = LogSink { line in
        var text = line
        text.append("\n")
        text.withUTF8 { writeFully(STDERR_FILENO, $0) }
    }

    /// Drops every line; for benchmarks and tests that do not look at logs.
    public static let discarding = LogSink { _ in }
}

/// Writes all of `bytes`, retrying after signals and partial writes; gives up on other errors.
private func writeFully(_ descriptor: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
    guard var next = bytes.baseAddress else { return }
    var remaining = bytes.count
    while remaining > 0 {
        let written = write(descriptor, next, remaining)
        if written > 0 {
            next += written
            remaining -= written
        } else if written < 0 && errno == EINTR {
            continue
        } else {
            return
        }
    }
}

/// Builds one JSON log line by hand into bytes: one allocation per line in the usual case, and always valid JSON.
struct LogLine {
    private var bytes: [UInt8] = []

    /// Starts a line with `time` (ISO 8601 UTC, milliseconds), `level` and `msg`.
    init(level: String, message: String) {
        bytes.reserveCapacity(320)
        append(#"{"time":"#)
        appendQuoted(ISO8601Milliseconds.format(Date()))
        append(#","level":"#)
        appendQuoted(level)
        append(#","msg":"#)
        appendQuoted(message)
    }

    /// Adds a string member, or `null`.
    mutating func add(_ key: String, _ value: String?) {
        appendKey(key)
        if let value {
            appendQuoted(value)
        } else {
            append("null")
        }
    }

    /// Adds an integer member, or `null`.
    mutating func add(_ key: String, _ value: Int?) {
        appendKey(key)
        append(value.map(String.init) ?? "null")
    }

    /// Adds a finite number member.
    mutating func add(_ key: String, _ value: Double) {
        appendKey(key)
        append(value.isFinite ? String(value) : "null")
    }

    /// The finished line.
    var rendered: String {
        String(unsafeUninitializedCapacity: bytes.count + 1) { buffer in
            _ = buffer.initialize(from: bytes)
            buffer[bytes.count] = UInt8(ascii: "}")
            return bytes.count + 1
        }
    }

    private mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    private mutating func appendKey(_ key: String) {
        bytes.append(UInt8(ascii: ","))
        appendQuoted(key)
        bytes.append(UInt8(ascii: ":"))
    }

    /// The JSON string of `value` (``JSONText/writeString(_:to:)``).
    private mutating func appendQuoted(_ value: String) {
        JSONText.writeString(value, to: &bytes)
    }

}
