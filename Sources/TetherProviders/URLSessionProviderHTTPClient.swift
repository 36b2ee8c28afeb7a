import Foundation
import TetherJOSE
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``ProviderHTTPClient`` on `URLSession` (libcurl on Linux): ephemeral, uncached, no redirects.
///
/// Header-less GETs go through TetherJOSE's ``URLSessionHTTPClient``, which
/// stops a transfer as soon as it exceeds the size limit. Requests with headers
/// and POSTs use `URLSession`'s async API, which on Linux offers no streaming
/// hook, so their size limit is applied once the body has arrived; they go only
/// to the configured Graph API and SMS webhook, whose answers are small.
public struct URLSessionProviderHTTPClient: ProviderHTTPClient {
    private let plain = URLSessionHTTPClient()

    /// Creates the client; each request gets its own short-lived session.
    public init() {}

    /// GETs `url`; with no `headers`, the body is capped while it streams.
    public func get(url: URL, headers: [String: String], timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        guard !headers.isEmpty else { return try await plain.get(url: url, timeout: timeout, maxBytes: maxBytes) }
        return try await send(URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout),
                              headers: headers, timeout: timeout, maxBytes: maxBytes)
    }

    /// POSTs `body` to `url`; the answer's size limit is applied once it has arrived.
    public func post(url: URL, headers: [String: String], body: [UInt8], timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        return try await send(request, headers: headers, timeout: timeout, maxBytes: maxBytes)
    }

    /// Sends `request` with `headers` on a session of its own that follows no redirect.
    private func send(_ request: URLRequest, headers: [String: String], timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
        configuration.urlCache = nil
        let session = URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        var request = request
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let data: Data, response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            throw HTTPClientError.transport.with(detail: error.localizedDescription)
        }
        guard let http = response as? HTTPURLResponse else { throw HTTPClientError.transport.with(detail: "no HTTP response") }
        guard data.count <= maxBytes else { throw HTTPClientError.responseTooLarge.with(detail: "more than \(maxBytes) bytes") }
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name] = value }
        }
        return HTTPClientResponse(status: http.statusCode, headers: fields, body: Array(data))
    }
}

/// Answers every redirect with "do not follow": a provider URL is configuration, and a
/// redirect would let whoever answers it send our credentials somewhere else.
private final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
