import Foundation

/// What an admin (Firebase's admin API) says a new user is.
public struct NewUserProfile: Sendable, Hashable {
    public var email: String?
    public var isEmailVerified: Bool
    public var displayName: String?
    public var photoURL: String?
    /// A uid of the developer's choosing (Firebase `localId`), kept as a `custom` identity.
    public var customUID: String?
    /// The password's hash, for a user with an email.
    public var passwordHash: String?
    public var isDisabled: Bool
    /// Provider identities the user arrives with (an import's `providerUserInfo`).
    public var identities: [ExternalIdentity] = []
    /// Developer claims (a JSON object's text).
    public var customClaims: String?

    public init(
        email: String? = nil, isEmailVerified: Bool = false, displayName: String? = nil, photoURL: String? = nil,
        customUID: String? = nil, passwordHash: String? = nil, isDisabled: Bool = false
    ) {
        self.email = email
        self.isEmailVerified = isEmailVerified
        self.displayName = displayName
        self.photoURL = photoURL
        self.customUID = customUID
        self.passwordHash = passwordHash
        self.isDisabled = isDisabled
    }
}

/// Profile decisions of admins and users: the Firebase surface's `accounts` (create) and `accounts:update`.
extension UserAccount {
    /// The provider of a uid a developer chose (Firebase custom auth): custom tokens for it sign the user in.
    public static let customProvider = "custom"

    /// The longest display name a user or an admin sets, in characters.
    public static let maximumDisplayNameLength = 100
    /// The longest photo URL a user or an admin sets, in UTF-8 bytes.
    public static let maximumPhotoURLLength = 2048

    /// Refuses a display name or photo URL longer than Tether keeps (`invalid_request`).
    public static func checkProfile(displayName: String?, photoURL: String?) throws(AccountError) {
        if let displayName, displayName.count > maximumDisplayNameLength {
            throw .invalidRequest("displayName is longer than \(maximumDisplayNameLength) characters.")
        }
        if let photoURL, photoURL.utf8.count > maximumPhotoURLLength {
            throw .invalidRequest("photoUrl is longer than \(maximumPhotoURLLength) bytes.")
        }
    }

    /// A user made by an admin, who may have no way to sign in yet (Firebase allows that).
    public static func create(id: UUID, profile: NewUserProfile) throws(AccountError) -> [AccountEvent] {
        try checkProfile(displayName: profile.displayName, photoURL: profile.photoURL)
        // One identity of each provider, as linking keeps it (an import naming two Google accounts for one user, say).
        var providers: Set<String> = profile.customUID == nil ? [] : [customProvider]
        if profile.passwordHash != nil { providers.insert("password") }
        for identity in profile.identities {
            guard providers.insert(identity.provider).inserted else {
                throw .invalidRequest("A user holds one identity of each provider; \(identity.provider) is named twice.")
            }
            if let oversized = ExternalIdentity.oversizedMember(uid: identity.uid, email: identity.email, names: [identity.displayName]) {
                throw .invalidRequest(oversized)
            }
            try checkProfile(displayName: nil, photoURL: identity.photoURL)
        }
        let personal = PersonalData(email: profile.email, displayName: profile.displayName, photoURL: profile.photoURL)
        var events: [AccountEvent] = [
            .userRegistered(.init(userId: id, emailVerified: profile.isEmailVerified && profile.email != nil, personal: personal)),
        ]
        if let uid = profile.customUID {
            events.append(.identityLinked(.init(provider: customProvider, uid: uid, emailVerified: false, personal: PersonalData())))
        }
        if let passwordHash = profile.passwordHash {
            guard let email = profile.email else { throw .invalidRequest("A password needs an email to sign in with.") }
            events.append(.identityLinked(.init(
                provider: "password", uid: ExternalIdentity.normalize(email), emailVerified: profile.isEmailVerified,
                personal: PersonalData(email: email))))
            events.append(.passwordSet(.init(personal: PersonalData(passwordHash: passwordHash))))
        }
        for identity in profile.identities {
            events.append(.identityLinked(.init(
                provider: identity.provider, uid: identity.uid, emailVerified: identity.isEmailVerified,
                personal: PersonalData(email: identity.email, displayName: identity.displayName, photoURL: identity.photoURL))))
        }
        if let claims = profile.customClaims, claims != "{}" {
            events.append(.customClaimsSet(.init(personal: PersonalData(customClaims: claims))))
        }
        if profile.isDisabled {
            events.append(.userDisabled(.init(reason: "created disabled")))
        }
        return events
    }

    /// Sets or clears the display name and photo URL, and sets the email's verification; nothing when nothing changes.
    public func updateProfile(
        displayName: String?, photoURL: String?, clearing cleared: Set<String>, emailVerified: Bool?
    ) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        try Self.checkProfile(displayName: displayName, photoURL: photoURL)
        if emailVerified == true, email == nil { throw .invalidRequest("The user has no email to mark verified.") }
        if emailVerified == false { try checkAddress(email, verified: false) }
        let changesName = cleared.contains("displayName") ? self.displayName != nil : displayName.map { $0 != self.displayName } ?? false
        let changesPhoto = cleared.contains("photoURL") ? self.photoURL != nil : photoURL.map { $0 != self.photoURL } ?? false
        let changesVerification = emailVerified.map { $0 != isEmailVerified } ?? false
        guard changesName || changesPhoto || changesVerification else { return [] }
        return [.profileUpdated(.init(
            personal: PersonalData(displayName: cleared.contains("displayName") ? nil : displayName,
                                   photoURL: cleared.contains("photoURL") ? nil : photoURL),
            cleared: cleared.sorted(), emailVerified: changesVerification ? emailVerified : nil))]
    }

    /// An admin sets the email address: a password identity moves to the new address (same password), in
    /// the same command. Nothing when the address and its verification are unchanged.
    public func changeEmail(to newEmail: String, verified: Bool) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        let normalized = ExternalIdentity.normalize(newEmail)
        guard normalized != email.map(ExternalIdentity.normalize) || newEmail != email || verified != isEmailVerified else { return [] }
        try checkAddress(newEmail, verified: verified)
        var events: [AccountEvent] = [.emailChanged(.init(personal: PersonalData(email: newEmail), emailVerified: verified))]
        // A reset or verification code proves the address it was mailed to, so it is refused while the account is
        // elsewhere; it is withdrawn, so that moving back (an undone change) does not make it good again.
        if normalized != email.map(ExternalIdentity.normalize) { events = withdrawing([.passwordReset, .verifyEmail]) + events }
        if let password = identities["password"], password.uid != normalized {
            guard let passwordHash else { throw .invalidRequest("The password identity has no password.") }
            events += unlinking(password, reason: "email_changed")
            events.append(.identityLinked(.init(
                provider: "password", uid: normalized, emailVerified: verified, personal: PersonalData(email: newEmail))))
            events.append(.passwordSet(.init(personal: PersonalData(passwordHash: passwordHash))))
        }
        return events
    }

    /// Replaces the developer claims (`{}` clears them).
    public func setCustomClaims(_ json: String) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        guard (customClaims ?? "{}") != json else { return [] }
        return [.customClaimsSet(.init(personal: PersonalData(customClaims: json)))]
    }

    /// An admin sets the password: added as a `password` identity on the user's email when there is none,
    /// replaced otherwise; either way every earlier token stops working (Firebase bumps `validSince`).
    public func setPassword(_ passwordHash: String, now: Date) throws(AccountError) -> [AccountEvent] {
        guard exists else { throw .notFound }
        var events: [AccountEvent] = []
        if identities["password"] == nil {
            guard let email else { throw .invalidRequest("A password needs an email to sign in with: set the email first.") }
            events.append(.identityLinked(.init(
                provider: "password", uid: ExternalIdentity.normalize(email), emailVerified: isEmailVerified, personal: PersonalData(email: email))))
        }
        events += upgradingFromAnonymous
        events += settingPassword(passwordHash)
        return events + (try revokeAllSessions(now: now))
    }
}
