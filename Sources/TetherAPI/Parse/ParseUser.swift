import Foundation
import TetherCore
import TetherCrypto
import TetherProviders

/// How a Tether user looks to Parse clients.
///
/// Ids are derived, never stored: a user's `objectId` is 10 letters and digits taken from the base64
/// of SHA-256 over the user id's 16 bytes (the unique index `users_parse_object_id` computes the same
/// in SQL, to find a user by it), and an authData user's `username` is 25 taken the same way from
/// SHA-512. A password user's username is the email they log in with.
enum ParseUser {
    /// The user's Parse `objectId`.
    static func objectId(of id: UUID) -> String {
        alphanumerics(of: DigestAlgorithm.sha256.hash(bytes(of: id)), count: 10)
    }

    /// A session's Parse `objectId` (sessions are only ever found by their token, so nothing looks it up).
    static func sessionObjectId(of id: UUID) -> String {
        alphanumerics(of: DigestAlgorithm.sha256.hash(Array("parse session".utf8) + bytes(of: id)), count: 10)
    }

    static func username(of account: UserAccount) -> String {
        if let password = account.identities[ProviderName.password.rawValue], let email = password.email { return email }
        return alphanumerics(of: DigestAlgorithm.sha512.hash(Array("parse username".utf8) + bytes(of: account.id)), count: 25)
    }

    /// Dates exactly as the Parse SDKs parse them: `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`.
    static func date(_ date: Date) -> String { ISO8601Milliseconds.format(date) }

    /// `{"__type":"Date","iso":…}`, the form of dates other than `createdAt` and `updatedAt`.
    static func typedDate(_ date: Date) -> JSONValue { .object(["__type": "Date", "iso": .string(Self.date(date))]) }

    /// The user as their own session (or the master key) reads them: no secret, no `null`, `authData`
    /// only when it has entries, its values strings (`mfa` as `{"status":"enabled"}`).
    ///
    /// - Parameter shownToAdmins: the master key (an admin key) reads an anonymous id as every admin reader
    ///   does, as its fingerprint (``SecretUID``): the id alone signs its user in.
    static func full(_ account: UserAccount, sessionToken: String? = nil, shownToAdmins: Bool = false) -> [String: JSONValue] {
        var body = fields(account)
        if let email = account.email {
            body["email"] = .string(email)
            body["emailVerified"] = .bool(account.isEmailVerified)
        }
        var authData: [String: JSONValue] = [:]
        for identity in account.identities.values where identity.provider != ProviderName.password.rawValue {
            let uid = shownToAdmins ? SecretUID.shown(provider: identity.provider, uid: identity.uid) : identity.uid
            authData[identity.provider] = .object(["id": .string(uid)])
        }
        if account.mfa.isRequired {
            authData["mfa"] = .object(["status": "enabled"])
        }
        if !authData.isEmpty { body["authData"] = .object(authData) }
        if let sessionToken { body["sessionToken"] = .string(sessionToken) }
        return body
    }

    /// What anyone may read of another user: never `authData`, never the email, so a password user's
    /// username (their email) is left out too.
    static func publicFields(_ account: UserAccount) -> [String: JSONValue] {
        fields(account, username: account.identities[ProviderName.password.rawValue] == nil)
    }

    /// `objectId`, `createdAt`, `updatedAt`, and `username` unless told otherwise.
    static func fields(_ account: UserAccount, username includesUsername: Bool = true) -> [String: JSONValue] {
        let createdAt = account.createdAt ?? Date(timeIntervalSince1970: 0)
        var fields: [String: JSONValue] = [
            "objectId": .string(objectId(of: account.id)),
            "createdAt": .string(date(createdAt)),
            "updatedAt": .string(date(account.updatedAt ?? createdAt)),
        ]
        if includesUsername { fields["username"] = .string(username(of: account)) }
        return fields
    }

    private static func bytes(of id: UUID) -> [UInt8] {
        withUnsafeBytes(of: id.uuid) { Array($0) }
    }

    /// The first `count` letters and digits of the base64 of `digest`.
    private static func alphanumerics(of digest: [UInt8], count: Int) -> String {
        String(Data(digest).base64EncodedString().filter { $0.isASCII && ($0.isLetter || $0.isNumber) }.prefix(count))
    }
}
