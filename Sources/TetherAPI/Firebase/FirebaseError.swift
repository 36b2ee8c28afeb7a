import Foundation
import TetherCore
import TetherHTTP
import TetherProviders

/// An error in the Identity Toolkit's wire form:
/// `{"error":{"code":400,"message":"CODE[ : detail]","errors":[{"message":…,"reason":"invalid","domain":"global"}]}}`
/// (`UNAUTHENTICATED`'s entry is the emulator's `authError` one).
///
/// firebase-admin reads only `error.message`, split at the first `:`, and maps the code to its exception
/// types; the client SDKs do the same. firebase-admin retries 500 and 503, so a client's mistake is a 400.
struct FirebaseError: Error, Sendable, Hashable {
    var code: String
    var detail: String?
    var status: Int

    init(_ code: String, _ detail: String? = nil, status: Int = 400) {
        self.code = code
        self.detail = detail
        self.status = status
    }

    var message: String { detail.map { "\(code) : \($0)" } ?? code }

    var response: HTTPResponse {
        // A refused `Authorization` header names itself as Google's APIs and the emulator do (WIRE-FACTS §0).
        let entry: JSONValue = code == Self.unauthenticated.code
            ? .object(["message": "Invalid Credentials", "reason": "authError", "location": "Authorization", "locationType": "header"])
            : .object(["message": .string(message), "reason": "invalid", "domain": "global"])
        return SurfaceJSON.response(
            .object(["error": .object(["code": .int(status), "message": .string(message), "errors": .array([entry])])]), status: status)
    }

    static let userNotFound = FirebaseError("USER_NOT_FOUND")
    static let invalidIDToken = FirebaseError("INVALID_ID_TOKEN")
    static let tokenExpired = FirebaseError("TOKEN_EXPIRED")
    static let userDisabled = FirebaseError("USER_DISABLED")
    static let emailExists = FirebaseError("EMAIL_EXISTS")
    static let federatedUserIdAlreadyLinked = FirebaseError("FEDERATED_USER_ID_ALREADY_LINKED")
    static let invalidLoginCredentials = FirebaseError("INVALID_LOGIN_CREDENTIALS")
    static let insufficientPermission = FirebaseError("INSUFFICIENT_PERMISSION", status: 403)

    /// 401 for a bad `Authorization` header on an admin call, as the emulator answers it.
    static let unauthenticated = FirebaseError(
        "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        status: 401)

    /// The Firebase form of an error of the command layer, the providers or the HTTP layer.
    ///
    /// - Parameter password: whether the refused credential was a password (`INVALID_LOGIN_CREDENTIALS`)
    ///   rather than an identity provider's token (`INVALID_IDP_RESPONSE`).
    init(converting error: any Error, password: Bool = false) {
        switch error {
        case let error as FirebaseError:
            self = error
        case let error as AccountError:
            self = Self.from(error, password: password)
        case let error as ProviderError:
            self = Self.from(error, password: password)
        case let error as WebhookDeliveryError:
            self = FirebaseError("QUOTA_EXCEEDED", error.problem.detail, status: 503)
        default:
            self = Self.from(Problem(converting: error) ?? .internal)
        }
    }

    private static func from(_ error: AccountError, password: Bool) -> FirebaseError {
        switch error.reason {
        case .invalidRequest:
            switch error {
            case .secondFactorLimit: FirebaseError("SECOND_FACTOR_LIMIT_EXCEEDED")
            case .invalidPhoneNumber: FirebaseError("INVALID_PHONE_NUMBER", error.detail)
            case .anonymousEmailChange: FirebaseError("OPERATION_NOT_ALLOWED", error.detail)
            default: FirebaseError("INVALID_ARGUMENT", error.detail)
            }
        case .invalidCredential: password ? invalidLoginCredentials : FirebaseError("INVALID_IDP_RESPONSE", error.detail)
        case .userDisabled: userDisabled
        case .accountExistsWithDifferentCredential, .emailAlreadyInUse: emailExists
        case .credentialAlreadyInUse: federatedUserIdAlreadyLinked
        case .providerAlreadyLinked: FirebaseError("PROVIDER_ALREADY_LINKED")
        case .noSuchProvider: FirebaseError("INVALID_PROVIDER_ID", error.detail)
        case .lastSignInMethod: FirebaseError("OPERATION_NOT_ALLOWED", error.detail)
        case .invalidToken, .refreshTokenReused, .invalidDPoPProof: tokenExpired
        case .notFound: userNotFound
        case .invalidCode: FirebaseError("INVALID_CODE", error.detail)
        case .recentLoginRequired: FirebaseError("CREDENTIAL_TOO_OLD_LOGIN_AGAIN")
        case .mfaFactorNotFound: FirebaseError("MFA_ENROLLMENT_NOT_FOUND")
        case .invalidMFAPendingCredential: FirebaseError("INVALID_MFA_PENDING_CREDENTIAL")
        case .rateLimited: FirebaseError("TOO_MANY_ATTEMPTS_TRY_LATER", error.detail)
        case .emailAlreadyVerified: FirebaseError("INVALID_ARGUMENT", error.detail)
        case .emailNotVerified: FirebaseError("UNVERIFIED_EMAIL", error.detail)
        }
    }

    /// The message says the error's ``ProviderError/clientSentence``, never its ``ProviderError/detail``: that one is
    /// for logs, and can name a provider's internal answer or a setting of this server.
    private static func from(_ error: ProviderError, password: Bool) -> FirebaseError {
        let sentence = error.clientSentence
        if let rejection = error.rejection {
            switch rejection {
            case .nonceMissing, .nonceMismatch, .nonceReused: return FirebaseError("MISSING_OR_INVALID_NONCE", sentence)
            case .password: return invalidLoginCredentials
            default: return password ? invalidLoginCredentials : FirebaseError("INVALID_IDP_RESPONSE", sentence)
            }
        }
        switch error.code {
        case "unsupported_provider":
            // A provider Identity Toolkit knows, switched off on this server (an unknown providerId is the route's
            // INVALID_PROVIDER_ID): anonymous sign-up a project does not allow is ADMIN_ONLY_OPERATION (WIRE-FACTS §1c),
            // passwords PASSWORD_LOGIN_DISABLED, any other provider OPERATION_NOT_ALLOWED (the SDKs' operationNotAllowed).
            return switch error.provider {
            case ExternalIdentity.anonymousProvider?: FirebaseError("ADMIN_ONLY_OPERATION", sentence)
            case ProviderName.password.rawValue?: FirebaseError("PASSWORD_LOGIN_DISABLED", sentence)
            default: FirebaseError("OPERATION_NOT_ALLOWED", sentence)
            }
        case "provider_unavailable": return FirebaseError("UNAVAILABLE", "The identity provider could not be reached; retry shortly.", status: 503)
        default: return password && error.detail.contains("password") ? FirebaseError("WEAK_PASSWORD", sentence) : FirebaseError("INVALID_ARGUMENT", sentence)
        }
    }

    private static func from(_ problem: Problem) -> FirebaseError {
        switch problem.status {
        case 413: FirebaseError("INVALID_ARGUMENT", "The request body is too large.", status: 413)
        case 404: FirebaseError("NOT_FOUND", "Not Found", status: 404)
        case 405: FirebaseError("NOT_FOUND", "Not Found", status: 404)
        case 500: FirebaseError("INTERNAL_ERROR", nil, status: 500)
        case 501...: FirebaseError("UNAVAILABLE", problem.detail, status: problem.status)
        default: FirebaseError("INVALID_ARGUMENT", problem.detail ?? problem.title, status: problem.status)
        }
    }
}
