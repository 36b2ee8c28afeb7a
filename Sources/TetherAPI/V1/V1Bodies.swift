import Foundation
import TetherCore
import TetherPostgres

/// `User` of API.md, read from the projections.
struct UserBody: Encodable, Sendable {
    struct Identity: Encodable, Sendable {
        var provider: String
        var uid: String
        var email: String?
        var emailVerified: Bool
        var displayName: String?
        var linkedAt: String
    }

    var id: UUID
    var email: String?
    var emailVerified: Bool
    var displayName: String?
    var photoUrl: String?
    var disabled: Bool
    var createdAt: String
    var lastSignInAt: String?
    var identities: [Identity]
    var mfa: [String] = []

    static func load(_ id: UUID, from database: PostgresClient) async throws -> UserBody {
        let users = try await database.query("""
            SELECT email, email_verified, display_name, photo_url, disabled, created_at, last_sign_in_at FROM users WHERE id = \(id)
            """)
        guard let row = users.first else { throw AccountError.notFound }
        let identities = try await database.query("""
            SELECT provider, provider_uid, email, email_verified, display_name, linked_at FROM identities
            WHERE user_id = \(id) ORDER BY linked_at, provider
            """)
        return UserBody(
            id: id, email: try row.decode("email"), emailVerified: try row.decode("email_verified"),
            displayName: try row.decode("display_name"), photoUrl: try row.decode("photo_url"), disabled: try row.decode("disabled"),
            createdAt: ISO8601Milliseconds.format(try row.decode("created_at")),
            lastSignInAt: try row.decode("last_sign_in_at", as: Date?.self).map(ISO8601Milliseconds.format),
            identities: try identities.map { identity in
                Identity(
                    provider: try identity.decode("provider"), uid: try identity.decode("provider_uid"),
                    email: try identity.decode("email"), emailVerified: try identity.decode("email_verified"),
                    displayName: try identity.decode("display_name"),
                    linkedAt: ISO8601Milliseconds.format(try identity.decode("linked_at")))
            })
    }

    func encode(to encoder: any Encoder) throws {
        enum Keys: String, CodingKey {
            case id, email, emailVerified, displayName, photoUrl, disabled, createdAt, lastSignInAt, identities, mfa
        }
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(id.uuidString.lowercased(), forKey: .id)
        try container.encode(email, forKey: .email)
        try container.encode(emailVerified, forKey: .emailVerified)
        try container.encode(displayName, forKey: .displayName)
        try container.encode(photoUrl, forKey: .photoUrl)
        try container.encode(disabled, forKey: .disabled)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(lastSignInAt, forKey: .lastSignInAt)
        try container.encode(identities, forKey: .identities)
        try container.encode(mfa, forKey: .mfa)
    }
}

/// The `session` member of sign-in and refresh answers.
struct SessionBody: Encodable, Sendable {
    var id: UUID
    var accessToken: String
    /// `DPoP` for a session bound to a device key (RFC 9449 §5), `Bearer` otherwise.
    var tokenType: String
    var expiresIn: Int
    var refreshToken: String

    init(id: UUID, accessToken: String, isBound: Bool, expiresIn: Int, refreshToken: String) {
        self.id = id
        self.accessToken = accessToken
        self.tokenType = isBound ? "DPoP" : "Bearer"
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
    }
}

struct SignInResponse: Encodable, Sendable {
    var user: UserBody
    var isNewUser: Bool
    var session: SessionBody
}

struct RefreshResponse: Encodable, Sendable {
    var user: UserBody
    var session: SessionBody
}
