import Foundation
import TetherHTTP

/// The base of links Tether hands out: `TETHER_PUBLIC_URL`, or, where a surface allows it, the
/// request's own `Host`; without a trailing slash.
enum PublicBase {
    static func root(_ publicURL: URL?, host: String?, allowingHost: Bool) -> String? {
        guard var base = publicURL?.absoluteString ?? (allowingHost ? "http://\(host ?? "localhost")" : nil) else { return nil }
        while base.hasSuffix("/") { base.removeLast() }
        return base
    }

    /// Whether `host` (a `Host` header's value, or a URL's host) names this machine and nothing else: exactly
    /// `localhost`, a `127.x.x.x` address or `[::1]` (bare `::1` for a URL's host), then at most `:` and a port's
    /// digits. Anything more (`localhost:1@evil.example`, a path, a space) is no loopback name: a link built on
    /// it would lead elsewhere.
    static func isLoopback(_ host: String) -> Bool {
        let lowered = host.lowercased()
        if lowered == "::1" { return true }
        var name = Substring(lowered)
        var port: Substring = ""
        if name.hasPrefix("[") {
            guard let end = name.firstIndex(of: "]") else { return false }
            port = name[name.index(after: end)...]
            name = name[name.index(after: name.startIndex)..<end]
            guard name == "::1" else { return false }
        } else if let colon = name.firstIndex(of: ":") {
            port = name[colon...]
            name = name[..<colon]
        }
        if !port.isEmpty {
            let digits = port.dropFirst()
            guard port.first == ":", !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return false }
        }
        if name == "::1" || name == "localhost" { return true }
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { !$0.isEmpty && $0.count <= 3 && UInt8($0) != nil }
    }

    /// Whether `request` comes from the developer's own tools or pages: its client is this machine (a proxy in
    /// `TETHER_TRUSTED_PROXIES` passing on someone else's request is not), its `Host` names this machine (a page
    /// of a name re-pointed at 127.0.0.1, DNS rebinding, sends its own name), and its `Origin`, if any, is a
    /// loopback page (a page of another site calling across origins sends its own).
    static func isFromThisMachine(_ request: HTTPRequest) -> Bool {
        (request.remoteAddress.map(PublicBase.isLoopback) ?? true)
            && (request.headers["Host"].map(PublicBase.isLoopback) ?? false) && (request.headers["Origin"].map(isLoopbackOrigin) ?? true)
    }

    /// Whether `origin` (an `Origin` header) is a page served from this machine: `http(s)://localhost`,
    /// `127.x.x.x` or `[::1]`, any port.
    static func isLoopbackOrigin(_ origin: String) -> Bool {
        guard let url = URL(string: origin), url.scheme == "http" || url.scheme == "https", let host = url.host else { return false }
        return PublicBase.isLoopback(host)
    }
}
