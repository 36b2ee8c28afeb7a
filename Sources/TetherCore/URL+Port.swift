import Foundation

extension URL {
    /// Whether a request can reach the URL's port: none given (the scheme's), or one from 1 to 65535. `URL` parses
    /// `:0` and `:99999` as ports; a setting naming one could never be used.
    public var hasUsablePort: Bool {
        port.map { (1...65535).contains($0) } ?? true
    }
}
