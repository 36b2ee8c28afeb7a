import Foundation
import TetherJOSE
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The outbound HTTP seam for identity providers and webhooks: key-set fetches, Graph API calls
/// that carry credentials in headers, and signed POSTs to the SMS webhook.
///
/// It refines TetherJOSE's ``HTTPClient`` (used by ``JWKSCache``) with request
/// headers, because Facebook's app token and user tokens belong in an
/// `Authorization` header, never in a URL that ends up in logs.
public protocol ProviderHTTPClient: HTTPClient {
    /// GETs `url` with `headers`, giving up after `timeout` seconds or when the body exceeds `maxBytes`.
    func get(url: URL, headers: [String: String], timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse

    /// POSTs `body` to `url` with `headers`, giving up after `timeout` seconds or when the answer exceeds `maxBytes`.
    ///
    /// - Throws: ``HTTPClientError`` when no HTTP answer arrived (connection, TLS, timeout) or it was too large;
    ///   any status, 5xx included, is an answer.
    ///
    /// - Parameter addresses: when not empty, the only addresses to connect to for the URL's host (those a
    ///   caller checked, so that a name re-pointed since is not followed).
    func post(
        url: URL, headers: [String: String], body: [UInt8], timeout: TimeInterval, maxBytes: Int, connectingTo addresses: [String]
    ) async throws -> HTTPClientResponse
}

extension ProviderHTTPClient {
    /// A POST to wherever the URL's host resolves.
    public func post(url: URL, headers: [String: String], body: [UInt8], timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        try await post(url: url, headers: headers, body: body, timeout: timeout, maxBytes: maxBytes, connectingTo: [])
    }

    /// A GET without extra headers (what a key-set fetch needs).
    public func get(url: URL, timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        try await get(url: url, headers: [:], timeout: timeout, maxBytes: maxBytes)
    }
}
