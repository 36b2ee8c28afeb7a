import Foundation
import TetherCore
import TetherHTTP
import TetherProviders

/// The dev identity provider's minting from a route's JSON body, refusing a malformed one as the
/// routes do: `invalid_request` naming the member.
extension DevIdentityProvider {
    /// Mints in process the token `POST /dev-idp/<provider>/token` answers for the same JSON body.
    ///
    /// For code that runs beside the dev identity provider (the seed loader of
    /// `tether dev`): the token is the same real signed token a client gets over HTTP.
    ///
    /// - Parameters:
    ///   - provider: `apple`, `facebook` (a Limited Login token) or `google`.
    ///   - request: the members of the mint route's body (`sub`, `email`, `emailVerified`, `rawNonce`, …).
    /// - Throws: ``Problem`` (`invalid_request`, naming the member) when `request` does not have that shape.
    public func mintIDToken(_ provider: ProviderName, request: JSONValue) throws -> String {
        guard provider != .password else {
            throw Problem.badRequest(detail: "The dev identity provider mints no password tokens.")
        }
        return try mintToken(provider, try Self.decode(DevTokenRequest.self, from: request))
    }

    /// Mints in process the classic Facebook access token `POST /dev-idp/facebook/access-token` answers
    /// (`{userId, email?, name?, …}`); the fake Graph API then vouches for it.
    ///
    /// - Throws: ``Problem`` (`invalid_request`, naming the member) when `request` does not have that shape.
    public func mintFacebookAccessToken(request: JSONValue) throws -> String {
        mintAccessToken(try Self.decode(DevAccessTokenRequest.self, from: request))
    }

    /// Decodes a mint request from JSON already parsed, with the routes' error messages.
    private static func decode<Request: Decodable>(_ type: Request.Type, from value: JSONValue) throws(Problem) -> Request {
        do {
            return try JSONDecoder().decode(Request.self, from: try JSONEncoder().encode(value))
        } catch let error as DecodingError {
            throw Problem(decodingError: error)
        } catch {
            throw Problem.badRequest(detail: "The mint request is not a JSON object.")
        }
    }
}
