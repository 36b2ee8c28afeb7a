import TetherCrypto
import TetherHTTP
import TetherJOSE

/// A rejected access token or DPoP proof, answered as a 401 problem.
///
/// Two classes only, because clients act on them differently: `invalid_token`
/// means "sign in again", `invalid_dpop_proof` means "make a new proof (or
/// re-bind silently)". Which check failed goes into ``detail`` for logs and
/// for the problem's `detail`; the cause never changes the code.
public struct TokenError: ReasonCodedError, ProblemConvertible {
    private enum Kind: String, Sendable {
        case invalidToken = "invalid_token"
        case invalidDPoPProof = "invalid_dpop_proof"
    }

    private let kind: Kind
    /// Which check failed, safe to show to the caller (never token contents).
    public let detail: String

    private init(_ kind: Kind, detail: String = "") {
        self.kind = kind
        self.detail = detail
    }

    /// The problem code: `invalid_token` or `invalid_dpop_proof`.
    public var reason: String { kind.rawValue }

    /// The same error with `detail` attached.
    public func with(detail: String) -> TokenError { TokenError(kind, detail: detail) }

    /// The access token is malformed, forged, expired, or from another issuer.
    public static let invalidToken = TokenError(.invalidToken)
    /// The DPoP proof is missing, malformed, replayed, for another request, or by the wrong key.
    public static let invalidDPoPProof = TokenError(.invalidDPoPProof)

    /// The algorithms DPoPVerifier accepts by default, as the challenge's `algs` lists them.
    private static let proofAlgorithms = DPoPVerifier.Configuration().allowedAlgorithms.map(\.rawValue).sorted().joined(separator: " ")

    /// The challenges of an access token refused (RFC 6750 §3) and of a DPoP proof refused (RFC 9449 §7.1).
    static let tokenChallenge = #"Bearer error="invalid_token""#
    /// The same refusal of a request made in the DPoP scheme (RFC 9449 §7.1), with the algorithms a proof may use.
    static let dpopTokenChallenge = #"DPoP error="invalid_token", algs=""# + proofAlgorithms + "\""
    static let proofChallenge = #"DPoP error="invalid_dpop_proof", algs=""# + proofAlgorithms + "\""
    /// The challenge of a request that sent no access token (RFC 6750 §3.1: no error code): either scheme will do.
    static let noTokenChallenge = #"Bearer, DPoP algs=""# + proofAlgorithms + "\""

    /// 401 with the `WWW-Authenticate` challenge of the scheme concerned (RFC 6750 §3, RFC 9449 §7.1).
    public var problem: Problem {
        switch kind {
        case .invalidToken:
            Problem(status: 401, code: reason, title: "Invalid token", detail: detail.isEmpty ? nil : detail,
                    headers: ["WWW-Authenticate": Self.tokenChallenge])
        case .invalidDPoPProof:
            Problem(status: 401, code: reason, title: "Invalid DPoP proof", detail: detail.isEmpty ? nil : detail,
                    headers: ["WWW-Authenticate": Self.proofChallenge])
        }
    }
}
