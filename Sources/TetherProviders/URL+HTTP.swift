import Foundation

extension URL {
    /// `text` as a URL when it is an absolute http or https URL; anything else is dropped.
    static func httpURL(_ text: String) -> URL? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              url.host?.isEmpty == false else { return nil }
        return url
    }
}

/// `name=value&…` with every value percent-encoded beyond RFC 3986's unreserved characters (as
/// `encodeURIComponent` does): query strings and `application/x-www-form-urlencoded` bodies.
public func formEncoded(_ fields: [(name: String, value: String)]) -> String {
    let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    return fields.map { "\($0.name)=\($0.value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "")" }.joined(separator: "&")
}
