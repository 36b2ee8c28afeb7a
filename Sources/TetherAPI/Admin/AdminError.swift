import Foundation
import TetherHTTP

/// Why an admin request or an admin-key command was refused; each maps once to an HTTP status and a stable code.
public struct AdminError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Kind: Sendable, Hashable {
        case missingKey
        case invalidKey
        case forbidden
        case invalidRequest
        case noSuchKey
        case noSuchUser
    }

    private let kind: Kind
    /// A sentence for people; never a secret.
    public let detail: String

    private init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    /// No `Authorization: Bearer` admin key was sent.
    public static let missingKey = AdminError(.missingKey, "An admin key is required: Authorization: Bearer tadm_…")
    /// The key is malformed, unknown or revoked (which of these is not said).
    public static let invalidKey = AdminError(.invalidKey, "This admin key is not valid, or has been revoked.")
    /// The key's role may not call this route.
    public static func forbidden(needs role: AdminRole) -> AdminError {
        .init(.forbidden, "This route needs an admin key with the role \(role.rawValue).")
    }
    /// A parameter is missing, malformed or unknown.
    public static func invalidRequest(_ detail: String) -> AdminError { .init(.invalidRequest, detail) }
    /// `tether admin-keys` was given an id no key has.
    public static func noSuchKey(_ id: UUID) -> AdminError { .init(.noSuchKey, "no admin key has the id \(id.lowercasedText)") }
    /// `tether history` was given a reference no user matches; `detail` says which.
    public static func noSuchUser(_ detail: String) -> AdminError { .init(.noSuchUser, detail) }

    public var description: String { detail }
}

extension AdminError: ProblemConvertible {
    public var problem: Problem {
        switch kind {
        case .missingKey, .invalidKey:
            // RFC 6750 §3.1: a request without credentials gets the challenge without an error code.
            Problem(status: 401, code: "invalid_token", title: "Invalid token", detail: detail, headers: [
                "WWW-Authenticate": kind == .missingKey ? "Bearer realm=\"tether-admin\"" : "Bearer realm=\"tether-admin\", error=\"invalid_token\"",
            ])
        case .forbidden:
            .forbidden(detail: detail)
        case .invalidRequest:
            .badRequest(detail: detail)
        case .noSuchKey, .noSuchUser:
            .notFound(detail: detail)
        }
    }
}
