import Foundation
import Testing
import TetherTesting
import TetherAPI
import TetherCrypto
import TetherJOSE

@Suite("Access tokens: issuing and verification")
struct AccessTokenTokensTests {
    /// A database, a clock, and an issuer and verifier over one key store.
    struct Fixture {
        let db: TokensDatabase
        let clock = ManualClock()
        let keys: SigningKeyStore
        let issuer: AccessTokenIssuer
        let verifier: AccessTokenVerifier
        let userId = UUID()
        let sessionId = UUID()

        static func make() async throws -> Fixture { try await Fixture(db: TokensDatabase.make()) }

        private init(db: TokensDatabase) {
            self.db = db
            keys = SigningKeyStore(client: db.client, clock: clock)
            issuer = AccessTokenIssuer(keys: keys, clock: clock)
            verifier = AccessTokenVerifier(keys: keys, clock: clock)
        }

        func issue(jkt: String? = nil) async throws -> IssuedAccessToken {
            try await issuer.issue(userId: userId, sessionId: sessionId, authTime: clock.now().addingTimeInterval(-120),
                                   amr: ["apple", "otp"], jkt: jkt)
        }

        /// Claims as the issuer writes them, for forged tokens.
        func claims() -> JOSEObject {
            let now = clock.now().timeIntervalSince1970
            return ["iss": "tether", "sub": .string(userId.uuidString.lowercased()), "sid": .string(sessionId.uuidString.lowercased()),
                    "iat": .number(now), "exp": .number(now + 900), "auth_time": .number(now), "amr": ["pwd"]]
        }
    }

    @Test func issuedTokenVerifiesAndCarriesEveryClaim() async throws {
        let fixture = try await Fixture.make()
        let issuedAt = fixture.clock.now()
        let issued = try await fixture.issue(jkt: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
        #expect(issued.expiresIn == 900)
        #expect(issued.issuedAt == issuedAt)

        let claims = try await fixture.verifier.verify(issued.token)
        #expect(claims == AccessTokenClaims(
            userId: fixture.userId, sessionId: fixture.sessionId, issuedAt: issuedAt, expiresAt: issuedAt.addingTimeInterval(900),
            authTime: issuedAt.addingTimeInterval(-120), amr: ["apple", "otp"], jkt: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"))

        let (header, payload, _) = try TokensForgery.parts(of: issued.token)
        #expect(header["alg"] == "ES256")
        #expect(header["typ"] == "at+jwt")
        #expect(header["kid"] == .string(try await fixture.keys.currentSigningKey().keyID))
        #expect(Set(payload.names) == ["iss", "sub", "sid", "iat", "exp", "auth_time", "amr", "cnf"])
        #expect(payload["iss"] == "tether")
        #expect(payload["sub"] == .string(fixture.userId.uuidString.lowercased()))
        #expect(payload["sid"] == .string(fixture.sessionId.uuidString.lowercased()))
        try await fixture.db.close()
    }

    @Test func unboundTokenHasNoConfirmationClaim() async throws {
        let fixture = try await Fixture.make()
        let issued = try await fixture.issue()
        #expect(try TokensForgery.parts(of: issued.token).claims["cnf"] == nil)
        #expect(try await fixture.verifier.verify(issued.token).jkt == nil)
        try await fixture.db.close()
    }

    @Test func expiredTokenIsInvalidOnceTheLeewayIsUsedUp() async throws {
        let fixture = try await Fixture.make()
        let issued = try await fixture.issue()
        fixture.clock.advance(by: 900 + 29)
        #expect(try await fixture.verifier.verify(issued.token).userId == fixture.userId)
        fixture.clock.advance(by: 1)
        await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(issued.token) }
        try await fixture.db.close()
    }

    @Test func tokenFromAnotherIssuerIsInvalid() async throws {
        let fixture = try await Fixture.make()
        let other = AccessTokenIssuer(keys: fixture.keys, configuration: .init(issuer: "https://elsewhere.example"),
                                      clock: fixture.clock)
        let token = try await other.issue(userId: fixture.userId, sessionId: fixture.sessionId, authTime: fixture.clock.now(), amr: ["pwd"]).token
        await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(token) }
        let strict = AccessTokenVerifier(keys: fixture.keys, configuration: .init(issuer: "https://elsewhere.example"), clock: fixture.clock)
        #expect(try await strict.verify(token).userId == fixture.userId)
        try await fixture.db.close()
    }

    @Test(arguments: ["RS256", "PS256", "EdDSA", "ES384", "none", "HS256"])
    func algorithmSwappedInTheHeaderIsInvalid(algorithm: String) async throws {
        let fixture = try await Fixture.make()
        let key = try await fixture.keys.currentSigningKey()
        let privateKey = try TokensForgery.privateKey(of: key)
        let token = try TokensForgery.token(
            header: ["alg": .string(algorithm), "kid": .string(key.keyID), "typ": "at+jwt"], claims: fixture.claims()
        ) { try privateKey.signature(for: $0, algorithm: .ecdsaP256SHA256) }
        await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(token) }
        try await fixture.db.close()
    }

    @Test func hs256KeyedWithThePublicKeyIsInvalid() async throws {
        let fixture = try await Fixture.make()
        let key = try await fixture.keys.currentSigningKey()
        let publicKey = try #require(key.publicJWK.publicKey)
        let secrets: [[UInt8]] = [
            Array(try publicKey.pemEncoded().utf8), try publicKey.spkiDER(), try key.publicJWK.jsonObject().jsonBytes,
            try await fixture.keys.publishedKeys().publicJSONObject().jsonBytes,
        ]
        for secret in secrets {
            let token = TokensForgery.token(header: ["alg": "HS256", "kid": .string(key.keyID), "typ": "at+jwt"],
                                            claims: fixture.claims()) { HMAC.authenticationCode(for: $0, key: secret, digest: .sha256) }
            await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(token) }
        }
        try await fixture.db.close()
    }

    @Test func tamperedPayloadIsInvalid() async throws {
        let fixture = try await Fixture.make()
        let issued = try await fixture.issue()
        var (header, claims, signature) = try TokensForgery.parts(of: issued.token)
        #expect(try await fixture.verifier.verify(issued.token).userId == fixture.userId)
        claims["sub"] = .string(UUID().uuidString.lowercased())
        let tampered = Base64URL.encode(header.jsonBytes) + "." + Base64URL.encode(claims.jsonBytes) + "." + signature
        await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(tampered) }
        header["typ"] = "JWT"
        let retyped = Base64URL.encode(header.jsonBytes) + "." + issued.token.split(separator: ".")[1] + "." + signature
        await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(retyped) }
        try await fixture.db.close()
    }

    @Test(arguments: [nil, "JWT", "dpop+jwt"] as [String?])
    func tokenOfAnotherTypeIsInvalid(type: String?) async throws {
        let fixture = try await Fixture.make()
        let token = try await fixture.keys.currentSigningKey().signer.sign(claims: fixture.claims(), type: type)
        await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(token) }
        let proper = try await fixture.keys.currentSigningKey().signer.sign(claims: fixture.claims(), type: "at+jwt")
        #expect(try await fixture.verifier.verify(proper).amr == ["pwd"])
        try await fixture.db.close()
    }

    @Test(arguments: [
        ("sub", nil), ("sid", nil), ("iat", nil), ("exp", nil), ("auth_time", nil), ("amr", nil),
        ("sub", JOSEValue.string("not-a-uuid")), ("sub", .string(UUID().uuidString)), ("sid", .number(7)),
        ("amr", .string("pwd")), ("amr", .array([1])), ("cnf", .object(["x5t#S256": "abc"])), ("auth_time", "yesterday"),
    ] as [(String, JOSEValue?)])
    func tokenWithAMissingOrMistypedClaimIsInvalid(claim: String, value: JOSEValue?) async throws {
        let fixture = try await Fixture.make()
        var claims = fixture.claims()
        claims[claim] = value
        let token = try await fixture.keys.currentSigningKey().signer.sign(claims: claims, type: "at+jwt")
        await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(token) }
        try await fixture.db.close()
    }

    @Test(arguments: ["", "abc", "a.b.c", "..", "eyJhbGciOiJFUzI1NiJ9.e30."])
    func malformedTokenIsInvalid(token: String) async throws {
        let fixture = try await Fixture.make()
        await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(token) }
        try await fixture.db.close()
    }

    @Test func tokenSignedByAnUnknownKeyIsInvalid() async throws {
        let fixture = try await Fixture.make()
        _ = try await fixture.keys.currentSigningKey()
        let stranger = try PrivateKey.generate(.ecP256)
        let kid = try JWK(material: .publicKey(stranger.publicKey)).thumbprint()
        let token = try JWTSigner(privateKey: stranger, algorithm: .es256, keyID: kid).sign(claims: fixture.claims(), type: "at+jwt")
        await #expect(throws: TokenError.invalidToken) { try await fixture.verifier.verify(token) }
        try await fixture.db.close()
    }

    @Test func tokenSignedByARetiredKeyIsInvalidEvenBeforeItExpires() async throws {
        let fixture = try await Fixture.make()
        let issued = try await fixture.issue()
        // The verifier's clock stays put, so only the key's retirement can fail the token.
        let storeClock = ManualClock(fixture.clock.now())
        let laterKeys = SigningKeyStore(client: fixture.db.client, clock: storeClock)
        let verifier = AccessTokenVerifier(keys: laterKeys, clock: fixture.clock)
        #expect(try await verifier.verify(issued.token).sessionId == fixture.sessionId)
        let configuration = laterKeys.configuration
        storeClock.advance(by: configuration.rotationInterval)
        _ = try await laterKeys.publishedKeys() // publishes the successor
        storeClock.advance(by: configuration.prepublicationInterval + configuration.retention)
        #expect(try await laterKeys.publishedKeys().keys.count == 1)
        let error = await #expect(throws: TokenError.invalidToken) { try await verifier.verify(issued.token) }
        #expect(error?.detail.contains("not (or no longer) published") == true)
        try await fixture.db.close()
    }

    @Test func tokenSignedByAKeyAnotherProcessJustMadeVerifiesAfterOneReload() async throws {
        let fixture = try await Fixture.make()
        let cached = try await fixture.keys.currentSigningKey()
        // Another process whose key this store has never seen (its cache predates the key).
        try await fixture.db.adminQuery("DELETE FROM signing_keys")
        let otherKeys = SigningKeyStore(client: fixture.db.client, clock: fixture.clock)
        let otherIssuer = AccessTokenIssuer(keys: otherKeys, clock: fixture.clock)
        let token = try await otherIssuer.issue(userId: fixture.userId, sessionId: fixture.sessionId,
                                                authTime: fixture.clock.now(), amr: ["pwd"]).token
        #expect(try await otherKeys.currentSigningKey().keyID != cached.keyID)
        fixture.clock.advance(by: 6) // past the reload cooldown, within the cache lifetime
        #expect(try await fixture.verifier.verify(token).userId == fixture.userId)
        try await fixture.db.close()
    }

    @Test func invalidTokenIsA401WithABearerChallenge() {
        let problem = TokenError.invalidToken.with(detail: "The access token has expired.").problem
        #expect(problem.status == 401)
        #expect(problem.code == "invalid_token")
        #expect(problem.detail == "The access token has expired.")
        #expect(problem.headers["WWW-Authenticate"] == #"Bearer error="invalid_token""#)
    }
}
