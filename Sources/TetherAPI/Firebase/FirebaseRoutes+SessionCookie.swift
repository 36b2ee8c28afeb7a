import Foundation
import TetherCore

extension FirebaseRoutes {
    /// `projects/{projectId}:createSessionCookie` (firebase-admin's `create_session_cookie`), an admin call: a
    /// cookie of `validDuration` seconds (300 to 1,209,600; two weeks when absent or 0, as the emulator has it)
    /// for the user of a live ID token. It is stateless, as Firebase's are: revoking the user's tokens
    /// (`validSince`) or disabling them is what stops it, which `verify_session_cookie(check_revoked=True)`
    /// reads through `accounts:lookup`.
    func createSessionCookie(_ request: FirebaseRequest) async throws -> JSONValue {
        guard let idToken = try request.body.string("idToken"), !idToken.isEmpty else { throw FirebaseError("MISSING_ID_TOKEN") }
        let bounds = FirebaseIDTokens.sessionCookieLifetimes
        let refused = FirebaseError(
            "INVALID_DURATION", "validDuration is a whole number of seconds from \(bounds.lowerBound) to \(bounds.upperBound).")
        let asked: Int?
        do { asked = try request.body.integer("validDuration") } catch { throw refused }
        let lifetime = asked.flatMap { $0 == 0 ? nil : $0 } ?? bounds.upperBound
        guard bounds.contains(lifetime) else { throw refused }
        let (_, claims) = try await authenticate(idToken: idToken)
        return .object(["sessionCookie": .string(try await idTokens.sessionCookie(from: claims, lifetime: lifetime))])
    }
}
