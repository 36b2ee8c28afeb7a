import Foundation
import TetherCore
import TetherCrypto

/// `accounts:batchCreate`: firebase-admin's `import_users`, so a Firebase export moves in with its passwords.
extension FirebaseRoutes {
    /// Imports up to 1000 users. Passwords come as Firebase exports them: `hashAlgorithm` `SCRYPT` (Firebase's
    /// modified scrypt, with the project's `signerKey`, `saltSeparator`, `rounds`, `memoryCost`) or `BCRYPT`,
    /// each user's `passwordHash` and `salt` in base64; they are kept in that form and checked as Firebase
    /// checks them when the person signs in. Per-user failures go to `error` (singular, as firebase-admin reads
    /// it) and leave that user out; the others are imported.
    func batchCreate(_ request: FirebaseRequest) async throws -> JSONValue {
        let body = request.body
        let users = try body.objects("users")
        guard !users.isEmpty else { throw FirebaseError("MISSING_USER_ACCOUNT") }
        guard users.count <= 1000 else { throw FirebaseError("INVALID_ARGUMENT", "At most 1000 users a request.") }
        let algorithm = try body.string("hashAlgorithm")
        var errors: [JSONValue] = []
        for (index, member) in users.enumerated() {
            do {
                try await importUser(FirebaseBody(members: member), algorithm: algorithm, parameters: body, request)
            } catch {
                let message: String
                switch error {
                case let error as FirebaseError: message = error.message
                case let error as AccountError where error.reason == .credentialAlreadyInUse:
                    message = "localId or a provider identity belongs to an existing account - can not overwrite."
                case let error as AccountError where error.reason == .emailAlreadyInUse: message = "EMAIL_EXISTS"
                case let error as CryptoError: message = "Invalid password hash: \(error.detail)"
                case let error as AccountError: message = FirebaseError(converting: error).message
                // A failure of the server (the database went away) stops the batch: firebase-admin reports it.
                default: throw error
                }
                errors.append(.object(["index": .int(index), "message": .string(message)]))
            }
        }
        return .object(errors.isEmpty ? ["kind": "identitytoolkit#UploadAccountResponse"] : ["error": .array(errors)])
    }

    private func importUser(_ user: FirebaseBody, algorithm: String?, parameters: FirebaseBody, _ request: FirebaseRequest) async throws {
        guard let localId = try user.string("localId"), (1...128).contains(localId.utf8.count) else {
            throw FirebaseError("MISSING_LOCAL_ID")
        }
        if try await self.user(localId: localId) != nil {
            throw FirebaseError("DUPLICATE_LOCAL_ID", "localId belongs to an existing account - can not overwrite.")
        }
        // Lowercased and trimmed as every other path stores an address (``FirebaseBody/email(_:)``).
        let email = try user.email()
        if let email, !AccountCommands.isEmail(email) { throw FirebaseError("INVALID_EMAIL") }
        try Self.refuseGivenFactors(user)
        var passwordHash: String?
        if let hash = try user.string("passwordHash") {
            guard email != nil else { throw FirebaseError("MISSING_EMAIL", "A password needs an email to sign in with.") }
            passwordHash = try Self.importedHash(hash, salt: try user.string("salt"), algorithm: algorithm, parameters: parameters)
        }
        let emailVerified = try user.bool("emailVerified") ?? false
        var identities: [ExternalIdentity] = []
        for info in try user.objects("providerUserInfo") {
            let entry = FirebaseBody(members: info)
            guard let providerId = try entry.string("providerId"), let rawId = try entry.string("rawId"), !rawId.isEmpty else {
                throw FirebaseError("INVALID_ARGUMENT", "providerUserInfo entries need providerId and rawId.")
            }
            // Password and phone entries describe the user's own email and phone, not an identity of a provider.
            guard let provider = FirebaseProviders.tetherName(providerId), provider != "password" else { continue }
            identities.append(ExternalIdentity(
                provider: provider, uid: rawId, email: try entry.string("email"), isEmailVerified: provider != "facebook" && emailVerified,
                displayName: try entry.string("displayName"), photoURL: try entry.string("photoUrl")))
        }
        var profile = NewUserProfile(
            email: email, isEmailVerified: emailVerified, displayName: try user.string("displayName"),
            photoURL: try user.string("photoUrl"), customUID: localId, passwordHash: passwordHash, isDisabled: try user.bool("disabled") ?? false)
        profile.identities = identities
        profile.customClaims = try user.string("customAttributes").map { text throws(FirebaseError) in try Self.checkedClaims(text) }
        _ = try await accounts.createUser(profile, context: context(request))
    }

    /// The stored form of an exported hash.
    private static func importedHash(_ hash: String, salt: String?, algorithm: String?, parameters: FirebaseBody) throws -> String {
        guard let hashBytes = Self.base64(hash) else { throw FirebaseError("INVALID_ARGUMENT", "passwordHash is not base64.") }
        switch algorithm {
        case "SCRYPT":
            guard let signerKey = try parameters.string("signerKey").flatMap(Self.base64),
                  let rounds = try parameters.integer("rounds"), let memoryCost = try parameters.integer("memoryCost") else {
                throw FirebaseError("INVALID_ARGUMENT", "SCRYPT needs signerKey, rounds and memoryCost.")
            }
            let separator = try parameters.string("saltSeparator").flatMap(Self.base64) ?? []
            let saltBytes = try salt.map { text throws(FirebaseError) -> [UInt8] in
                guard let bytes = Self.base64(text) else { throw FirebaseError("INVALID_ARGUMENT", "salt is not base64.") }
                return bytes
            } ?? []
            return try ImportedPasswordHash.firebaseScrypt(
                hash: hashBytes, salt: saltBytes, signerKey: signerKey, saltSeparator: separator, rounds: rounds,
                memoryCost: memoryCost)
        case "BCRYPT":
            return try ImportedPasswordHash.bcrypt(String(decoding: hashBytes, as: UTF8.self))
        case let other?:
            throw FirebaseError("INVALID_HASH_ALGORITHM", "Tether imports SCRYPT and BCRYPT hashes, not \(other).")
        case nil:
            throw FirebaseError("MISSING_HASH_ALGORITHM")
        }
    }

    /// Base64 in either alphabet, padded or not: firebase-admin sends the URL-safe one, exports the standard one.
    private static func base64(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map(Array.init)
    }
}
