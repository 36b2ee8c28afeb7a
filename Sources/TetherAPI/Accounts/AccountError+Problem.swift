import TetherCore
import TetherHTTP

/// Each account error is answered once, here, as the problem API.md names.
extension AccountError: ProblemConvertible {
    /// The HTTP status API.md gives the reason.
    public var status: Int {
        switch reason {
        case .invalidRequest: 400
        case .invalidCredential, .invalidToken, .refreshTokenReused, .invalidDPoPProof, .invalidCode, .recentLoginRequired,
             .invalidMFAPendingCredential: 401
        case .userDisabled, .emailNotVerified: 403
        case .noSuchProvider, .notFound, .mfaFactorNotFound: 404
        case .rateLimited: 429
        case .accountExistsWithDifferentCredential, .credentialAlreadyInUse, .providerAlreadyLinked,
             .emailAlreadyInUse, .lastSignInMethod, .emailAlreadyVerified: 409
        }
    }

    public var problem: Problem {
        var extensions: [String: JSONValue] = [:]
        if let email {
            extensions["email"] = .string(email)
            extensions["signInMethods"] = .array(signInMethods.map(JSONValue.string))
        }
        if let pointer { extensions["pointer"] = .string(pointer) }
        var headers: HTTPHeaders = [:]
        // Only a refused token or proof is challenged: RFC 6750's `invalid_token` tells a client its session is gone,
        // which a wrong code, a refused credential or a sign-in that is not recent enough do not mean.
        switch reason {
        case .invalidToken, .refreshTokenReused: headers.add(name: "WWW-Authenticate", value: TokenError.tokenChallenge)
        case .invalidDPoPProof: headers.add(name: "WWW-Authenticate", value: TokenError.proofChallenge)
        default: break
        }
        if let retryAfterSeconds {
            headers["Retry-After"] = String(retryAfterSeconds)
        }
        var problem = Problem(status: status, code: code, title: Self.titles[code] ?? "Request refused", detail: detail,
                              extensions: extensions, headers: headers)
        // The account holding the address is named (its sign-in methods): a kept copy of the answer is its.
        problem.subject = owner
        return problem
    }

    private static let titles: [String: String] = [
        "invalid_request": "Invalid request",
        "invalid_credential": "Invalid credential",
        "user_disabled": "User disabled",
        "account_exists_with_different_credential": "Account exists with a different credential",
        "credential_already_in_use": "Credential already in use",
        "provider_already_linked": "Provider already linked",
        "email_already_in_use": "Email already in use",
        "no_such_provider": "No such provider",
        "last_sign_in_method": "Last sign-in method",
        "invalid_token": "Invalid token",
        "refresh_token_reused": "Refresh token reused",
        "invalid_dpop_proof": "Invalid DPoP proof",
        "not_found": "Not found",
        "invalid_code": "Invalid code",
        "recent_login_required": "Recent sign-in required",
        "mfa_factor_not_found": "Second factor not found",
        "invalid_mfa_pending_credential": "Invalid MFA pending credential",
        "rate_limited": "Too many attempts",
        "email_already_verified": "Email already verified",
        "email_not_verified": "Email not verified",
    ]
}
