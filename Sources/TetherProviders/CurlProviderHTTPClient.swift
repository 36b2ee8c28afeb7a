import Foundation
import TetherJOSE
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``ProviderHTTPClient`` on libcurl: uncached, cookieless, no redirects, on the process's one multi
/// handle, whose connections are kept alive.
///
/// Every request goes through TetherJOSE's ``CurlHTTPClient/send(_:timeout:maxBytes:)``, which stops
/// a transfer as soon as it exceeds the size limit, holds no thread while it waits, and ends at once
/// when cancelled (and, unlike `URLSession` on this toolchain, leaks nothing a request).
public struct CurlProviderHTTPClient: ProviderHTTPClient {
    private let plain = CurlHTTPClient()

    /// Creates the client.
    public init() {}

    /// GETs `url`; the body is capped while it streams.
    public func get(url: URL, headers: [String: String], timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        try await send(URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout),
                       headers: headers, timeout: timeout, maxBytes: maxBytes)
    }

    /// POSTs `body` to `url`; the answer is capped while it streams.
    public func post(
        url: URL, headers: [String: String], body: [UInt8], timeout: TimeInterval, maxBytes: Int, connectingTo addresses: [String]
    ) async throws -> HTTPClientResponse {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        return try await send(request, headers: headers, timeout: timeout, maxBytes: maxBytes, connectingTo: addresses)
    }

    /// Sends `request` with `headers` (and `Accept: application/json`) on the shared pool, following no redirect.
    private func send(
        _ request: URLRequest, headers: [String: String], timeout: TimeInterval, maxBytes: Int, connectingTo addresses: [String] = []
    ) async throws -> HTTPClientResponse {
        var request = request
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return try await plain.send(request, timeout: timeout, maxBytes: maxBytes, connectingTo: addresses)
    }
}
