import Foundation

/// The base of links Tether hands out: `TETHER_PUBLIC_URL`, or, where a surface allows it, the
/// request's own `Host`; without a trailing slash.
enum PublicBase {
    static func root(_ publicURL: URL?, host: String?, allowingHost: Bool) -> String? {
        guard var base = publicURL?.absoluteString ?? (allowingHost ? "http://\(host ?? "localhost")" : nil) else { return nil }
        while base.hasSuffix("/") { base.removeLast() }
        return base
    }
}
