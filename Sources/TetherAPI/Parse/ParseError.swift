import Foundation
import TetherCore
import TetherHTTP
import TetherJOSE
import TetherProviders

/// An error in Parse Server's wire form: `{"code": <int>, "error": "<message>"}`, answered 404 for
/// code 101, 500 for code 1 and 400 for every other code, unless a status is given (429, 503, 413).
///
/// The Parse SDKs retry 408, 425, 429, 500, 503 and 504, so a client's mistake is never a 5xx.
struct ParseError: Error, Sendable, Hashable {
    var code: Int
    var message: String
    /// A status other than the one Parse derives from the code.
    var status: Int?
    /// Extra headers (`Retry-After`, `x-rate-limit-reset`).
    var headers: [String: String] = [:]

    init(_ code: Int, _ message: String, status: Int? = nil, headers: [String: String] = [:]) {
        self.code = code
        self.message = message
        self.status = status
        self.headers = headers
    }

    // The codes of Parse's `Parse.Error` (the numbers Parse-Swift's `ParseError.Code` decodes).
    static let otherCause = -1
    static let internalServer = 1
    static let objectNotFound = 101
    static let invalidJSON = 107
    static let operationForbidden = 119
    static let invalidEmailAddress = 125
    static let scriptFailed = 141
    static let validationError = 142
    static let requestLimitExceeded = 155
    static let duplicateRequest = 159
    static let usernameMissing = 200
    static let passwordMissing = 201
    static let usernameTaken = 202
    static let emailTaken = 203
    static let sessionMissing = 206
    static let accountAlreadyLinked = 208
    static let invalidSessionToken = 209
    static let unsupportedService = 252

    static let authAlreadyUsed = ParseError(accountAlreadyLinked, "this auth is already used")
    static let unsupported = ParseError(unsupportedService, "This authentication method is unsupported.")
    static let invalidSession = ParseError(invalidSessionToken, "Invalid session token")
    /// A request id whose kept answer may not be replayed: Parse Server's answer to any repeat.
    static let duplicate = ParseError(duplicateRequest, "Duplicate request")
    static let objectMissing = ParseError(objectNotFound, "Object not found.")
    static let invalidLogin = ParseError(objectNotFound, "Invalid username/password.")
    static let usernameInUse = ParseError(usernameTaken, "Account already exists for this username.")
    static let emailInUse = ParseError(emailTaken, "Account already exists for this email address.")
    static let missingMFA = ParseError(otherCause, "Missing additional authData mfa")
    static let invalidMFAToken = ParseError(scriptFailed, "Invalid MFA token")
    static let enterMFAToken = ParseError(scriptFailed, "Please enter the token")
    static let internalError = ParseError(internalServer, "Internal server error.")

    var httpStatus: Int { status ?? (code == Self.objectNotFound ? 404 : code == Self.internalServer ? 500 : 400) }

    var response: HTTPResponse {
        var response = SurfaceJSON.response(.object(["code": .int(code), "error": .string(message)]), status: httpStatus)
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            response.headers[name] = value
        }
        return response
    }

    /// Parse Server's answer to a wrong or missing application id or key: 403, and no `code`.
    static var unauthorized: HTTPResponse { SurfaceJSON.response(.object(["error": "unauthorized"]), status: 403) }

    /// The Parse form of an error of the command layer, the providers or the HTTP layer.
    ///
    /// - Parameter provider: the provider whose credential was being checked, for Parse's per-provider
    ///   wording of a refused credential (Apple's "id token is invalid for this user.").
    init(converting error: any Error, provider: String? = nil) {
        switch error {
        case let error as ParseError:
            self = error
        case let error as AccountError:
            self = Self.from(error, provider: provider)
        case let error as ProviderError:
            self = Self.from(error, provider: provider ?? error.provider)
        case let error as WebhookDeliveryError:
            // The problem's sentence, not the error's detail: that one can name the webhook's host.
            self = ParseError(Self.internalServer, error.problem.detail ?? "The message could not be sent.", status: 503, headers: ["Retry-After": "1"])
        default:
            self = Self.from(Problem(converting: error) ?? .internal)
        }
    }

    private static func from(_ error: AccountError, provider: String?) -> ParseError {
        switch error.reason {
        case .invalidRequest: ParseError(validationError, error.detail)
        case .invalidCredential: provider.map(refusedCredential) ?? invalidLogin
        case .userDisabled: ParseError(operationForbidden, "This user is disabled.")
        case .accountExistsWithDifferentCredential, .emailAlreadyInUse: emailInUse
        case .credentialAlreadyInUse, .providerAlreadyLinked: authAlreadyUsed
        case .noSuchProvider, .notFound: objectMissing
        case .lastSignInMethod: ParseError(operationForbidden, error.detail)
        case .invalidToken, .refreshTokenReused, .invalidDPoPProof: invalidSession
        case .invalidCode, .mfaFactorNotFound, .invalidMFAPendingCredential: invalidMFAToken
        case .emailAlreadyVerified: ParseError(otherCause, error.detail)
        case .emailNotVerified: ParseError(operationForbidden, error.detail)
        case .recentLoginRequired: ParseError(operationForbidden, "This change needs a recent log-in: log in again, then retry.")
        case .rateLimited:
            rateLimited(retryAfter: error.retryAfterSeconds ?? 60, error.detail)
        }
    }

    private static func from(_ error: ProviderError, provider: String?) -> ParseError {
        if error.rejection != nil {
            return refusedCredential(provider: provider ?? "")
        }
        switch error.code {
        case "unsupported_provider": return unsupported
        case "provider_unavailable":
            return ParseError(internalServer, "The identity provider could not be reached; retry shortly.", status: 503, headers: ["Retry-After": "1"])
        default: return ParseError(validationError, error.clientSentence)
        }
    }

    private static func from(_ problem: Problem) -> ParseError {
        switch problem.status {
        case 413:
            return ParseError(otherCause, "request entity too large", status: 413)
        case 429:
            return rateLimited(retryAfter: Int(problem.headers["Retry-After"] ?? "") ?? 60, problem.detail ?? "Too many requests.")
        case 500...:
            var error = problem.status == 500 ? internalError : ParseError(internalServer, problem.detail ?? "Service unavailable.", status: problem.status)
            if let retryAfter = problem.headers["Retry-After"] { error.headers["Retry-After"] = retryAfter }
            return error
        case 400 where problem.code == "invalid_request":
            return ParseError(invalidJSON, problem.detail ?? "Invalid JSON")
        default:
            // 405 keeps its `Allow`.
            return ParseError(otherCause, problem.detail ?? problem.title, status: problem.status, headers: problem.headers["Allow"].map { ["Allow": $0] } ?? [:])
        }
    }

    /// 429 with the wait in `Retry-After`, and in `x-rate-limit-reset` (whole seconds) when it is short. Parse-Swift
    /// sleeps for that header's wait before each of its four retries of a 429: an hour's limit on mails held
    /// `requestPasswordReset` for four hours. Past ``longestWaitToSleep`` it gets no wait, and fails within seconds.
    private static func rateLimited(retryAfter: Int, _ message: String) -> ParseError {
        var headers = ["Retry-After": "\(retryAfter)"]
        if retryAfter <= longestWaitToSleep { headers["x-rate-limit-reset"] = "\(retryAfter)" }
        return ParseError(requestLimitExceeded, message, status: 429, headers: headers)
    }

    /// The longest wait, in seconds, that a 429 asks the SDKs to sleep through before retrying.
    static let longestWaitToSleep = 10

    /// Parse Server's 101 for a credential its provider refused, worded per provider.
    static func refusedCredential(provider: String) -> ParseError {
        switch provider {
        case "apple": ParseError(objectNotFound, "id token is invalid for this user.")
        case "facebook": ParseError(objectNotFound, "Facebook auth is invalid for this user.")
        case "google": ParseError(objectNotFound, "Google auth is invalid for this user.")
        case "password", "": invalidLogin
        default: ParseError(objectNotFound, "\(provider) auth is invalid for this user.")
        }
    }

    /// Parse Server's Apple adapter's 101s (WIRE-FACTS §5): the token's own `kid` and `iss` are read from
    /// its (refused, so unverified) header and payload only to word the message.
    static func appleRefusal(_ rejection: CredentialRejection, token: String, expectedIssuer: String) -> ParseError {
        let jws = try? CompactJWS(parsing: token)
        switch rejection {
        case .expired:
            return ParseError(objectNotFound, "jwt expired")
        case .issuer:
            let issuer = jws.flatMap { try? JOSEObject(parsing: $0.payload) }?["iss"]?.stringValue ?? "undefined"
            return ParseError(objectNotFound, "id token not issued by correct OpenID provider - expected: \(expectedIssuer) | from: \(issuer)")
        case .unknownKey:
            return ParseError(objectNotFound, "Unable to find matching key for Key ID: \(jws?.header.keyID ?? "undefined")")
        default:
            return refusedCredential(provider: "apple")
        }
    }

    /// The 101 for an `authData.<provider>.id` that is not the verified token's subject.
    static func subjectMismatch(provider: String) -> ParseError {
        provider == "apple" ? ParseError(objectNotFound, "auth data is invalid for this user.") : refusedCredential(provider: provider)
    }
}

/// JSON answers of the compatible surfaces (Parse, Firebase): always an object, members sorted.
enum SurfaceJSON {
    /// `value` as `application/json; charset=utf-8`, members sorted.
    /// `value` as `application/json; charset=utf-8`, members sorted; `subject`: the user it shows (``HTTPResponse/subject``).
    static func response(_ value: JSONValue, status: Int = 200, headers: HTTPHeaders = [:], subject: UUID? = nil) -> HTTPResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(value)) ?? Data("{}".utf8)
        var headers = headers
        headers["Content-Type"] = "application/json; charset=utf-8"
        var response = HTTPResponse(status: status, headers: headers, body: Array(body))
        response.subject = subject
        return response
    }
}
