import Foundation

extension URL {
    /// `text` as a URL when it is an absolute http or https URL; anything else is dropped.
    static func httpURL(_ text: String) -> URL? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              url.host?.isEmpty == false else { return nil }
        return url
    }
}
