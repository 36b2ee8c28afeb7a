/// Writes leveled JSON log lines (one object per line) to a ``LogSink``.
///
/// The HTTP server writes its request lines straight to the sink; everything
/// else in Tether (start-up, shutdown, background work) logs through this.
public struct Logger: Sendable {
    /// How important a line is; lines below the logger's minimum are dropped.
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case debug, info, warn, error

        /// The name used in `TETHER_LOG_LEVEL` and in the `level` member.
        public var name: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warn: "warn"
            case .error: "error"
            }
        }

        /// Parses `debug`, `info`, `warn` or `error`.
        public init?(name: String) {
            guard let level = Self.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
            self = level
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Where lines go.
    public let sink: LogSink
    /// The least important level written.
    public let minimumLevel: Level

    public init(sink: LogSink = .standardError, minimumLevel: Level = .info) {
        self.sink = sink
        self.minimumLevel = minimumLevel
    }

    /// A sink that applies this logger's level to lines that carry one (for the HTTP server).
    public var filteredSink: LogSink {
        let minimum = minimumLevel
        let sink = sink
        guard minimum > .info else { return sink }
        return LogSink(admitsInfo: false) { line in
            // Request lines are written at info; keep only what the configured level admits.
            for level in Level.allCases where level >= minimum && line.contains("\"level\":\"\(level.name)\"") {
                sink.write(line)
                return
            }
        }
    }

    /// Writes `message` with string `fields` at `level`.
    public func log(_ level: Level, _ message: String, _ fields: [(String, String?)] = []) {
        guard level >= minimumLevel else { return }
        var line = LogLine(level: level.name, message: message)
        for (key, value) in fields {
            line.add(key, value)
        }
        sink.write(line.rendered)
    }

    /// Writes an `info` line.
    public func info(_ message: String, _ fields: [(String, String?)] = []) { log(.info, message, fields) }
    /// Writes a `warn` line.
    public func warn(_ message: String, _ fields: [(String, String?)] = []) { log(.warn, message, fields) }
    /// Writes an `error` line.
    public func error(_ message: String, _ fields: [(String, String?)] = []) { log(.error, message, fields) }
    /// Writes a `debug` line.
    public func debug(_ message: String, _ fields: [(String, String?)] = []) { log(.debug, message, fields) }
}
