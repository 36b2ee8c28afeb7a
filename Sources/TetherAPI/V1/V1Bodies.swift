import Foundation
import TetherCore
import TetherPostgres

/// `User` of API.md, read from the projections.
struct UserBody: JSONTextWritable, Sendable {
    struct Identity: Sendable {
        var provider: String
        var uid: String
        var email: String?
        var emailVerified: Bool
        var displayName: String?
        var linkedAt: String
        /// Whether the provider's relay address forwards mail (Apple's `email-disabled` / `email-enabled`);
        /// absent until the provider said.
        var emailForwarding: Bool?

        /// Unknown values are `null`, as in `User`, rather than absent (`emailForwarding` is absent unless known).
        func writeJSON(to output: inout [UInt8]) {
            JSONText.writeVerbatim(#"{"displayName":"#, to: &output)
            JSONText.writeString(displayName, to: &output)
            JSONText.writeVerbatim(#","email":"#, to: &output)
            JSONText.writeString(email, to: &output)
            if let emailForwarding {
                JSONText.writeVerbatim(#","emailForwarding":"#, to: &output)
                JSONText.writeBool(emailForwarding, to: &output)
            }
            JSONText.writeVerbatim(#","emailVerified":"#, to: &output)
            JSONText.writeBool(emailVerified, to: &output)
            JSONText.writeVerbatim(#","linkedAt":"#, to: &output)
            JSONText.writeString(linkedAt, to: &output)
            JSONText.writeVerbatim(#","provider":"#, to: &output)
            JSONText.writeString(provider, to: &output)
            JSONText.writeVerbatim(#","uid":"#, to: &output)
            JSONText.writeString(uid, to: &output)
            output.append(UInt8(ascii: "}"))
        }
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
    var mfa: [FactorBody]

    /// `identities` as answered: a password identity's address is proved exactly when the user's is and is
    /// the same address (a mailed code, a reset or a provider that vouches for it proves the user's address,
    /// which the password signs in with), whatever its identity recorded when it was linked.
    static func answered(_ identities: [Identity], email: String?, emailVerified: Bool) -> [Identity] {
        identities.map { identity in
            guard identity.provider == "password" else { return identity }
            var answered = identity
            answered.emailVerified = emailVerified && email.map(ExternalIdentity.normalize) == identity.uid
            return answered
        }
    }

    /// Whether the user's only identity is anonymous (``UserAccount/isAnonymous``).
    var isAnonymous: Bool { identities.count == 1 && identities[0].provider == ExternalIdentity.anonymousProvider }

    static func load(_ id: UUID, from database: PostgresClient) async throws -> UserBody {
        let users = try await database.query("""
            SELECT email, email_verified, display_name, photo_url, disabled, created_at, last_sign_in_at FROM users WHERE id = \(id)
            """)
        guard let row = users.first else { throw AccountError.notFound }
        let identities = try await database.query("""
            SELECT provider, provider_uid, email, email_verified, display_name, linked_at, email_forwarding FROM identities
            WHERE user_id = \(id) ORDER BY linked_at, provider
            """)
        let factors = try await FactorBody.loadConfirmed(of: id, from: database)
        let seal = try await database.readModelSeal()
        let email: String? = try row.decode("email", openedWith: seal)
        let emailVerified: Bool = try row.decode("email_verified")
        return UserBody(
            id: id, email: email, emailVerified: emailVerified,
            displayName: try row.decode("display_name", openedWith: seal), photoUrl: try row.decode("photo_url", openedWith: seal),
            disabled: try row.decode("disabled"),
            createdAt: ISO8601Milliseconds.format(try row.decode("created_at")),
            lastSignInAt: try row.decode("last_sign_in_at", as: Date?.self).map(ISO8601Milliseconds.format),
            identities: answered(try identities.map { identity in
                Identity(
                    provider: try identity.decode("provider"), uid: try identity.decode("provider_uid", openedWith: seal) ?? "",
                    email: try identity.decode("email", openedWith: seal), emailVerified: try identity.decode("email_verified"),
                    displayName: try identity.decode("display_name", openedWith: seal),
                    linkedAt: ISO8601Milliseconds.format(try identity.decode("linked_at")),
                    emailForwarding: try identity.decode("email_forwarding"))
            }, email: email, emailVerified: emailVerified),
            mfa: factors)
    }

    /// Members in UTF-8 order of their names; unknown values are `null`.
    func writeJSON(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"createdAt":"#, to: &output)
        JSONText.writeString(createdAt, to: &output)
        JSONText.writeVerbatim(#","disabled":"#, to: &output)
        JSONText.writeBool(disabled, to: &output)
        JSONText.writeVerbatim(#","displayName":"#, to: &output)
        JSONText.writeString(displayName, to: &output)
        JSONText.writeVerbatim(#","email":"#, to: &output)
        JSONText.writeString(email, to: &output)
        JSONText.writeVerbatim(#","emailVerified":"#, to: &output)
        JSONText.writeBool(emailVerified, to: &output)
        JSONText.writeVerbatim(#","id":"#, to: &output)
        JSONText.writeLowercased(id, to: &output)
        JSONText.writeVerbatim(#","identities":"#, to: &output)
        JSONText.writeArray(identities, to: &output) { $0.writeJSON(to: &$1) }
        JSONText.writeVerbatim(#","isAnonymous":"#, to: &output)
        JSONText.writeBool(isAnonymous, to: &output)
        JSONText.writeVerbatim(#","lastSignInAt":"#, to: &output)
        JSONText.writeString(lastSignInAt, to: &output)
        JSONText.writeVerbatim(#","mfa":"#, to: &output)
        JSONText.writeArray(mfa, to: &output) { $0.writeJSON(to: &$1) }
        JSONText.writeVerbatim(#","photoUrl":"#, to: &output)
        JSONText.writeString(photoUrl, to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

/// `{"user": User}`: the answer of the routes that change a user.
struct UserAnswer: JSONTextWritable, Sendable {
    var user: UserBody

    func writeJSON(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"user":"#, to: &output)
        user.writeJSON(to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

/// The `session` member of sign-in and refresh answers.
struct SessionBody: Sendable {
    var id: UUID
    var accessToken: String
    /// `DPoP` for a session bound to a device key (RFC 9449 §5), `Bearer` otherwise.
    var tokenType: String
    var expiresIn: Int
    var refreshToken: String

    func writeJSON(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"accessToken":"#, to: &output)
        JSONText.writeString(accessToken, to: &output)
        JSONText.writeVerbatim(#","expiresIn":"#, to: &output)
        JSONText.writeInteger(expiresIn, to: &output)
        JSONText.writeVerbatim(#","id":"#, to: &output)
        JSONText.writeLowercased(id, to: &output)
        JSONText.writeVerbatim(#","refreshToken":"#, to: &output)
        JSONText.writeString(refreshToken, to: &output)
        JSONText.writeVerbatim(#","tokenType":"#, to: &output)
        JSONText.writeString(tokenType, to: &output)
        output.append(UInt8(ascii: "}"))
    }

    init(id: UUID, accessToken: String, isBound: Bool, expiresIn: Int, refreshToken: String) {
        self.id = id
        self.accessToken = accessToken
        self.tokenType = isBound ? "DPoP" : "Bearer"
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
    }
}

/// The answer of a sign-in: `{"isNewUser", "session", "user"}`.
struct SignInResponse: JSONTextWritable, Sendable {
    var user: UserBody
    var isNewUser: Bool
    var session: SessionBody

    func writeJSON(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"isNewUser":"#, to: &output)
        JSONText.writeBool(isNewUser, to: &output)
        JSONText.writeVerbatim(#","session":"#, to: &output)
        session.writeJSON(to: &output)
        JSONText.writeVerbatim(#","user":"#, to: &output)
        user.writeJSON(to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

/// The answer of a refresh and of a second factor's sign-in: `{"session", "user"}`.
struct RefreshResponse: JSONTextWritable, Sendable {
    var user: UserBody
    var session: SessionBody

    func writeJSON(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"session":"#, to: &output)
        session.writeJSON(to: &output)
        JSONText.writeVerbatim(#","user":"#, to: &output)
        user.writeJSON(to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

/// A second factor as API.md shows it: `{"id","type","displayName","enrolledAt","phoneHint"?}`.
struct FactorBody: JSONTextWritable, Encodable, Sendable {
    var id: UUID
    var type: String
    var displayName: String?
    var enrolledAt: String
    var phoneHint: String?

    /// The user's confirmed factors, oldest first.
    static func loadConfirmed(of userId: UUID, from database: PostgresClient) async throws -> [FactorBody] {
        let seal = try await database.readModelSeal()
        return try await database.query("""
            SELECT id, type, display_name, phone_hint, enrolled_at FROM mfa_factors
            WHERE user_id = \(userId) AND confirmed_at IS NOT NULL ORDER BY enrolled_at, id
            """).map { row in
            FactorBody(
                id: try row.decode("id"), type: try row.decode("type"), displayName: try row.decode("display_name", openedWith: seal),
                enrolledAt: ISO8601Milliseconds.format(try row.decode("enrolled_at")), phoneHint: try row.decode("phone_hint", openedWith: seal))
        }
    }

    /// `phoneHint` only for phone factors; `displayName` always, `null` when unnamed.
    func writeJSON(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"displayName":"#, to: &output)
        JSONText.writeString(displayName, to: &output)
        JSONText.writeVerbatim(#","enrolledAt":"#, to: &output)
        JSONText.writeString(enrolledAt, to: &output)
        JSONText.writeVerbatim(#","id":"#, to: &output)
        JSONText.writeLowercased(id, to: &output)
        if let phoneHint {
            JSONText.writeVerbatim(#","phoneHint":"#, to: &output)
            JSONText.writeString(phoneHint, to: &output)
        }
        JSONText.writeVerbatim(#","type":"#, to: &output)
        JSONText.writeString(type, to: &output)
        output.append(UInt8(ascii: "}"))
    }

    /// The written text's value: a factor is also a member of the enrolment and challenge answers.
    func encode(to encoder: any Encoder) throws {
        try encodeWrittenJSON(to: encoder)
    }
}

extension UserBody {
    /// The user as `account` describes them: the same answer as ``load(_:from:)`` once the
    /// account's events are projected, without reading them back.
    init(_ account: UserAccount) {
        self.init(
            id: account.id, email: account.email, emailVerified: account.isEmailVerified, displayName: account.displayName,
            photoUrl: account.photoURL, disabled: account.isDisabled,
            createdAt: ISO8601Milliseconds.format(account.createdAt ?? Date(timeIntervalSince1970: 0)),
            lastSignInAt: account.lastSignInAt.map(ISO8601Milliseconds.format),
            identities: Self.answered(account.identities.values.sorted { ($0.linkedAt, $0.provider) < ($1.linkedAt, $1.provider) }.map { identity in
                Identity(
                    provider: identity.provider, uid: identity.uid, email: identity.email, emailVerified: identity.isEmailVerified,
                    displayName: identity.displayName, linkedAt: ISO8601Milliseconds.format(identity.linkedAt),
                    emailForwarding: identity.emailForwarding)
            }, email: account.email, emailVerified: account.isEmailVerified),
            mfa: account.mfa.confirmedFactors.map { factor in
                FactorBody(
                    id: factor.id, type: factor.type.rawValue, displayName: factor.displayName,
                    enrolledAt: ISO8601Milliseconds.format(factor.enrolledAt), phoneHint: factor.phoneNumber.map(PhoneNumber.hint))
            })
    }
}
