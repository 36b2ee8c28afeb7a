import TetherCore

/// A request to mint an Apple, Facebook Limited Login or Google token.
///
/// Every member is optional. Beyond API.md's fields it takes what negative
/// tests need: absolute `iat`/`exp`, another `iss`, an `events` claim,
/// `emailVerified` as any JSON (the string "true", say), `claims` merged last
/// (`null` removes a claim), `header` members (another `kid`), and `forge` to
/// break the signature on purpose.
public struct DevTokenRequest: Decodable, Sendable {
    /// Ways to make a token that must be refused.
    enum Forgery: String, Decodable, Sendable {
        /// `alg: none` and an empty signature.
        case algNone = "alg-none"
        /// HS256 keyed with the provider's public key PEM (the algorithm-confusion attack).
        case hs256PublicKey = "hs256-public-key"
        /// A correct token with one signature bit flipped.
        case badSignature = "bad-signature"
    }

    var sub: String?
    var userId: String?
    var email: String?
    var emailVerified: JSONValue?
    var isPrivateEmail: JSONValue?
    var nonce: String?
    var rawNonce: String?
    var aud: JSONValue?
    var appId: String?
    var iss: String?
    var expiresIn: Double?
    var iat: Double?
    var exp: Double?
    var jti: String?
    var name: String?
    var givenName: String?
    var familyName: String?
    var picture: String?
    var realUserStatus: Int?
    var events: JSONValue?
    var claims: [String: JSONValue]?
    var header: [String: JSONValue]?
    var forge: Forgery?

    /// A request with every member left out: the provider's defaults.
    public init() {}
}
