import Foundation
import TetherCore

/// A user as `accounts:lookup` and `accounts:batchGet` answer it (SEMANTICS §2, WIRE-FACTS §4):
/// `createdAt` and `lastLoginAt` in milliseconds and `validSince` in seconds, all as strings;
/// `providerUserInfo` with a non-empty `rawId` per provider (none for anonymous users or custom uids);
/// `passwordHash` only as a marker that a password exists, never the hash.
enum FirebaseUserRecord {
    /// What firebase-admin reads as "no hash shown" (base64 of `REDACTED`), and what tells the iOS SDK the
    /// user has a password.
    static let redactedHash = "UkVEQUNURUQ="

    static func json(_ account: UserAccount) -> JSONValue {
        var record: [String: JSONValue] = [
            "localId": .string(FirebaseRoutes.localId(of: account)),
            "emailVerified": .bool(account.isEmailVerified),
            "disabled": .bool(account.isDisabled),
            "createdAt": .string(milliseconds(account.createdAt ?? Date(timeIntervalSince1970: 0))),
            "providerUserInfo": .array(providerUserInfo(account)),
        ]
        if let email = account.email { record["email"] = .string(email) }
        if let name = account.displayName { record["displayName"] = .string(name) }
        if let photo = account.photoURL { record["photoUrl"] = .string(photo) }
        if let last = account.lastSignInAt { record["lastLoginAt"] = .string(milliseconds(last)) }
        if let validSince = account.validSince { record["validSince"] = .string(String(Int(validSince.timeIntervalSince1970.rounded(.down)))) }
        if let claims = account.customClaims { record["customAttributes"] = .string(claims) }
        if account.identities["password"] != nil { record["passwordHash"] = .string(redactedHash) }
        let factors = account.mfa.confirmedFactors
        if !factors.isEmpty { record["mfaInfo"] = .array(factors.map(mfaInfo)) }
        return .object(record)
    }

    static func providerUserInfo(_ account: UserAccount) -> [JSONValue] {
        account.identities.values.sorted { ($0.linkedAt, $0.provider) < ($1.linkedAt, $1.provider) }.compactMap { identity in
            guard let providerId = FirebaseProviders.firebaseName(identity.provider) else { return nil }
            let rawId = identity.provider == "password" ? identity.email ?? identity.uid : identity.uid
            var info: [String: JSONValue] = ["providerId": .string(providerId), "rawId": .string(rawId), "federatedId": .string(rawId)]
            if let email = identity.email { info["email"] = .string(email) }
            // A password's entry shows the user's name and photo as they are now, as Firebase rebuilds it on every
            // change; a provider's, what the provider said.
            let isPassword = identity.provider == "password"
            if let name = isPassword ? account.displayName : identity.displayName { info["displayName"] = .string(name) }
            if let photo = isPassword ? account.photoURL : identity.photoURL { info["photoUrl"] = .string(photo) }
            return .object(info)
        }
    }

    /// An `mfaInfo` entry: phone factors carry `phoneInfo` (masked), TOTP factors `totpInfo: {}`.
    static func mfaInfo(_ factor: MFAState.Factor) -> JSONValue {
        var info: [String: JSONValue] = [
            "mfaEnrollmentId": .string(factor.id.lowercasedText),
            "enrolledAt": .string(ISO8601Milliseconds.format(factor.enrolledAt)),
        ]
        if let name = factor.displayName { info["displayName"] = .string(name) }
        switch factor.type {
        case .phone: info["phoneInfo"] = .string(factor.phoneNumber.map(PhoneNumber.hint) ?? "")
        case .totp: info["totpInfo"] = .object([:])
        }
        return .object(info)
    }

    static func milliseconds(_ date: Date) -> String {
        String(Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }
}
