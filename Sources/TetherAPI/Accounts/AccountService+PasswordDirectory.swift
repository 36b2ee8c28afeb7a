import TetherCore
import TetherPostgres
import TetherProviders

/// Password sign-in looks accounts up in the `identities` projection.
extension AccountService: PasswordAccountDirectory {
    public func passwordAccount(forEmail email: String) async throws -> PasswordAccount? {
        let seal = try await database.readModelSeal()
        let rows = try await database.query("""
            SELECT provider_uid, password_hash, email_verified FROM identities
            WHERE provider = 'password' AND provider_uid = \(try seal.seal(ExternalIdentity.normalize(email))) AND password_hash IS NOT NULL
            """)
        guard let row = rows.first, let uid = try row.decode("provider_uid", openedWith: seal),
              let passwordHash = try row.decode("password_hash", openedWith: seal) else { return nil }
        // The password identity's uid is the normalised email, which sign-in matches on.
        return PasswordAccount(
            email: uid, passwordHash: passwordHash,
            isEmailVerified: try row.decode("email_verified"))
    }
}
