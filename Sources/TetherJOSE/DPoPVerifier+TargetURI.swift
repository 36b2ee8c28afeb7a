import Foundation

/// The comparison form of an `htu` (RFC 9449 §4.3 step 9, RFC 3986 §6.2.2–6.2.3).
enum TargetURI {
    /// Lowercase scheme and host, default port dropped, empty path as `/`,
    /// percent-escapes normalised, query and fragment removed; nil if not absolute http(s).
    static func normalized(_ text: String) -> String? {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
              components.user == nil, components.password == nil else { return nil }
        var result = scheme + "://"
        let lowered = host.lowercased()
        result += lowered.contains(":") && !lowered.hasPrefix("[") ? "[\(lowered)]" : lowered
        if let port = components.port, port != (scheme == "https" ? 443 : 80) { result += ":\(port)" }
        let path = normalizedPercentEncoding(components.percentEncodedPath)
        result += path.isEmpty ? "/" : path
        return result
    }

    /// Uppercases escape hex digits and decodes escapes of unreserved characters.
    private static func normalizedPercentEncoding(_ path: String) -> String {
        var output: [UInt8] = []
        let bytes = Array(path.utf8)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let value = UInt8(String(decoding: bytes[(index + 1)...(index + 2)], as: UTF8.self), radix: 16) {
                let isUnreserved = (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value) || (0x30...0x39).contains(value)
                    || value == UInt8(ascii: "-") || value == UInt8(ascii: ".") || value == UInt8(ascii: "_") || value == UInt8(ascii: "~")
                output += isUnreserved ? [value] : Array(String(format: "%%%02X", value).utf8)
                index += 3
            } else {
                output.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
