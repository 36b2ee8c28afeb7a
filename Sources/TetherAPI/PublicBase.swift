import Foundation

/// The base of links Tether hands out: `TETHER_PUBLIC_URL`, or, where a surface allows it, the
/// request's own `Host`; without a trailing slash.
enum PublicBase {
    static func root(_ publicURL: URL?, host: String?, allowingHost: Bool) -> String? {
        guard var base = publicURL?.absoluteString ?? (allowingHost ? "http://\(host ?? "localhost")" : nil) else { return nil }
        while base.hasSuffix("/") { base.removeLast() }
        return base
    }

    /// Whether `host` (a `Host` header's value or a URL's host, with or without a port) names this machine:
    /// `localhost`, `127.x.x.x` or `[::1]`.
    static func isLoopback(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") {
            guard let end = name.firstIndex(of: "]") else { return false }
            return name[name.index(after: name.startIndex)..<end] == "::1"
        }
        if name == "::1" { return true }
        if let colon = name.lastIndex(of: ":") { name = String(name[..<colon]) }
        if name == "localhost" { return true }
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
