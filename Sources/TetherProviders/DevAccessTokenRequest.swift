/// A request to mint a classic Facebook access token for the fake Graph API.
///
/// `type` (default `USER`), `isValid` (default true), `expiresIn` (0 = never)
/// and `graphFault` shape what `debug_token` and `/me` later say about it;
/// `debug_token` reports them as given (an expired token still says
/// `is_valid: true`), so that each check of the verifier can be exercised alone.
/// `profileId` makes `/me` report another id than `debug_token` does.
public struct DevAccessTokenRequest: Decodable, Sendable {
    var userId: String
    var profileId: String?
    var email: String?
    var appId: String?
    var name: String?
    var firstName: String?
    var lastName: String?
    var picture: String?
    var type: String?
    var isValid: Bool?
    var expiresIn: Double?
    var graphFault: GraphFault?

    /// How the fake Graph API misbehaves for one token: after `delayMilliseconds`, answer `status` with `body`.
    struct GraphFault: Decodable, Sendable {
        var status: Int?
        var body: String?
        var delayMilliseconds: Int?
    }
}
