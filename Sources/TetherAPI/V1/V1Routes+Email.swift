import Foundation
import TetherCore
import TetherHTTP

/// `/v1`'s email flows: password reset, email verification and email change (``EmailFlows``).
extension V1Routes {
    private struct EmailBody: Decodable {
        var email: String
        var locale: String?
    }

    private struct CodeBody: Decodable {
        var code: String
    }

    private struct ResetBody: Decodable {
        var code: String
        var newPassword: String
    }

    private struct LocaleBody: Decodable {
        var locale: String?
    }

    /// The answer of every "send me a code" route: the same words whether or not a mail went.
    static var mailAccepted: HTTPResponse {
        get throws {
            try HTTPResponse.json(
                ["status": "accepted", "detail": "If the address can receive it, a mail with a code is on its way."], status: 202)
        }
    }

    func registerEmail(on router: inout Router) {
        // Each takes an Idempotency-Key like every other change: a retry after a lost answer gets the first one, and
        // neither sends a second mail (which would withdraw the first's code) nor finds its code spent.
        router.post("/v1/password-reset") { request in
            try await idempotency.respond(to: request, principal: nil) {
                let body = try request.decodeJSON(EmailBody.self)
                try await email.requestPasswordReset(email: body.email, emailRequest(request, nil, locale: body.locale))
                return try Self.mailAccepted
            }
        }
        router.post("/v1/password-reset/confirm") { request in
            try await idempotency.respond(to: request, principal: nil) {
                let body = try request.decodeJSON(ResetBody.self)
                let account = try await email.resetPassword(code: body.code, newPassword: body.newPassword, context: context(request, nil))
                return HTTPResponse.json(UserAnswer(user: UserBody(account)))
            }
        }
        router.post("/v1/users/me/email-verification") { request in
            try await once(request) { claims in
                let body = request.body.isEmpty ? LocaleBody() : try request.decodeJSON(LocaleBody.self)
                try await email.sendVerification(userId: claims.userId, emailRequest(request, claims.userId, locale: body.locale))
                return try Self.mailAccepted
            }
        }
        router.post("/v1/email-verification/confirm") { request in
            try await once(request, optional: true, endsItsSession: true) { caller in
                let body = try request.decodeJSON(CodeBody.self)
                let account = try await email.confirm(
                    code: body.code, purposes: [.verifyEmail, .changeEmail], caller: caller?.userId,
                    emailRequest(request, caller?.userId, locale: nil))
                return HTTPResponse.json(UserAnswer(user: UserBody(account)))
            }
        }
        router.post("/v1/users/me/email") { request in
            try await once(request) { claims in
                let body = try request.decodeJSON(EmailBody.self)
                try await email.requestEmailChange(
                    userId: claims.userId, to: body.email, authTime: claims.authTime, emailRequest(request, claims.userId, locale: body.locale))
                return try Self.mailAccepted
            }
        }
        router.post("/v1/email-change/undo") { request in
            try await idempotency.respond(to: request, principal: nil) {
                let body = try request.decodeJSON(CodeBody.self)
                let account = try await email.confirm(code: body.code, purposes: [.undoEmailChange], emailRequest(request, nil, locale: nil))
                return HTTPResponse.json(UserAnswer(user: UserBody(account)))
            }
        }
    }

    /// The flows' view of a request: its command context, the language its mail is written in (the
    /// body's `locale`, else `Accept-Language`), and its `Host` for `tether dev`'s links.
    func emailRequest(_ request: HTTPRequest, _ userId: UUID?, locale: String?) -> EmailFlows.Request {
        EmailFlows.Request(
            context: context(request, userId), locale: locale ?? request.headers["accept-language"], style: .tether,
            host: request.headers["host"])
    }
}
