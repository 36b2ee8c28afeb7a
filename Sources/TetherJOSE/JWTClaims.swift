import Foundation

/// The claim set of a JWT (RFC 7519 §4), with typed access to the registered claims.
public struct JWTClaims: Sendable, Hashable {
    /// All claims.
    public let object: JOSEObject

    /// Wraps a claim object.
    public init(_ object: JOSEObject) {
        self.object = object
    }

    /// The claim `name`, if present.
    public subscript(name: String) -> JOSEValue? { object[name] }

    /// `iss`, if it is a string.
    public var issuer: String? { object["iss"]?.stringValue }
    /// `sub`, if it is a string.
    public var subject: String? { object["sub"]?.stringValue }
    /// `jti`, if it is a string.
    public var jwtID: String? { object["jti"]?.stringValue }
    /// `aud` as a list: a single string becomes a one-element list (RFC 7519 §4.1.3).
    public var audience: [String] {
        switch object["aud"] {
        case .string(let audience)?: [audience]
        case .array(let entries)?: entries.compactMap(\.stringValue)
        default: []
        }
    }
    /// `exp` as a date, if it is a number.
    public var expiresAt: Date? { date("exp") }
    /// `nbf` as a date, if it is a number.
    public var notBefore: Date? { date("nbf") }
    /// `iat` as a date, if it is a number.
    public var issuedAt: Date? { date("iat") }

    private func date(_ name: String) -> Date? {
        object[name]?.numberValue.map(Date.init(timeIntervalSince1970:))
    }
}
