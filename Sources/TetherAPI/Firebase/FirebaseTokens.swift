import Foundation
import TetherCore
import TetherJOSE

/// The Firebase surface's sessions: an opaque refresh token (`ftr_` and 43 characters, stored hashed,
/// rotated by the Secure Token API) beside RS256 ID tokens of an hour.
struct FirebaseTokenFormat: SessionSecretFormat {
    static let format = OpaqueSecretFormat(prefix: "ftr_")
    var kind: SessionSecretKind { .firebaseTokens }
    func newSecret() -> String { Self.format.generate() }
    func hash(_ secret: String) -> String { Self.format.hash(secret) }
}

/// What a verified Firebase ID token says.
struct FirebaseIDTokenClaims: Sendable {
    /// `sub`: the Firebase `localId`.
    var localId: String
    /// The Tether session the token belongs to (`firebase.tether_session`).
    var sessionId: UUID
    var issuedAt: Date
    var authTime: Date
    var signInProvider: String
    /// Every claim of the token, as signed.
    var all: JOSEObject
}

/// Signs and verifies Firebase ID tokens with Tether's RS256 keys (`/.well-known/firebase-jwks.json`).
///
/// Claims as Firebase writes them (SEMANTICS §2): `iss` `https://securetoken.google.com/<project>`, `aud`
/// the project, `sub` = `user_id` = the localId, `auth_time`, `iat`, `exp` an hour later, `email`,
/// `email_verified`, `name`, `picture`, `firebase.identities` and `firebase.sign_in_provider`
/// (`sign_in_second_factor` and `second_factor_identifier` after a second factor), `provider_id: "anonymous"`
/// for anonymous users, and the
/// user's developer claims at the top level. `firebase.tether_session` names the session, so a token
/// stops working when its session ends, whatever its `exp` says.
public struct FirebaseIDTokens: Sendable {
    public let projectID: String
    public let keys: SigningKeyStore
    public static let lifetime: TimeInterval = 3600

    /// The ring's periods: session cookies, signed by the same keys, live up to two weeks, so a key stays
    /// published that long after its successor starts signing (not the hour of an ID token).
    public static let keyConfiguration = SigningKeyStore.Configuration(
        maximumTokenLifetime: max(lifetime, TimeInterval(sessionCookieLifetimes.upperBound)))

    /// Tokens signed by `keys`, which must stay published as long as a session cookie lives.
    public init(projectID: String, keys: SigningKeyStore) {
        precondition(keys.configuration.maximumTokenLifetime >= TimeInterval(Self.sessionCookieLifetimes.upperBound),
                     "Firebase's signing keys must stay published as long as a session cookie lives")
        self.projectID = projectID
        self.keys = keys
    }
    /// Claim names developers may not set (firebase-admin's list, and the emulator's).
    static let reservedClaims: Set<String> = [
        "acr", "amr", "at_hash", "aud", "auth_time", "azp", "cnf", "c_hash", "exp", "firebase", "iat", "iss", "jti", "nbf", "nonce",
        "sub",
    ]

    /// Claims that say who the person is: only the server writes them, whatever developer claims hold.
    static let identityClaims: Set<String> = ["email", "email_verified", "name", "picture", "user_id", "provider_id", "phone_number"]

    var issuer: String { "https://securetoken.google.com/\(projectID)" }

    /// A token for `account`'s session `sessionId`.
    ///
    /// - Parameters:
    ///   - secondFactor: `sign_in_second_factor` (`phone`, `totp`), and `secondFactorId` its enrolment
    ///     (`second_factor_identifier`).
    ///   - developerClaims: the session's own claims (a custom token's), laid over the user's.
    public func issue(
        _ account: UserAccount, localId: String, sessionId: UUID, authTime: Date, signInProvider: String, secondFactor: String?,
        secondFactorId: UUID? = nil, developerClaims: String? = nil, now: Date = Date()
    ) async throws -> String {
        let key = try await keys.currentSigningKey()
        let issuedAt = now.timeIntervalSince1970.rounded(.down)
        var claims: JOSEObject = [:]
        for custom in [account.customClaims, developerClaims].compactMap({ $0 }) {
            guard let object = try? JOSEObject(parsing: Array(custom.utf8)) else { continue }
            for (name, value) in object.members where !Self.reservedClaims.contains(name) && !Self.identityClaims.contains(name) {
                claims[name] = value
            }
        }
        // One key per provider identity, and `email`; a password sign-in has no key of its own (Firebase's rule).
        var identities: JOSEObject = [:]
        for identity in account.identities.values where identity.provider != "password" {
            guard let provider = FirebaseProviders.firebaseName(identity.provider) else { continue }
            identities[provider] = .array([.string(identity.uid)])
        }
        if let email = account.email { identities["email"] = .array([.string(email)]) }
        var firebase: JOSEObject = [
            "identities": .object(identities), "sign_in_provider": .string(signInProvider),
            "tether_session": .string(sessionId.lowercasedText),
        ]
        if let secondFactor {
            firebase["sign_in_second_factor"] = .string(secondFactor)
            // A factor withdrawn since the session passed it is no longer named.
            if let secondFactorId, account.mfa.factors[secondFactorId]?.isConfirmed == true {
                firebase["second_factor_identifier"] = .string(secondFactorId.lowercasedText)
            }
        }
        claims["iss"] = .string(issuer)
        claims["aud"] = .string(projectID)
        claims["sub"] = .string(localId)
        claims["user_id"] = .string(localId)
        claims["iat"] = .number(issuedAt)
        claims["exp"] = .number(issuedAt + Self.lifetime)
        claims["auth_time"] = .number(authTime.timeIntervalSince1970.rounded(.down))
        if let email = account.email {
            claims["email"] = .string(email)
            claims["email_verified"] = .bool(account.isEmailVerified)
        }
        if let name = account.displayName { claims["name"] = .string(name) }
        if let picture = account.photoURL { claims["picture"] = .string(picture) }
        if signInProvider == "anonymous" { claims["provider_id"] = "anonymous" }
        claims["firebase"] = .object(firebase)
        return try key.signer.sign(claims: claims, type: "JWT")
    }

    /// The claims of `token`, or `INVALID_ID_TOKEN` (malformed, forged, another project's) or
    /// `TOKEN_EXPIRED` (past `exp`). Whether its session still stands is the caller's next check.
    func verify(_ token: String) async throws -> FirebaseIDTokenClaims {
        let keyID: String?
        do {
            keyID = try CompactJWS(parsing: token).header.keyID
        } catch {
            throw FirebaseError.invalidIDToken
        }
        let keySet = try await keys.verificationKeys(forKeyID: keyID)
        let verified: VerifiedJWT
        do {
            verified = try JWTVerifier(configuration: .init(
                allowedAlgorithms: [.rs256], issuer: issuer, audiences: [projectID], leeway: 30,
                requiredClaims: ["exp", "iat", "sub", "auth_time", "firebase"])).verify(token, keys: keySet)
        } catch let error as JOSEError where error == .expired {
            throw FirebaseError.tokenExpired
        } catch {
            throw FirebaseError.invalidIDToken
        }
        let claims = verified.claims
        guard let localId = claims.subject, !localId.isEmpty,
              let firebase = claims["firebase"]?.objectValue,
              let session = firebase["tether_session"]?.stringValue.flatMap(UUID.init(text:)),
              let issuedAt = claims.issuedAt, let authTime = claims["auth_time"]?.numberValue
        else { throw FirebaseError.invalidIDToken }
        return FirebaseIDTokenClaims(
            localId: localId, sessionId: session, issuedAt: issuedAt, authTime: Date(timeIntervalSince1970: authTime),
            signInProvider: firebase["sign_in_provider"]?.stringValue ?? "custom", all: claims.object)
    }

    /// The shortest and longest life of a session cookie, in seconds (five minutes, two weeks: firebase-admin's
    /// and the emulator's bounds); the longest is also the life of a cookie asked for without one.
    static let sessionCookieLifetimes = 300...1_209_600

    var sessionCookieIssuer: String { "https://session.firebase.google.com/\(projectID)" }

    /// A session cookie made from a verified ID token (firebase-admin's `create_session_cookie`): the token's
    /// claims, with `iss` the session issuer, `iat` now and `exp` `lifetime` seconds later, signed like ID
    /// tokens (RS256, `/.well-known/firebase-jwks.json`), where the emulator leaves them unsigned.
    func sessionCookie(from idToken: FirebaseIDTokenClaims, lifetime: Int, now: Date = Date()) async throws -> String {
        let key = try await keys.currentSigningKey()
        let issuedAt = now.timeIntervalSince1970.rounded(.down)
        var claims = idToken.all
        claims["iss"] = .string(sessionCookieIssuer)
        claims["iat"] = .number(issuedAt)
        claims["exp"] = .number(issuedAt + Double(lifetime))
        return try key.signer.sign(claims: claims, type: "JWT")
    }
}

/// Firebase's provider ids for Tether's providers.
enum FirebaseProviders {
    /// `apple.com` for `apple`, …, `password`; nil for identities Firebase does not list (anonymous, custom uids).
    static func firebaseName(_ provider: String) -> String? {
        switch provider {
        case "apple": "apple.com"
        case "facebook": "facebook.com"
        case "google": "google.com"
        case "password": "password"
        default: nil
        }
    }

    /// Tether's provider for a Firebase provider id.
    static func tetherName(_ providerId: String) -> String? {
        switch providerId {
        case "apple.com": "apple"
        case "facebook.com": "facebook"
        case "google.com": "google"
        case "password": "password"
        default: nil
        }
    }
}
