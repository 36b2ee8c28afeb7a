import Foundation
import TetherCrypto

/// The outbound HTTP seam used to fetch key sets from identity providers.
public protocol HTTPClient: Sendable {
    /// GETs `url`, giving up after `timeout` seconds or when the body would exceed `maxBytes`.
    func get(url: URL, timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse
}

/// The parts of an HTTP response a key-set fetch needs.
public struct HTTPClientResponse: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// Header fields, names lowercased.
    public var headers: [String: String]
    /// The body.
    public var body: [UInt8]

    /// Collects the parts; header names are lowercased.
    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }
}

/// Why an outbound request failed.
public struct HTTPClientError: ReasonCodedError {
    private enum Kind: String, Sendable {
        case responseTooLarge = "response_too_large"
        case transport
    }

    private let kind: Kind
    /// Human-readable context; not part of equality.
    public let detail: String

    private init(_ kind: Kind, detail: String = "") {
        self.kind = kind
        self.detail = detail
    }

    /// The stable machine code.
    public var reason: String { kind.rawValue }

    /// The body exceeded the size limit.
    public static let responseTooLarge = HTTPClientError(.responseTooLarge)
    /// The connection, TLS or timeout failed.
    public static let transport = HTTPClientError(.transport)

    /// The same error with a detail attached.
    public func with(detail: String) -> HTTPClientError { HTTPClientError(kind, detail: detail) }
}
