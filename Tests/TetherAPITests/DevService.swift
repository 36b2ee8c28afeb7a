import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders
import TetherTesting

/// The one harness of the API suites: a real `TetherService` configured against a dev identity
/// provider on its own loopback port, as `tether dev` configures it, with a fresh migrated database.
///
/// Tokens are minted over HTTP at the dev identity provider and verified by the service
/// through its JWKS and fake Graph API, so every sign-in takes the production path.
/// (`withService` and `withDevService` start the same service over a database a suite made itself.)
struct DevService: Sendable {
    let service: TetherService
    let client: HTTPTestClient
    let idp: HTTPTestClient
    /// The dev identity provider's own server.
    let idpServer: HTTPServer
    let port: Int
    let database: TestDatabase
    /// The owner's connection, for looking at tables and events behind the API's back.
    let admin: PostgresClient

    /// Runs `body` against a fresh service; `settings` adds or overrides `TETHER_*` values.
    /// SMS codes go to `sms` when given, otherwise to the dev outbox (`GET /dev-idp/sms`).
    static func run(
        settings: [String: String] = [:], sms: (any SMSSender)? = nil, mail: (any MailSender)? = nil,
        metricsCollectors: [any MetricsCollector] = [], providerCalls: ProviderCallWorker.Configuration = RunningService.quietProviderCalls,
        appleRevalidateMinimum: TimeInterval = GrantRevalidation.appleMinimum, passwords: any PasswordHashing = RunningService.quickPasswords,
        _ body: (DevService) async throws -> Void
    ) async throws {
        let database = try await TestDatabase.make()
        let running = try await RunningService.start(
            databaseURL: database.url, values: settings, devIdP: true, sms: sms, mail: mail, metricsCollectors: metricsCollectors,
            providerCalls: providerCalls, appleRevalidateMinimum: appleRevalidateMinimum, passwords: passwords)
        let harness = DevService(
            service: running.service, client: running.client, idp: running.idp!.client(), idpServer: running.idp!.server,
            port: running.service.server.boundPort, database: database, admin: database.client(asServiceRole: false, maxConnections: 2))
        do {
            try await body(harness)
        } catch {
            await harness.close(running)
            throw error
        }
        await harness.close(running)
    }

    private func close(_ running: RunningService) async {
        await idp.close()
        await running.stop()
        admin.shutdown()
    }

    /// Runs `body` with the ports of two Tether instances on this database and dev identity provider: this
    /// one, and a second started for it (its own pool, caches and background loops), stopped afterwards.
    func withTwoInstances<T: Sendable>(_ body: (_ ports: [Int]) async throws -> T) async throws -> T {
        let second = try await RunningService.start(
            databaseURL: database.url,
            values: DevIdentityProvider.configuration(baseURL: URL(string: "http://127.0.0.1:\(idpServer.boundPort)/dev-idp")!),
            devIdP: false)
        do {
            let result = try await body([port, second.service.server.boundPort])
            await second.stop()
            return result
        } catch {
            await second.stop()
            throw error
        }
    }

    /// Runs `body` with a connection of its own (one per concurrent caller), closed afterwards; to
    /// the instance at `port` when given (``withTwoInstances(_:)``), otherwise this one.
    func withNewClient<T: Sendable>(port: Int? = nil, _ body: (HTTPTestClient) async throws -> T) async throws -> T {
        let client = HTTPTestClient(port: port ?? self.port, timeout: .seconds(60))
        do {
            let result = try await body(client)
            await client.close()
            return result
        } catch {
            await client.close()
            throw error
        }
    }

    // MARK: Credentials

    /// The passwords the server has hashed since it started (`tether_password_hashes_total` of `/metrics`).
    func passwordHashes() async throws -> Double {
        let text = try await client.get("/metrics").bodyText
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("tether_password_hashes_total ") })
        return try #require(Double(line.split(separator: " ")[1]))
    }

    /// An Apple credential for `sub` minted by the dev identity provider.
    func apple(_ sub: String, email: String? = nil, verified: Bool = true, extra: [String: JSONValue] = [:]) async throws -> Credential {
        var claims: [String: JSONValue] = ["sub": .string(sub), "emailVerified": .bool(verified)]
        if let email { claims["email"] = .string(email) }
        claims.merge(extra) { _, new in new }
        let token = try await mint("/dev-idp/apple/token", claims, member: "identityToken")
        return Credential(provider: "apple", credential: ["identityToken": .string(token)])
    }

    /// An Apple credential for `sub` whose token carries the hash of a fresh nonce, sent beside it (single use).
    func appleWithNonce(_ sub: String, email: String? = nil) async throws -> Credential {
        let rawNonce = UUID().uuidString
        var claims = ["sub": sub, "rawNonce": rawNonce]
        if let email { claims["email"] = email }
        let minted = try await idp.post("/dev-idp/apple/token", json: claims)
        let token = try #require(try minted.decodeJSON([String: String].self)["identityToken"])
        return Credential(provider: "apple", credential: ["identityToken": .string(token), "rawNonce": .string(rawNonce)])
    }

    /// A Google credential for `sub`.
    func google(_ sub: String, email: String? = nil, verified: Bool = true) async throws -> Credential {
        var claims: [String: JSONValue] = ["sub": .string(sub), "emailVerified": .bool(verified)]
        if let email { claims["email"] = .string(email) }
        let token = try await mint("/dev-idp/google/token", claims, member: "idToken")
        return Credential(provider: "google", credential: ["idToken": .string(token)])
    }

    /// A classic Facebook access token for `userId`, checked through the fake Graph API.
    func facebook(_ userId: String, email: String? = nil) async throws -> Credential {
        var claims: [String: JSONValue] = ["userId": .string(userId)]
        if let email { claims["email"] = .string(email) }
        let token = try await mint("/dev-idp/facebook/access-token", claims, member: "accessToken")
        return Credential(provider: "facebook", credential: ["accessToken": .string(token)])
    }

    /// A password credential.
    func password(_ email: String, _ password: String) -> Credential {
        Credential(provider: "password", credential: ["email": .string(email), "password": .string(password)])
    }

    private func mint(_ path: String, _ claims: [String: JSONValue], member: String) async throws -> String {
        let response = try await idp.post(path, json: claims)
        guard response.status == 200, let token = try response.decodeJSON([String: String].self)[member] else {
            throw HarnessError("minting at \(path) answered \(response.status): \(response.bodyText)")
        }
        return token
    }

    // MARK: Calls

    /// `POST /v1/sign-in`.
    func signIn(_ credential: Credential, headers: KeyValuePairs<String, String> = [:], on other: HTTPTestClient? = nil)
        async throws -> HTTPTestClient.Response
    {
        try await (other ?? client).post("/v1/sign-in", headers: headers, json: credential)
    }

    /// Signs in and decodes the answer, expecting success.
    func signedIn(_ credential: Credential, headers: KeyValuePairs<String, String> = [:]) async throws -> SignedIn {
        let response = try await signIn(credential, headers: headers)
        guard response.status == 200 || response.status == 201 else {
            throw HarnessError("sign-in answered \(response.status): \(response.bodyText)")
        }
        return try response.decodeJSON(SignedIn.self)
    }

    /// `GET /v1/users/me` with a Bearer token.
    func me(_ accessToken: String) async throws -> HTTPTestClient.Response {
        try await client.get("/v1/users/me", headers: ["Authorization": "Bearer \(accessToken)"])
    }

    /// `POST /v1/users/me/identities`.
    func link(_ credential: Credential, to accessToken: String, on other: HTTPTestClient? = nil) async throws -> HTTPTestClient.Response {
        try await (other ?? client).post(
            "/v1/users/me/identities", headers: ["Authorization": "Bearer \(accessToken)"], json: credential)
    }

    /// `POST /v1/sessions/refresh`.
    func refresh(_ refreshToken: String, headers: KeyValuePairs<String, String> = [:], on other: HTTPTestClient? = nil)
        async throws -> HTTPTestClient.Response
    {
        try await (other ?? client).post("/v1/sessions/refresh", headers: headers, json: ["refreshToken": refreshToken])
    }

    /// Events of `type` in the log (optionally of one user), once the mails whose answer already went are sent.
    func eventCount(_ type: String, userId: String? = nil) async throws -> Int {
        await service.emailFlows.finishSending()
        let rows: PostgresRows
        if let userId {
            rows = try await admin.query("SELECT count(*)::int AS n FROM events WHERE type = \(type) AND user_id = \(userId)::uuid")
        } else {
            rows = try await admin.query("SELECT count(*)::int AS n FROM events WHERE type = \(type)")
        }
        return try rows[0].decode("n")
    }

    /// Refused sign-ins of no known account (`kind` `failed` or `throttled`) counted so far, whether their
    /// minute is still in the tallies or already recorded as a `SignInFailuresCounted` event (one snapshot).
    func tallied(_ kind: String, detail: String? = nil) async throws -> Int {
        try await admin.query("""
            SELECT ((SELECT coalesce(sum(count), 0) FROM sign_in_failure_tallies
                     WHERE kind = \(kind) AND (\(detail)::text IS NULL OR detail = \(detail)))
                  + (SELECT coalesce(sum((c->>'count')::bigint), 0)
                     FROM events e, jsonb_array_elements(e.data->'counts') c
                     WHERE e.type = 'SignInFailuresCounted' AND c->>'kind' = \(kind) AND (\(detail)::text IS NULL OR c->>'detail' = \(detail))))::int AS n
            """)[0].decode("n")
    }

    /// The position of the log's last event (0 for none).
    func lastEventPosition() async throws -> Int64 {
        try await admin.query("SELECT coalesce(max(position), 0)::bigint AS p FROM events")[0].decode("p")
    }

    /// How many transactions wrote the events after `position`: one command is one.
    func transactions(after position: Int64) async throws -> Int {
        try await admin.query("SELECT count(DISTINCT tx)::int AS n FROM events WHERE position > \(position)")[0].decode("n")
    }

    /// Every event in the log.
    func totalEvents() async throws -> Int {
        await service.emailFlows.finishSending()
        return try await admin.query("SELECT count(*)::int AS n FROM events")[0].decode("n")
    }

    /// The code of the last SMS the dev outbox holds for `phoneNumber`.
    func smsCode(to phoneNumber: String) async throws -> String {
        struct Outbox: Decodable {
            struct Message: Decodable { var code: String? }
            var messages: [Message]
        }
        let outbox = try await idp.get("/dev-idp/sms?phoneNumber=\(phoneNumber.replacingOccurrences(of: "+", with: "%2B"))")
        guard let code = try outbox.decodeJSON(Outbox.self).messages.last?.code else {
            throw HarnessError("no SMS to \(phoneNumber): \(outbox.bodyText)")
        }
        return code
    }

    /// `accessToken` re-signed with the service's key as it would be `seconds` after its sign-in (an older `auth_time`).
    func accessToken(_ accessToken: String, signedInSecondsAgo seconds: Double) async throws -> String {
        let row = try await admin.query("SELECT kid, private_key_pem FROM signing_keys ORDER BY created_at DESC LIMIT 1")[0]
        var claims = try JOSEObject(parsing: Base64URL.decode(String(accessToken.split(separator: ".")[1])))
        claims["auth_time"] = .number(Date().timeIntervalSince1970.rounded(.down) - seconds)
        return try JWTSigner(privateKey: try PrivateKey(pem: try row.decode("private_key_pem", as: String.self)),
                             algorithm: .es256, keyID: try row.decode("kid", as: String.self)).sign(claims: claims, type: "at+jwt")
    }

    /// A mail the dev outbox holds.
    struct Mail: Decodable, Sendable {
        var to: String
        var template: String
        var locale: String
        var link: String
        var code: String
        var expiresAt: String
        var mailed: Bool
    }

    /// The mails the dev outbox holds for `address` (every one when nil), oldest first.
    func mails(to address: String? = nil) async throws -> [Mail] {
        await service.emailFlows.finishSending() // a reset's mail goes after its answer
        struct Outbox: Decodable { var mails: [Mail] }
        let outbox = try await idp.get("/dev-idp/mail" + (address.map { "?to=\($0.replacingOccurrences(of: "+", with: "%2B"))" } ?? ""))
        return try outbox.decodeJSON(Outbox.self).mails
    }

    /// The last mail to `address`, failing when there is none.
    func lastMail(to address: String) async throws -> Mail {
        guard let mail = try await mails(to: address).last else { throw HarnessError("no mail to \(address)") }
        return mail
    }

    /// Proves the address of the user `accessToken` is a session of, through the mail a verification sends it.
    func verifyEmail(_ address: String, accessToken: String) async throws {
        let asked = try await client.post("/v1/users/me/email-verification", headers: ["Authorization": "Bearer \(accessToken)"], body: [])
        guard asked.status == 202 else { throw HarnessError("verification answered \(asked.status): \(asked.bodyText)") }
        let confirmed = try await client.post("/v1/email-verification/confirm", json: ["code": try await lastMail(to: address).code])
        guard confirmed.status == 200 else { throw HarnessError("confirmation answered \(confirmed.status): \(confirmed.bodyText)") }
    }

    /// Enrols and confirms a TOTP factor through `/v1` for the user `accessToken` is a session of; answers its id
    /// and its code generator.
    @discardableResult
    func enrolTOTP(accessToken: String) async throws -> (factorId: String, totp: TOTP) {
        struct Enrolment: Decodable { var factorId: String; var secret: String }
        let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(accessToken)"]
        let enrolment = try await client.post("/v1/users/me/mfa/totp", headers: auth, body: []).decodeJSON(Enrolment.self)
        let totp = try TOTP(secret: try Base32.decode(enrolment.secret))
        let confirmed = try await client.post(
            "/v1/users/me/mfa/totp/verify", headers: auth, json: ["factorId": enrolment.factorId, "code": totp.code(at: Date())])
        guard confirmed.status == 200 else { throw HarnessError("confirming a TOTP factor answered \(confirmed.status): \(confirmed.bodyText)") }
        return (enrolment.factorId, totp)
    }

    /// The URL a DPoP proof names for `path` on this service.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }
}

/// A provider and its credential, as `POST /v1/sign-in` and linking take them.
struct Credential: Codable, Sendable {
    var provider: String
    var credential: JSONValue
}

/// The body of a successful sign-in.
struct SignedIn: Decodable, Sendable {
    struct User: Decodable, Sendable {
        struct Identity: Decodable, Sendable {
            var provider: String
            var uid: String
            var email: String?
            var emailVerified: Bool
        }
        var id: String
        var email: String?
        var emailVerified: Bool
        var disabled: Bool
        var identities: [Identity]
    }
    struct Session: Decodable, Sendable {
        var id: String
        var accessToken: String
        var tokenType: String
        var expiresIn: Int
        var refreshToken: String
    }
    var user: User
    var isNewUser: Bool?
    var session: Session
}

/// `{"user": …}` (users/me, link, unlink).
struct UserEnvelope: Decodable, Sendable {
    var user: SignedIn.User
}

/// A problem+json body.
struct ProblemBody: Decodable, Sendable {
    var status: Int
    var code: String
    var detail: String?
    var email: String?
    var signInMethods: [String]?
}

/// A device key that signs DPoP proofs (RFC 9449 §4.2).
struct DeviceKey: Sendable {
    let key = try! PrivateKey.generate(.ecP256)

    /// A proof for `method` and `url`; with `accessToken`, its hash goes in `ath`.
    func proof(_ method: String, _ url: String, accessToken: String? = nil, jti: String = UUID().uuidString) throws -> String {
        var claims: JOSEObject = ["jti": .string(jti), "htm": .string(method), "htu": .string(url),
                                  "iat": .number(Date().timeIntervalSince1970.rounded(.down))]
        if let accessToken {
            claims["ath"] = .string(Base64URL.encode(DigestAlgorithm.sha256.hash(Array(accessToken.utf8))))
        }
        let jwk = try JWK(material: .publicKey(key.publicKey)).jsonObject()
        return try JWTSigner(privateKey: key, algorithm: .es256).sign(claims: claims, type: "dpop+jwt", header: ["jwk": .object(jwk)])
    }
}

/// A harness that could not do what a test asked of it (not a failed expectation).
struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension PostgresClient {
    /// Makes every append of an event of `types` fail, as a database that fails between a command and what
    /// follows it would: the tests of what an answer does when a second write fails after the first committed.
    func refuseEvents(ofTypes types: [String]) async throws {
        try await refuse("INSERT", on: "events", when: "NEW.type IN (\(types.map { "'\($0)'" }.joined(separator: ", ")))")
    }

    /// Undoes ``refuseEvents(ofTypes:)``.
    func acceptEventsAgain() async throws {
        try await withConnection { try await $0.execute(simple: "DROP TRIGGER refuse_writes ON events") }
    }

    /// Makes every `operation` (`INSERT`, `UPDATE`) on `table` of a row for which `condition` holds fail.
    func refuse(_ operation: String, on table: String, when condition: String = "true") async throws {
        try await withConnection { try await $0.execute(simple: """
            CREATE FUNCTION refuse_writes() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF \(condition) THEN RAISE EXCEPTION 'the test refuses this write to %', TG_TABLE_NAME; END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER refuse_writes BEFORE \(operation) ON \(table) FOR EACH ROW EXECUTE FUNCTION refuse_writes();
            """) }
    }
}
