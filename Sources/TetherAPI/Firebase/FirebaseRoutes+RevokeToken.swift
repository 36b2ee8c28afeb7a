import TetherCore

extension FirebaseRoutes {
    /// `accounts:revokeToken` (v2, WIRE-FACTS §6a, §6d): the iOS SDK's `revokeToken(withAuthorizationCode:)`,
    /// which an app calls before deleting a Sign in with Apple user, as Apple requires. The signed-in user's
    /// `idToken` and Apple's authorization code (`tokenType` "3", a code) of the user's own Apple ID; the code is
    /// redeemed with Apple and the refresh token it gives revoked at once (another person's code is refused, unrevoked). Answers `{}` once Apple confirmed it: the SDK takes any JSON
    /// object, and a server that cannot reach Apple says so (503) rather than let the app believe it revoked.
    func revokeToken(_ request: FirebaseRequest) async throws -> JSONValue {
        let body = request.body
        let (account, _) = try await authenticate(idToken: try body.string("idToken"))
        guard let providerId = try body.string("providerId"), !providerId.isEmpty else {
            throw FirebaseError("INVALID_PROVIDER_ID", "providerId is required.")
        }
        guard providerId == "apple.com" else { throw FirebaseError("INVALID_PROVIDER_ID", "Only apple.com tokens are revoked.") }
        let isCode = switch body.members["tokenType"] {
        case .string(let type)?: type == "3" || type == "CODE"
        case .int(3)?: true
        default: false
        }
        guard isCode else { throw FirebaseError("INVALID_ARGUMENT", "tokenType must be 3 (an authorization code).") }
        guard let code = try body.string("token"), !code.isEmpty else { throw FirebaseError("INVALID_ARGUMENT", "token is required.") }
        // Refused as Identity Toolkit words it (FirebaseError): no Apple client secret is OPERATION_NOT_ALLOWED,
        // another person's code or a caller without an Apple ID INVALID_IDP_RESPONSE.
        try await appleCodes.revoke(code, for: account)
        return .object([:])
    }
}
