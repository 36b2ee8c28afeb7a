import Foundation
import TetherCore
import TetherHTTP

/// Parse's email routes (WIRE-FACTS §3d): `POST /parse/requestPasswordReset` and
/// `POST /parse/verificationEmailRequest`, and the link pages of Parse's mails, which send people on
/// to Tether's `/actions` pages.
///
/// Parse Server answers a verification request for an unknown address with 205, and for a verified one
/// with -1; Tether gives those answers to the master key only. Anyone else gets `{}` whatever the
/// address, as a password reset always answers, so nobody can probe which addresses have accounts.
extension ParseRoutes {
    func registerEmail(on router: inout Router) {
        router.post("/parse/requestPasswordReset") { request in
            try await answer(request, writes: true) { caller in try await mailCode(.passwordReset, request, caller) }
        }
        router.post("/parse/verificationEmailRequest") { request in
            try await answer(request, writes: true) { caller in try await mailCode(.verifyEmail, request, caller) }
        }
        // The links of Parse's mails: `token` is the code; they lead to the page that uses it.
        for (parse, page) in [("request_password_reset", "reset-password"), ("verify_email", "verify-email")] {
            router.get("/parse/apps/{appId}/\(parse)") { request in
                guard request.pathParameters["appId"] == appID else { return ParseError.objectMissing.response }
                var components = URLComponents()
                components.path = "/actions/\(page)"
                components.queryItems = request.query["token"].map { [URLQueryItem(name: "code", value: $0)] }
                return HTTPResponse(status: 302, headers: ["Location": components.string ?? "/actions/\(page)", "Cache-Control": "no-store"])
            }
        }
    }

    /// Both email routes: `{"email"}` → `{}`, Parse's 204 for a missing or empty address and 125 for one that
    /// is not a string.
    private func mailCode(_ purpose: EmailCodePurpose, _ request: HTTPRequest, _ caller: Caller) async throws -> HTTPResponse {
        let body = try Self.object(request)
        guard let value = body["email"], value != .null, value != .string("") else { throw ParseError(204, "you must provide an email") }
        guard case .string(let email) = value else { throw ParseError(ParseError.invalidEmailAddress, "you must provide a valid email string") }
        guard let flows = emailFlows, flows.sendsMail else { throw Self.emailUnconfigured }
        let revealing = caller.master != nil && purpose == .verifyEmail
        let flowRequest = EmailFlows.Request(
            context: context(request, caller), locale: request.headers["accept-language"], style: .parse(appID: appID),
            host: request.headers["host"])
        do {
            try await flows.mailCode(purpose, toOwnerOf: email, revealing: revealing, flowRequest)
        } catch let error as AccountError where error.reason == .invalidRequest && !revealing {
            // An address that is not one has no account either: the same `{}` as any unknown address.
        } catch let error as AccountError where error.reason == .notFound || error.reason == .invalidRequest {
            throw ParseError(205, "No user found with email \(email)")
        } catch let error as AccountError where error.reason == .emailAlreadyVerified {
            throw ParseError(ParseError.otherCause, "Email \(email) is already verified.")
        }
        return try HTTPResponse.json([String: String]())
    }

    /// Parse Server's answer when it has no email adapter or public URL: code 1, HTTP 500.
    static var emailUnconfigured: ParseError {
        ParseError(ParseError.internalServer, "An appName, publicServerURL, and emailAdapter are required for password reset and email verification functionality.")
    }
}
