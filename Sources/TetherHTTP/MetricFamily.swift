/// The kind of a metric family, as the `# TYPE` line of the text format names it.
public enum MetricType: String, Sendable {
    case counter
    case gauge
    case histogram
}

/// One line of a family: a value with its labels (a histogram's lines add a suffix to the name).
public struct MetricSample: Sendable {
    /// Appended to the family's name: `""`, or `_bucket`, `_sum`, `_count` for histograms.
    public var suffix: String
    /// Label names and values, in the order they are written.
    public var labels: [(name: String, value: String)]
    public var value: Double

    public init(suffix: String = "", labels: [(name: String, value: String)] = [], value: Double) {
        self.suffix = suffix
        self.labels = labels
        self.value = value
    }
}

/// A metric with its help text, type and samples, ready to render.
public struct MetricFamily: Sendable {
    public var name: String
    public var help: String
    public var type: MetricType
    public var samples: [MetricSample]

    public init(name: String, help: String, type: MetricType, samples: [MetricSample]) {
        self.name = name
        self.help = help
        self.type = type
        self.samples = samples
    }

    /// A gauge family: one sample per label set, measured when it is built (at scrape time).
    public static func gauge(
        _ name: String, help: String, samples: [(labels: [(name: String, value: String)], value: Double)]
    ) -> MetricFamily {
        MetricFamily(name: name, help: help, type: .gauge, samples: samples.map { MetricSample(labels: $0.labels, value: $0.value) })
    }

    /// Whether `name` matches `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: ":"): true
            default: false
            }
        }
    }
}

/// Prometheus's text exposition format, version 0.0.4.
public enum PrometheusText {
    /// The `Content-Type` of a rendered document.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// `# HELP`, `# TYPE` and one line per sample, for every family in order.
    public static func render(_ families: [MetricFamily]) -> String {
        var text = ""
        for family in families {
            text += "# HELP \(family.name) \(escape(family.help, quotes: false))\n"
            text += "# TYPE \(family.name) \(family.type.rawValue)\n"
            for sample in family.samples {
                text += family.name + sample.suffix
                if !sample.labels.isEmpty {
                    text += "{" + sample.labels.map { "\($0.name)=\"\(escape($0.value, quotes: true))\"" }.joined(separator: ",") + "}"
                }
                text += " \(format(sample.value))\n"
            }
        }
        return text
    }

    /// A value as the format writes it: integers without a fraction, `+Inf`, `-Inf`, `NaN`.
    public static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Inf" : "+Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// Backslash and line feed are escaped in help texts; label values escape double quotes too.
    private static func escape(_ text: String, quotes: Bool) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\"" where quotes: escaped += "\\\""
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
