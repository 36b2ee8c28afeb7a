import Foundation
import TetherCore
import TetherHTTP

/// The new tokens a factor change or a link answers with (the SDKs put them in place of the user's): a new session
/// opened by the same command as the change, and only while the session the caller proved is still live under the
/// user's lock (``UserAccount/reissue(_:provider:continuing:now:)``).
///
/// The new session continues the caller's: its sign-in time, methods (a second factor included) and developer
/// claims carry over, so a reissue never renews the recent-sign-in window: a link proves the linked provider, not
/// the caller, and a stolen ID token that links the thief's own Facebook must not come out of it as a fresh sign-in
/// without the second factor, able to withdraw the factor and unlink the rest.
struct Reissue: Sendable {
    let claims: FirebaseIDTokenClaims
    /// A factor whose code the request just checked: it becomes the session's second factor.
    let proved: (id: UUID, type: MFAFactorType)?
    /// The method a link just added (its provider's): the session's first method from now on, as Firebase issues a
    /// link's tokens, and their refreshes, under the linked provider; an anonymous caller's method goes.
    var linked: String? = nil
    /// A fresh session, and its refresh token (its methods are the caller's, or the linked provider's first).
    let base: (session: NewSession, refreshToken: String)
    /// The command's time.
    let now: Date

    /// The session to open, continuing the caller's session as `account` holds it. The caller's session is the
    /// same before and after the command (a reissue leaves it live), so the decision and the answer agree.
    func session(in account: UserAccount) -> NewSession {
        var session = base.session
        let caller = account.sessions[claims.sessionId]
        session.authTime = caller?.authTime ?? claims.authTime
        if let caller {
            session.amr = caller.amr
            session.developerClaims = caller.developerClaims
            // A factor withdrawn by this very command is not named: FirebaseIDTokens names confirmed ones only.
            session.secondFactorId = caller.secondFactorId
        }
        let secondFactorMethods: Set<String> = [MFAMethod.totp.amr, MFAMethod.sms.amr, MFAMethod.recoveryCode.amr, "mfa"]
        if let linked {
            // The sign-in's second factor stays; its first method is the linked one.
            session.amr = AccountCommands.authenticationMethods(provider: linked) + session.amr.filter { secondFactorMethods.contains($0) }
        }
        if let proved {
            session.amr = session.amr.filter { !secondFactorMethods.contains($0) } + [(proved.type == .phone ? MFAMethod.sms : .totp).amr, "mfa"]
            session.secondFactorId = proved.id
        }
        return session
    }

    /// Opens the session on `account`, the state after the change, recorded as a sign-in with the linked provider,
    /// or else the caller's method.
    func decision(on account: UserAccount) throws -> [AccountEvent] {
        try account.reissue(
            session(in: account), provider: linked ?? FirebaseRoutes.tetherProvider(claims), continuing: claims.sessionId, now: now)
    }

    /// The command's follow-up: opens the session on the state after the factor change.
    var decide: AccountService.FollowUp {
        { [self] account in try decision(on: account) }
    }

    /// The answer: tokens of the session the command opened.
    func answer(_ account: UserAccount, _ routes: FirebaseRoutes) async throws -> JSONValue {
        let session = session(in: account)
        return .object(try await routes.tokens(
            account, session: session, refreshToken: base.refreshToken, signInProvider: FirebaseRoutes.signInProvider(amr: session.amr)))
    }
}
