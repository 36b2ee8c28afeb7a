import Foundation
import TetherCore
import TetherCrypto
import TetherJOSE
import TetherPostgres

/// Service accounts whose private keys sign Firebase custom tokens, as firebase-admin's
/// `create_custom_token` does with a `credentials.Certificate` (RS256, `kid` = `private_key_id`).
public struct FirebaseServiceAccounts: Sendable {
    let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    /// What a stored public key is bound to when wrapped: its row.
    static func wrappingContext(_ keyID: String) -> String { "firebase_service_accounts:" + keyID }

    /// Makes a service account for `projectID` and answers the JSON firebase-admin loads, private key
    /// included: it is shown this once, and only the public key is stored.
    public func create(projectID: String) async throws -> (clientEmail: String, keyID: String, json: String) {
        let key = try PrivateKey.generate(.rsa, rsaBitCount: 2048)
        let keyID = SecureRandom.bytes(count: 20).hexString
        let clientEmail = "tether-\(SecureRandom.bytes(count: 4).hexString)@\(projectID).iam.gserviceaccount.com"
        try await database.query("""
            INSERT INTO firebase_service_accounts (key_id, client_email, public_key_pem)
            VALUES (\(keyID), \(clientEmail), \(try database.configuration.masterKeys.wrapText(try key.publicKey.pemEncoded(), context: Self.wrappingContext(keyID))))
            """)
        let document: JSONValue = .object([
            "type": "service_account", "project_id": .string(projectID), "private_key_id": .string(keyID),
            "private_key": .string(try key.pemEncoded()), "client_email": .string(clientEmail),
            "client_id": .string(String(UInt64.random(in: 100_000_000_000_000_000...999_999_999_999_999_999))),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": "https://oauth2.googleapis.com/token",
        ])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return (clientEmail, keyID, String(decoding: try encoder.encode(document), as: UTF8.self))
    }

    /// Every service account: key id, email, when it was made and revoked.
    public func list() async throws -> [(keyId: String, clientEmail: String, createdAt: Date, revokedAt: Date?)] {
        try await database.query("""
            SELECT key_id, client_email, created_at, revoked_at FROM firebase_service_accounts ORDER BY created_at, key_id
            """).map { row in
            (try row.decode("key_id"), try row.decode("client_email"), try row.decode("created_at"), try row.decode("revoked_at"))
        }
    }

    /// Stops a service account at once: tokens it signs are refused from now on. Answers whether it was live.
    public func revoke(keyId: String) async throws -> Bool {
        let rows = try await database.query("""
            UPDATE firebase_service_accounts SET revoked_at = now() WHERE key_id = \(keyId) AND revoked_at IS NULL RETURNING key_id
            """)
        if rows.isEmpty, try await database.query("SELECT 1 FROM firebase_service_accounts WHERE key_id = \(keyId)").isEmpty {
            throw AccountError.invalidRequest("no service account has the key id \(keyId) (see tether firebase service-account list)")
        }
        return !rows.isEmpty
    }

    /// The public key of a live service account, by `kid`.
    func key(keyID: String) async throws -> (clientEmail: String, key: JWK)? {
        let rows = try await database.query("""
            SELECT client_email, public_key_pem FROM firebase_service_accounts WHERE key_id = \(keyID) AND revoked_at IS NULL
            """)
        guard let row = rows.first else { return nil }
        // Wrapped like every stored key: a public key written into the table by someone without the master key opens nothing.
        let pem = try database.configuration.masterKeys.unwrapText(try row.decode("public_key_pem"), context: Self.wrappingContext(keyID))
        let key = try JWK(material: .publicKey(PublicKey(pem: pem)), keyID: keyID, algorithm: .rs256, use: "sig")
        return (try row.decode("client_email"), key)
    }
}

/// What a verified custom token says.
struct CustomToken: Sendable {
    var uid: String
    /// Developer claims for the session's ID tokens (a JSON object's text), if any.
    var claims: String?
}

extension FirebaseRoutes {
    /// The audience of every custom token.
    static let customTokenAudience = "https://identitytoolkit.googleapis.com/google.identity.identitytoolkit.v1.IdentityToolkit"

    /// Verifies a custom token: RS256 by a service account of ours (`kid`), `iss` = `sub` = its email, the
    /// Identity Toolkit `aud`, at most an hour long and not expired. Unsigned (`alg: none`) tokens, which
    /// firebase-admin makes for an emulator, pass only under `tether dev`.
    func verifyCustomToken(_ token: String) async throws -> CustomToken {
        let invalid = { (detail: String) in FirebaseError("INVALID_CUSTOM_TOKEN", detail) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, token.utf8.count <= 16 * 1024,
              let headerBytes = try? Base64URL.decode(String(parts[0])), let header = try? JOSEObject(parsing: headerBytes),
              let payloadBytes = try? Base64URL.decode(String(parts[1])), let payload = try? JOSEObject(parsing: payloadBytes)
        else { throw invalid("Invalid assertion format") }
        if header["alg"]?.stringValue == "none" {
            // What firebase-admin signs with for an emulator: accepted by `tether dev` alone, never by `tether serve`.
            guard acceptsOwner else { throw invalid("Unsigned custom tokens are accepted only under tether dev.") }
            guard parts[2].isEmpty else { throw invalid("An unsigned token has an empty signature.") }
        } else {
            guard let keyID = header["kid"]?.stringValue, let account = try await serviceAccounts.key(keyID: keyID) else {
                throw invalid("No service account of this server has the token's kid.")
            }
            let verified: VerifiedJWT
            do {
                verified = try JWTVerifier(configuration: .init(
                    allowedAlgorithms: [.rs256], issuer: account.clientEmail, audiences: [Self.customTokenAudience], leeway: 60,
                    requiredClaims: ["exp", "iat", "sub", "uid"])).verify(token, keys: JWKSet(keys: [account.key]))
            } catch {
                throw invalid("The token's signature, issuer, audience or lifetime does not verify.")
            }
            guard verified.claims.subject == account.clientEmail else { throw invalid("sub must be the service account's email.") }
            if let issuedAt = verified.claims.issuedAt, let expiresAt = verified.claims.expiresAt, expiresAt.timeIntervalSince(issuedAt) > 3600 {
                throw invalid("A custom token lasts at most an hour.")
            }
        }
        guard payload["aud"]?.stringValue == Self.customTokenAudience else {
            throw invalid("Invalid aud (audience): Firebase ID tokens and third-party tokens cannot be used with signInWithCustomToken.")
        }
        guard let uid = payload["uid"]?.stringValue, (1...128).contains(uid.utf8.count) else { throw FirebaseError("MISSING_IDENTIFIER") }
        // As every localId a request names (``FirebaseBody/string(_:)``): a user made with one could never be named again.
        guard !uid.unicodeScalars.contains("\u{0}") else { throw invalid("uid holds a NUL.") }
        var claims: String?
        if let value = payload["claims"] {
            guard let object = value.objectValue else { throw FirebaseError("INVALID_CLAIMS") }
            if let reserved = object.members.map(\.name).first(where: FirebaseIDTokens.reservedClaims.contains) {
                throw FirebaseError("FORBIDDEN_CLAIM", reserved)
            }
            claims = String(decoding: JOSEValue.object(object).jsonBytes, as: UTF8.self)
            guard claims!.count <= 1000 else { throw FirebaseError("CLAIMS_TOO_LARGE") }
        }
        return CustomToken(uid: uid, claims: claims)
    }

    /// `accounts:signInWithCustomToken` (v3 `verifyCustomToken`): the token's uid signs in; an unknown uid
    /// is a new user. The token's developer claims go into the session's ID tokens, refreshes included.
    func signInWithCustomToken(_ request: FirebaseRequest) async throws -> JSONValue {
        guard let token = try request.body.string("token"), !token.isEmpty else { throw FirebaseError("MISSING_CUSTOM_TOKEN") }
        let custom = try await verifyCustomToken(token)
        let identity = ExternalIdentity(provider: UserAccount.customProvider, uid: custom.uid)
        // A user whose localId is Tether's own id gets the uid as a custom identity first, so it signs in as them.
        if let userId = try await user(localId: custom.uid) {
            let account = try await accounts.read(userId)
            guard !account.isDisabled else { throw FirebaseError.userDisabled }
            if account.identities[UserAccount.customProvider] == nil {
                do {
                    _ = try await commands.link(identity, to: userId, context: context(request, user: userId))
                } catch let error as AccountError where error.reason == .credentialAlreadyInUse {
                    // A first sign-in beside this one linked it meanwhile: the sign-in below finds its owner.
                }
            }
        }
        var (session, refreshToken) = newSession(provider: UserAccount.customProvider)
        session.developerClaims = custom.claims
        let result = try await commands.signIn(
            SignInCommand(credential: .customToken(token), session: session, context: context(request)), verified: identity)
        switch result {
        case .signedIn(let account, let isNewUser):
            var answer: [String: JSONValue] = ["kind": "identitytoolkit#VerifyCustomTokenResponse", "isNewUser": .bool(isNewUser)]
            answer.merge(try await tokens(account, session: session, refreshToken: refreshToken, signInProvider: "custom")) { $1 }
            return .object(answer)
        case .secondFactorRequired(let userId, let pending, let factors):
            return .object([
                "kind": "identitytoolkit#VerifyCustomTokenResponse", "mfaPendingCredential": .string(pending),
                "mfaInfo": .array(factors.map(FirebaseUserRecord.mfaInfo)), "localId": .string(Self.localId(of: try await accounts.read(userId))),
            ])
        case .needsConfirmation:
            throw FirebaseError("INTERNAL_ERROR", status: 500)
        }
    }
}
