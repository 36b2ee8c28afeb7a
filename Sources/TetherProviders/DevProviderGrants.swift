import Foundation
import Synchronization
import TetherCore
import TetherCrypto
import TetherJOSE

/// The dev identity provider's side of provider grants: Apple's `/auth/token` and `/auth/revoke` with
/// authorization codes and refresh tokens it issued, Graph's permission revocation, a way to end a
/// grant as the person would (removing the app), and outages to switch on for tests.
final class DevProviderGrants: Sendable {
    struct AppleCode: Sendable {
        var sub: String
        var clientID: String
        var expiresAt: Date
        var isUsed = false
    }

    struct AppleRefreshToken: Sendable {
        var sub: String
        var clientID: String
        var isRevoked = false
    }

    /// A revocation call the dev provider received.
    struct Revocation: Sendable {
        var provider: String
        var subject: String
        var clientID: String
    }

    private let codes = Mutex<[String: AppleCode]>([:])
    private let refreshTokens = Mutex<[String: AppleRefreshToken]>([:])
    private let revocations = Mutex<[Revocation]>([])
    private let downEndpoints = Mutex<Set<String>>([])

    func issueCode(sub: String, clientID: String, now: Date) -> String {
        let code = "c" + Self.randomText(count: 40)
        codes.withLock { $0[code] = AppleCode(sub: sub, clientID: clientID, expiresAt: now.addingTimeInterval(300)) }
        return code
    }

    /// Spends `code` for `clientID`: the refresh token and subject, or nil (unknown, used, expired, another client's).
    func redeem(_ code: String, clientID: String, now: Date) -> (refreshToken: String, sub: String)? {
        let sub: String? = codes.withLock { codes in
            guard var entry = codes[code], !entry.isUsed, entry.expiresAt > now, entry.clientID == clientID else { return nil }
            entry.isUsed = true
            codes[code] = entry
            return entry.sub
        }
        guard let sub else { return nil }
        let token = "r." + Self.randomText(count: 40)
        refreshTokens.withLock { $0[token] = AppleRefreshToken(sub: sub, clientID: clientID) }
        return (token, sub)
    }

    /// The subject of a live refresh token of `clientID`.
    func subject(ofRefreshToken token: String, clientID: String) -> String? {
        refreshTokens.withLock { tokens in
            guard let entry = tokens[token], !entry.isRevoked, entry.clientID == clientID else { return nil }
            return entry.sub
        }
    }

    /// Revokes `token` (the app's call); records it when the token was known and live.
    func revokeAppleToken(_ token: String, clientID: String) {
        let revoked: AppleRefreshToken? = refreshTokens.withLock { tokens in
            guard var entry = tokens[token], entry.clientID == clientID, !entry.isRevoked else { return nil }
            entry.isRevoked = true
            tokens[token] = entry
            return entry
        }
        if let revoked { record(Revocation(provider: "apple", subject: revoked.sub, clientID: clientID)) }
    }

    /// The person removed the app: every refresh token of `sub` stops working.
    func endAppleGrant(sub: String) -> Int {
        refreshTokens.withLock { tokens in
            var ended = 0
            for (token, entry) in tokens where entry.sub == sub && !entry.isRevoked {
                tokens[token]?.isRevoked = true
                ended += 1
            }
            return ended
        }
    }

    func record(_ revocation: Revocation) {
        revocations.withLock { $0.append(revocation) }
    }

    func revocations(of provider: String) -> [Revocation] {
        revocations.withLock { $0.filter { $0.provider == provider } }
    }

    func setDown(_ endpoint: String, _ down: Bool) {
        downEndpoints.withLock { if down { $0.insert(endpoint) } else { $0.remove(endpoint) } }
    }

    func isDown(_ endpoint: String) -> Bool {
        downEndpoints.withLock { $0.contains(endpoint) }
    }

    private static func randomText(count: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        return String(SecureRandom.bytes(count: count).map { alphabet[Int($0) % alphabet.count] })
    }
}

extension DevIdentityProvider {
    /// The Apple team whose key signs Tether's client secret under `tether dev` and in tests: made once per
    /// process, its `.p8` written to a temporary file (mode 0600) that `TETHER_APPLE_PRIVATE_KEY_FILE` names.
    public static let appleTeam: (teamID: String, keyID: String, key: PrivateKey, file: String) = {
        let key = try! PrivateKey.generate(.ecP256)
        let file = FileManager.default.temporaryDirectory
            .appendingPathComponent("tether-dev-apple-\(ProcessInfo.processInfo.processIdentifier)-\(UUID.random().uuidString.prefix(8)).p8").path
        _ = FileManager.default.createFile(atPath: file, contents: Data(try! key.pemEncoded().utf8), attributes: [.posixPermissions: 0o600])
        return ("DEVTEAM001", "DEVKEY0001", key, file)
    }()

    /// An answer of the dev Apple endpoints: status and JSON body.
    public struct GrantAnswer: Sendable {
        public var status: Int
        public var body: JSONValue
    }

    /// `POST /apple/authorization-code {sub, aud?}`: an authorization code for `sub`, as the app gets one with
    /// the identity token; single use, five minutes.
    public func appleAuthorizationCode(sub: String, clientID: String?) -> String {
        grants.issueCode(sub: sub, clientID: clientID ?? Self.appleClientID, now: clock.now())
    }

    /// `POST /apple/auth/token` (a form): grant `authorization_code` or `refresh_token`, with the client
    /// secret checked as Apple checks it (ES256 by the team's key, `iss` the team, `sub` the client,
    /// `aud` Apple, unexpired and at most six months long).
    public func appleToken(_ form: [String: String]) throws -> GrantAnswer {
        if grants.isDown("apple/auth/token") { return GrantAnswer(status: 503, body: ["error": "temporarily_unavailable"]) }
        guard let clientID = form["client_id"], checksClientSecret(form["client_secret"], clientID: clientID) else {
            return GrantAnswer(status: 400, body: ["error": "invalid_client"])
        }
        let now = clock.now()
        switch form["grant_type"] {
        case "authorization_code":
            guard let code = form["code"], let redeemed = grants.redeem(code, clientID: clientID, now: now) else {
                return GrantAnswer(status: 400, body: ["error": "invalid_grant"])
            }
            return GrantAnswer(status: 200, body: [
                "access_token": .string("a." + UUID.random().uuidString), "token_type": "Bearer", "expires_in": 3600,
                "refresh_token": .string(redeemed.refreshToken), "id_token": .string(try appleIDToken(sub: redeemed.sub, clientID: clientID)),
            ])
        case "refresh_token":
            guard let token = form["refresh_token"], let sub = grants.subject(ofRefreshToken: token, clientID: clientID) else {
                return GrantAnswer(status: 400, body: ["error": "invalid_grant"])
            }
            return GrantAnswer(status: 200, body: [
                "access_token": .string("a." + UUID.random().uuidString), "token_type": "Bearer", "expires_in": 3600,
                "id_token": .string(try appleIDToken(sub: sub, clientID: clientID)),
            ])
        default:
            return GrantAnswer(status: 400, body: ["error": "unsupported_grant_type"])
        }
    }

    /// `POST /apple/auth/revoke` (a form: `client_id`, `client_secret`, `token`, `token_type_hint`).
    public func appleRevoke(_ form: [String: String]) -> GrantAnswer {
        if grants.isDown("apple/auth/revoke") { return GrantAnswer(status: 503, body: ["error": "temporarily_unavailable"]) }
        guard let clientID = form["client_id"], checksClientSecret(form["client_secret"], clientID: clientID) else {
            return GrantAnswer(status: 400, body: ["error": "invalid_client"])
        }
        guard let token = form["token"], !token.isEmpty else { return GrantAnswer(status: 400, body: ["error": "invalid_request"]) }
        grants.revokeAppleToken(token, clientID: clientID)
        return GrantAnswer(status: 200, body: .object([:]))
    }

    /// `POST /apple/revoke-grant {sub}`: the person stops using Sign in with Apple with the app.
    public func endAppleGrant(sub: String) -> Int {
        grants.endAppleGrant(sub: sub)
    }

    /// `POST /facebook/revoke-grant {userId}`: the person removes the app; their tokens stop working.
    public func endFacebookGrant(userID: String) -> Int {
        graph.invalidate(userID: userID)
    }

    /// The revocations the dev provider received, for `GET /{apple,facebook}/revocations`.
    public func revocations(of provider: String) -> [JSONValue] {
        grants.revocations(of: provider).map { ["subject": .string($0.subject), "clientId": .string($0.clientID)] }
    }

    /// `POST /outage {endpoint, down}`: `apple/auth/token`, `apple/auth/revoke` or `facebook/graph` answer 503 while down.
    public func setOutage(_ endpoint: String, down: Bool) throws(ProviderError) {
        guard ["apple/auth/token", "apple/auth/revoke", "facebook/graph"].contains(endpoint) else {
            throw ProviderError.invalidRequest("endpoint must be apple/auth/token, apple/auth/revoke or facebook/graph")
        }
        grants.setDown(endpoint, down)
    }

    /// Whether the fake Graph API is switched off.
    var isGraphDown: Bool { grants.isDown("facebook/graph") }

    /// `POST /facebook/graph/{user-id}/permissions?method=delete` (Graph's `DELETE`) with the user's token.
    public func revokePermissions(userID: String, _ request: DevGraphRequest) throws -> DevGraphAnswer {
        if isGraphDown { return try Self.graphOutage() }
        guard request.query["method"]?.lowercased() == "delete" else {
            return try DevGraphAnswer.json(["error": ["message": "Unsupported post request.", "code": 100]], status: 400)
        }
        let token = request.authorization.flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        guard let token, let record = graph.record(for: token), record.isValid, record.userID == userID else {
            return try DevGraphAnswer.json(["error": ["message": "Error validating access token", "code": 190]], status: 400)
        }
        _ = graph.invalidate(userID: userID)
        grants.record(.init(provider: "facebook", subject: userID, clientID: record.appID))
        return try DevGraphAnswer.json(["success": true])
    }

    private func checksClientSecret(_ secret: String?, clientID: String) -> Bool {
        guard let secret, let jws = try? CompactJWS(parsing: secret), jws.header.keyID == Self.appleTeam.keyID,
              (try? jws.verifySignature(with: JWK(material: .privateKey(Self.appleTeam.key)), allowedAlgorithms: [.es256])) != nil,
              let claims = try? JOSEObject(parsing: jws.payload),
              case .string(Self.appleTeam.teamID)? = claims["iss"], case .string(clientID)? = claims["sub"],
              case .string("https://appleid.apple.com")? = claims["aud"],
              case .number(let issuedAt)? = claims["iat"], case .number(let expiresAt)? = claims["exp"]
        else { return false }
        let now = clock.now().timeIntervalSince1970
        return expiresAt > now && issuedAt <= now + 60 && expiresAt - issuedAt <= 15_777_000
    }

    private func appleIDToken(sub: String, clientID: String) throws -> String {
        var request = DevTokenRequest()
        request.sub = sub
        request.aud = .string(clientID)
        return try mintToken(.apple, request)
    }
}
