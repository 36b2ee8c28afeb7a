import TetherCore
import TetherPostgres
import TetherProviders

/// Password sign-in looks accounts up in the `identities` projection.
extension AccountService: PasswordAccountDirectory {
    public func passwordAccount(forEmail email: String) async throws -> PasswordAccount? {
        let rows = try await database.query("""
            SELECT provider_uid, password_hash, email_verified FROM identities
            WHERE provider = 'password' AND provider_uid = \(ExternalIdentity.normalize(email)) AND password_hash IS NOT NULL
            """)
        guard let row = rows.first else { return nil }
        // The password identity's uid is the normalised email, which sign-in matches on.
        return PasswordAccount(
            email: try row.decode("provider_uid"), passwordHash: try row.decode("password_hash"),
            isEmailVerified: try row.decode("email_verified"))
    }
}
