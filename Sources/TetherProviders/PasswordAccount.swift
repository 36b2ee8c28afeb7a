/// What password sign-in needs to know about an account.
public struct PasswordAccount: Sendable, Hashable {
    /// The email as the account stores it; it becomes the identity's `uid`.
    public var email: String
    /// The stored password hash (`$scrypt$…`).
    public var passwordHash: String
    /// Whether the account's email has been verified.
    public var isEmailVerified: Bool

    /// An account from its parts.
    public init(email: String, passwordHash: String, isEmailVerified: Bool) {
        self.email = email
        self.passwordHash = passwordHash
        self.isEmailVerified = isEmailVerified
    }
}
