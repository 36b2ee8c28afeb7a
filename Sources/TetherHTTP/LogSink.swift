#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the server writes its log lines: one JSON object per line, without the newline.
public struct LogSink: Sendable {
    private let writeLine: @Sendable (String) -> Void

    /// Creates a sink that hands every line to `writeLine`, from any thread.
    public init(_ writeLine: @escaping @Sendable (String) -> Void) {
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

/// Builds one JSON log line by hand: cheaper than an encoder per request, and always valid JSON.
struct LogLine {
    private var text: String

    /// Starts a line with `time` (ISO 8601 UTC, milliseconds), `level` and `msg`.
    init(level: String, message: String) {
        text = "{\"time\":\"" + Self.timestamp() + "\",\"level\":"
        Self.appendQuoted(level, to: &text)
        text += ",\"msg\":"
        Self.appendQuoted(message, to: &text)
    }

    /// Adds a string member, or `null`.
    mutating func add(_ key: String, _ value: String?) {
        appendKey(key)
        if let value {
            Self.appendQuoted(value, to: &text)
        } else {
            text += "null"
        }
    }

    /// Adds an integer member, or `null`.
    mutating func add(_ key: String, _ value: Int?) {
        appendKey(key)
        text += value.map(String.init) ?? "null"
    }

    /// Adds a finite number member.
    mutating func add(_ key: String, _ value: Double) {
        appendKey(key)
        text += value.isFinite ? String(value) : "null"
    }

    /// The finished line.
    var rendered: String { text + "}" }

    private mutating func appendKey(_ key: String) {
        text += ","
        Self.appendQuoted(key, to: &text)
        text += ":"
    }

    static func appendQuoted(_ value: String, to output: inout String) {
        output += "\""
        guard value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
            output += value
            output += "\""
            return
        }
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }

    /// `2025-01-31T12:34:56.789Z` from the wall clock.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        func padded(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return padded(Int(parts.tm_year) + 1900, 4) + "-" + padded(Int(parts.tm_mon) + 1, 2) + "-"
            + padded(Int(parts.tm_mday), 2) + "T" + padded(Int(parts.tm_hour), 2) + ":" + padded(Int(parts.tm_min), 2)
            + ":" + padded(Int(parts.tm_sec), 2) + "." + padded(now.tv_nsec / 1_000_000, 3) + "Z"
    }
}
