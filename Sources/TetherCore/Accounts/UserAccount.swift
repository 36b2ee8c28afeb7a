import Foundation

/// One user as their event stream describes them: the state every decision is made on.
public struct UserAccount: Sendable, Hashable, Codable {
    /// An identity linked to the account.
    public struct Identity: Sendable, Hashable, Codable {
        public var provider: String
        public var uid: String
        public var email: String?
        public var isEmailVerified: Bool
        public var displayName: String?
        public var photoURL: String?
        public var linkedAt: Date
        /// Whether the provider forwards mail to the address it gave; nil until it said (Apple's relay).
        public var emailForwarding: Bool?
        /// The provider's token for the person's grant, when one was stored (`ProviderTokenStored`).
        public var grant: ProviderGrant?
        /// When a check of the grant last got an answer (`ProviderGrantChecked`, valid or revoked).
        public var grantCheckedAt: Date?
    }

    /// A session and where its refresh token has got to.
    public struct Session: Sendable, Hashable, Codable {
        public var id: UUID
        public var refreshTokenHash: String
        public var generation: Int
        public var authTime: Date
        public var amr: [String]
        public var jkt: String?
        public var startedAt: Date
        public var isActive: Bool
        public var secretKind: SessionSecretKind
        public var installationId: String?
        /// When a secret that does not rotate stops working.
        public var expiresAt: Date?
        /// Developer claims the session's tokens carry (a Firebase custom token's).
        public var developerClaims: String?
        /// When the session's provider grant was last checked (valid or revoked; nil: never).
        public var grantCheckedAt: Date?
        /// The second factor proved for the session, when one was.
        public var secondFactorId: UUID?
    }

    public let id: UUID
    /// The stream version the state was built from (0: the user does not exist).
    public private(set) var version = 0
    public private(set) var email: String?
    public private(set) var isEmailVerified = false
    public private(set) var displayName: String?
    public private(set) var photoURL: String?
    public private(set) var isDisabled = false
    /// Erased users keep their id and their events, but nothing about them can be read or done.
    public private(set) var isErased = false
    public private(set) var createdAt: Date?
    public private(set) var lastSignInAt: Date?
    /// When the user's own data (profile, identities, password, status, factors) last changed;
    /// sessions and sign-ins do not count (Parse's `updatedAt`).
    public private(set) var updatedAt: Date?
    /// Tokens issued before this instant are void.
    public private(set) var validSince: Date?
    /// Linked identities by provider (`password` included).
    public private(set) var identities: [String: Identity] = [:]
    public private(set) var passwordHash: String?
    /// When the password last became another one (set, reset or changed; not when an email change moved it to the
    /// new address): an undone email change takes back a password set after the change was asked for.
    public private(set) var passwordSetAt: Date?
    /// Live sessions by id (an ended one leaves the state: see `SessionEnded`).
    public private(set) var sessions: [UUID: Session] = [:]
    /// Second factors, recovery codes and open challenges.
    public private(set) var mfa = MFAState()
    /// Developer claims for Firebase ID tokens (a JSON object's text); nil when none are set.
    public private(set) var customClaims: String?
    /// Codes mailed to the user, by id (spent ones too, so that a second use is told apart from a wrong code).
    public private(set) var emailCodes: [UUID: EmailCode] = [:]

    /// An account that does not exist yet.
    public init(id: UUID) {
        self.id = id
    }

    /// Rebuilds the state from the events of the user's stream.
    public init(id: UUID, history: [(event: AccountEvent, at: Date)], version: Int) {
        self = UserAccount(id: id).appending(history, version: version)
    }

    /// The state after `history`, the events that follow this state's version, which leave the stream at `version`.
    public func appending(_ history: [(event: AccountEvent, at: Date)], version: Int) -> UserAccount {
        var account = self
        for (event, at) in history {
            account.apply(event, at: at)
        }
        account.version = version
        return account
    }

    /// Whether the user has been registered.
    public var exists: Bool { createdAt != nil && !isErased }

    /// The providers the user can sign in with, sorted.
    public var signInMethods: [String] { identities.keys.sorted() }

    /// Whether the user's only identity is an anonymous one (they have not signed up for real yet).
    public var isAnonymous: Bool {
        identities.count == 1 && identities[ExternalIdentity.anonymousProvider] != nil
    }

    /// The state after `event` (evolve).
    public mutating func apply(_ event: AccountEvent, at date: Date) {
        switch event {
        case .userRegistered, .identityLinked, .identityUnlinked, .emailVerified, .passwordSet, .userDisabled, .userEnabled,
             .userErased, .mfaFactorConfirmed, .mfaFactorRemoved, .profileUpdated, .customClaimsSet, .emailChanged:
            updatedAt = date
        default:
            break
        }
        switch event {
        case .userRegistered(let payload):
            createdAt = date
            email = payload.personal.email
            isEmailVerified = payload.emailVerified
            displayName = payload.personal.displayName
            photoURL = payload.personal.photoURL
        case .identityLinked(let payload):
            identities[payload.provider] = Identity(
                provider: payload.provider, uid: payload.uid, email: payload.personal.email,
                isEmailVerified: payload.emailVerified, displayName: payload.personal.displayName,
                photoURL: payload.personal.photoURL, linkedAt: date)
            if displayName == nil { displayName = payload.personal.displayName }
            if photoURL == nil { photoURL = payload.personal.photoURL }
            if email == nil, let linkedEmail = payload.personal.email {
                email = linkedEmail
                isEmailVerified = payload.emailVerified
            }
        case .identityUnlinked(let payload):
            identities[payload.provider] = nil
            // An email change moves the password to the new address (unlinked, linked, set again with the same hash):
            // it is the same password, set when it was.
            if payload.provider == "password", payload.reason != "email_changed" { (passwordHash, passwordSetAt) = (nil, nil) }
        case .emailVerified(let payload):
            email = payload.personal.email ?? email
            isEmailVerified = true
        case .passwordSet(let payload):
            if payload.personal.passwordHash != passwordHash { passwordSetAt = date }
            passwordHash = payload.personal.passwordHash
        case .signedIn:
            lastSignInAt = date
        case .sessionStarted(let payload):
            sessions[payload.sessionId] = Session(
                id: payload.sessionId, refreshTokenHash: payload.refreshTokenHash, generation: 0,
                authTime: payload.authTime, amr: payload.amr, jkt: payload.jkt, startedAt: date, isActive: true,
                secretKind: payload.secretKind, installationId: payload.installation, expiresAt: payload.expiresAt,
                developerClaims: payload.personal?.customClaims, secondFactorId: payload.secondFactorId)
        case .sessionRefreshed(let payload):
            sessions[payload.sessionId]?.refreshTokenHash = payload.refreshTokenHash
            sessions[payload.sessionId]?.generation = payload.generation
        case .sessionEnded(let payload):
            // An ended session decides nothing any more (its secrets are refused like unknown ones): the
            // state keeps live sessions only, so a user who signs in often does not grow it for good.
            sessions[payload.sessionId] = nil
        case .sessionsRevoked(let payload):
            validSince = payload.validSince
            sessions = [:]
        case .userDisabled:
            isDisabled = true
        case .userEnabled:
            isDisabled = false
        case .userErased:
            isErased = true
            isDisabled = true
            email = nil
            isEmailVerified = false
            displayName = nil
            photoURL = nil
            identities = [:]
            passwordHash = nil
            passwordSetAt = nil
            sessions = [:]
            mfa = MFAState()
            customClaims = nil
            emailCodes = [:]
        case .profileUpdated(let payload):
            if let name = payload.personal.displayName { displayName = name }
            if let photo = payload.personal.photoURL { photoURL = photo }
            if payload.cleared.contains("displayName") { displayName = nil }
            if payload.cleared.contains("photoURL") { photoURL = nil }
            if let verified = payload.emailVerified { isEmailVerified = verified && email != nil }
        case .customClaimsSet(let payload):
            customClaims = payload.personal.customClaims.flatMap { $0 == "{}" ? nil : $0 }
        case .emailChanged(let payload):
            email = payload.personal.email
            isEmailVerified = payload.emailVerified && payload.personal.email != nil
        case .mfaFactorEnrolled, .mfaFactorConfirmed, .mfaFactorRemoved, .mfaRecoveryCodesIssued, .mfaChallengeIssued,
             .mfaCodeSent, .mfaCodeDeliveryFailed, .mfaCodeAccepted, .mfaCodeRejected, .mfaRecoveryCodeUsed, .mfaChallengeEnded:
            mfa.apply(event, at: date)
        case .emailCodeIssued(let payload):
            emailCodes[payload.codeId] = EmailCode(
                id: payload.codeId, purpose: payload.purpose, email: payload.personal.email, codeHash: payload.personal.codeHash,
                issuedAt: date, expiresAt: payload.expiresAt, restoresVerified: payload.restoresVerified ?? false)
        case .emailCodeUsed(let payload):
            emailCodes[payload.codeId]?.apply(event)
        case .emailCodeExpired(let payload):
            emailCodes[payload.codeId]?.apply(event)
        case .emailCodeRefused(let payload):
            if let codeId = payload.codeId { emailCodes[codeId]?.apply(event) }
        case .emailCodeDeliveryFailed:
            break
        case .providerEmailStatusChanged(let payload):
            identities[payload.provider]?.emailForwarding = payload.forwarding
        case .providerTokenStored(let payload):
            if let token = payload.personal.providerToken {
                identities[payload.provider]?.grant = ProviderGrant(kind: payload.kind, token: token, clientId: payload.clientId)
            }
        case .providerGrantChecked(let payload):
            if payload.result != "unreachable" {
                sessions[payload.sessionId]?.grantCheckedAt = date
                identities[payload.provider]?.grantCheckedAt = date
            }
        case .providerCodeNotRedeemed, .providerTokenRevoked, .providerRevocationFailed, .providerRevocationAbandoned:
            break
        }
    }

    /// Sessions still usable, oldest first.
    public var activeSessions: [Session] {
        liveSessionAges(splittingOff: nil).others.sorted().map { sessions[$0.id]! }
    }

    /// Where a live session stands in age order: by its start, then by id.
    struct SessionAge: Comparable {
        var startedAt: Date
        var id: UUID

        static func < (lhs: SessionAge, rhs: SessionAge) -> Bool {
            lhs.startedAt != rhs.startedAt ? lhs.startedAt < rhs.startedAt : lhs.id.sortsBefore(rhs.id)
        }
    }

    /// The ages of the sessions still usable, those opened for `installation` apart, in no order.
    func liveSessionAges(splittingOff installation: String?) -> (others: [SessionAge], ofInstallation: [SessionAge]) {
        var others: [SessionAge] = [], ofInstallation: [SessionAge] = []
        others.reserveCapacity(sessions.count)
        forEachLiveSession(splittingOff: installation) { age, isOfInstallation in
            if isOfInstallation { ofInstallation.append(age) } else { others.append(age) }
        }
        return (others, ofInstallation)
    }

    /// Calls `body` with the age of each session still usable, in no order, and whether it was opened for
    /// `installation`. Only each session's start, id and installation are read: a user near ``maxLiveSessions``
    /// starts a session with every sign-in, and sorting copies of the sessions themselves (their hashes,
    /// methods and claims) was most of a sign-in's own work then.
    func forEachLiveSession(splittingOff installation: String?, _ body: (SessionAge, _ isOfInstallation: Bool) -> Void) {
        for index in sessions.indices where sessions.values[index].isActive {
            let age = SessionAge(startedAt: sessions.values[index].startedAt, id: sessions.keys[index])
            body(age, installation != nil && sessions.values[index].installationId == installation)
        }
    }
}
