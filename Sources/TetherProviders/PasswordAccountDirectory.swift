/// Where password sign-in looks up accounts by email (implemented by the accounts layer).
public protocol PasswordAccountDirectory: Sendable {
    /// The password account for `email`, or nil when there is none (or it has no password).
    func passwordAccount(forEmail email: String) async throws -> PasswordAccount?
}
