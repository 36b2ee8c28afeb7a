import Foundation

/// Why an account command was refused: a ``Reason`` with a stable code, mapped once by each
/// surface to its own wire form (for `/v1`, a status and a problem; see `AccountError+Problem`).
public struct AccountError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, for a surface to switch on; its raw value is API.md's machine code.
    public enum Reason: String, Sendable, Hashable, CaseIterable {
        case invalidRequest = "invalid_request"
        case invalidCredential = "invalid_credential"
        case userDisabled = "user_disabled"
        case accountExistsWithDifferentCredential = "account_exists_with_different_credential"
        case credentialAlreadyInUse = "credential_already_in_use"
        case providerAlreadyLinked = "provider_already_linked"
        case emailAlreadyInUse = "email_already_in_use"
        case noSuchProvider = "no_such_provider"
        case lastSignInMethod = "last_sign_in_method"
        case invalidToken = "invalid_token"
        case refreshTokenReused = "refresh_token_reused"
        case invalidDPoPProof = "invalid_dpop_proof"
        case notFound = "not_found"
        case invalidCode = "invalid_code"
        case recentLoginRequired = "recent_login_required"
        case mfaFactorNotFound = "mfa_factor_not_found"
        case invalidMFAPendingCredential = "invalid_mfa_pending_credential"
        case rateLimited = "rate_limited"
        case emailAlreadyVerified = "email_already_verified"
        case emailNotVerified = "email_not_verified"
    }

    /// What went wrong.
    public var reason: Reason { kind }
    private let kind: Reason
    /// A sentence for people; never a secret.
    public let detail: String
    /// For `account_exists_with_different_credential`: the email and how its owner signs in.
    public let email: String?
    /// Sign-in methods (providers) of the account that owns the email.
    public let signInMethods: [String]
    /// For `rate_limited`: whole seconds until a retry may succeed.
    public let retryAfterSeconds: Int?
    /// For `invalid_request`: an RFC 6901 pointer to the member of the request body it is about, when one is.
    public let pointer: String?
    /// For `account_exists_with_different_credential`: the account that holds the email, whose the answer is (a copy
    /// kept for retries goes when they are erased); never sent.
    public let owner: UUID?

    private init(
        _ kind: Reason, _ detail: String, email: String? = nil, signInMethods: [String] = [], retryAfterSeconds: Int? = nil,
        pointer: String? = nil, owner: UUID? = nil
    ) {
        self.owner = owner
        self.kind = kind
        self.detail = detail
        self.email = email
        self.signInMethods = signInMethods
        self.retryAfterSeconds = retryAfterSeconds
        self.pointer = pointer
    }

    /// The stable machine code of API.md.
    public var code: String { kind.rawValue }

    public var description: String { "\(code): \(detail)" }

    public static func invalidRequest(_ detail: String, pointer: String? = nil) -> AccountError {
        .init(.invalidRequest, detail, pointer: pointer)
    }
    public static let invalidCredential = AccountError(.invalidCredential, "The credential was not accepted.")
    public static let userDisabled = AccountError(.userDisabled, "This account is disabled.")
    public static func accountExistsWithDifferentCredential(email: String, signInMethods: [String], owner: UUID?) -> AccountError {
        .init(.accountExistsWithDifferentCredential,
              "An account already exists with this email; sign in with one of its methods, then link this one.",
              email: email, signInMethods: signInMethods, owner: owner)
    }
    public static let credentialAlreadyInUse = AccountError(
        .credentialAlreadyInUse, "This credential is already linked to an account.")
    public static let providerAlreadyLinked = AccountError(
        .providerAlreadyLinked, "An identity of this provider is already linked to the account.")
    public static let emailAlreadyInUse = AccountError(.emailAlreadyInUse, "Another account uses this email address.")
    public static func noSuchProvider(_ provider: String) -> AccountError {
        .init(.noSuchProvider, "No \(provider) identity is linked to the account.")
    }
    public static let lastSignInMethod = AccountError(
        .lastSignInMethod, "This is the account's last way to sign in; link another before removing it.")
    public static let anonymousSecondFactor = AccountError(
        .invalidRequest, "An anonymous user has no sign-in for a second factor to guard: link a provider or set a password first.")
    public static let totpSecretInUse = AccountError(.invalidRequest, "This TOTP secret is already a second factor of the user.")
    public static let customIdentityKept = AccountError(
        .invalidRequest, "The custom identity is the uid the developer gave this user (its Firebase localId); it cannot be removed.")
    public static let anonymousIdentityKept = AccountError(
        .invalidRequest, "An anonymous user's identity is its only way in and what makes it anonymous (and swept); it is not removed: disable or erase the user instead.")
    public static let invalidToken = AccountError(.invalidToken, "The token is invalid, expired or revoked.")
    public static let refreshTokenReused = AccountError(
        .refreshTokenReused, "This refresh token was already used; the session has been ended.")
    public static let invalidDPoPProof = AccountError(.invalidDPoPProof, "A valid DPoP proof by the session's key is required.")
    public static let notFound = AccountError(.notFound, "No such user.")
    /// A wrong, expired or reused second-factor code; `remaining` tries are left on the challenge.
    public static func invalidCode(_ detail: String) -> AccountError { .init(.invalidCode, detail) }
    /// A mailed code that matches none of the user's (or a user who is gone).
    public static let unknownEmailCodeDetail = "This code is not valid: check the link, or ask for a new code."
    /// An enrolment past the cap of second factors (a surface may tell it apart: Firebase's `SECOND_FACTOR_LIMIT_EXCEEDED`).
    public static let secondFactorLimit = AccountError.invalidRequest("A user may hold at most \(UserAccount.maxFactors) second factors.")
    /// A phone factor's number that is not E.164 (Firebase's `INVALID_PHONE_NUMBER`).
    public static let invalidPhoneNumber = AccountError.invalidRequest("phoneNumber must be in E.164 form, like +15555550100.")
    /// A mailed code withdrawn before its expiry: a newer code of its kind, or a change to the account (a new
    /// password, another address, every session ended), took its place.
    public static let withdrawnCode = AccountError(
        .invalidCode, "This code was replaced by a newer one or by a change to the account; use the latest mail, or ask for a new code.")
    /// A mailed code presented after its expiry (a surface may tell it apart: Firebase's `EXPIRED_OOB_CODE`).
    public static let expiredCode = AccountError(.invalidCode, "This code has expired; ask for a new one.")
    public static let emailAlreadyVerified = AccountError(.emailAlreadyVerified, "The account's email address is already verified.")
    public static let recentLoginRequired = AccountError(
        .recentLoginRequired, "This change needs a sign-in within the last 5 minutes; sign in again and retry.")
    /// A second factor for an account whose address nobody proved (Firebase's `UNVERIFIED_EMAIL`).
    public static let unprovedEmailSecondFactor = AccountError(
        .emailNotVerified, "A second factor guards a proved email address: verify the account's email first, then enrol.")
    /// An email change of an anonymous user, who could not sign in with the address (the change ends every session).
    public static let anonymousEmailChange = AccountError(
        .invalidRequest, "An anonymous user adds an email address with a password or a provider (an upgrade), not by an email change.")
    /// An address nobody proved, for an account with second factors.
    public static let unprovedEmailWithSecondFactor = AccountError(
        .emailNotVerified,
        "This account has a second factor, so its email address must be a proved one: prove it by mail, or use a credential whose provider verified it.")
    public static let mfaFactorNotFound = AccountError(.mfaFactorNotFound, "The user has no such second factor.")
    /// A session to end that is none of the user's live ones.
    public static let sessionNotFound = AccountError(.notFound, "The user has no live session with this id.")
    public static func invalidMFAPendingCredential(_ detail: String) -> AccountError { .init(.invalidMFAPendingCredential, detail) }
    public static func rateLimited(retryAfterSeconds: Int, _ detail: String) -> AccountError {
        .init(.rateLimited, detail, retryAfterSeconds: max(1, retryAfterSeconds))
    }
}
