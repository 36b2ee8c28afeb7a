import Foundation
import Testing
import TetherTesting
import TetherCrypto
import TetherJOSE

@Suite("DPoP proof verification")
struct DPoPTests {
    let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
    let store: InMemoryDPoPReplayStore
    let verifier: DPoPVerifier
    static let url = "https://api.tether.example/v1/sessions/refresh"
    static let accessToken = "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"

    init() {
        store = InMemoryDPoPReplayStore(clock: clock)
        verifier = DPoPVerifier(replayStore: store, clock: clock)
    }

    func claims(_ changes: [String: JOSEValue?] = [:]) -> JOSEObject {
        var claims: JOSEObject = [
            "jti": .string(UUID().uuidString), "htm": "POST", "htu": .string(Self.url),
            "iat": .number(clock.now().timeIntervalSince1970),
            "ath": .string(Base64URL.encode(DigestAlgorithm.sha256.hash(Array(Self.accessToken.utf8)))),
        ]
        for (name, value) in changes { claims[name] = value }
        return claims
    }

    func proof(_ claims: JOSEObject, key: PrivateKey = TestKeys.ec, algorithm: JWSAlgorithm = .es256,
               type: String = "dpop+jwt", jwk: JOSEObject? = nil) throws -> String {
        let header = try jwk ?? JWK(material: .publicKey(key.publicKey)).jsonObject()
        return try JWTSigner(privateKey: key, algorithm: algorithm).sign(claims: claims, type: type, header: ["jwk": .object(header)])
    }

    func verify(_ proof: String, method: String = "POST", url: String = url, accessToken: String? = accessToken,
                expectedThumbprint: String? = nil, acceptedNonces: Set<String>? = nil) async throws -> DPoPVerifier.Proof {
        try await verifier.verify(proof, method: method, url: url, accessToken: accessToken,
                                  expectedThumbprint: expectedThumbprint, acceptedNonces: acceptedNonces)
    }

    @Test(arguments: [(JWSAlgorithm.es256, TestKeys.ec), (.rs256, TestKeys.rsa), (.ps256, TestKeys.rsa), (.edDSA, TestKeys.ed25519)])
    func validProofIsAcceptedAndReturnsTheKeyThumbprint(algorithm: JWSAlgorithm, key: PrivateKey) async throws {
        let expected = try JWK(material: .publicKey(key.publicKey)).thumbprint()
        let verified = try await verify(proof(claims(), key: key, algorithm: algorithm), expectedThumbprint: expected)
        #expect(verified.thumbprint == expected)
    }

    @Test func wrongMethodIsRejected() async throws {
        await #expect(throws: JOSEError.method) { try await verify(proof(claims()), method: "GET") }
        await #expect(throws: JOSEError.method) { try await verify(proof(claims(["htm": "post"]))) }
    }

    @Test func wrongTargetURIIsRejectedButEquivalentSpellingsMatch() async throws {
        await #expect(throws: JOSEError.url) { try await verify(proof(claims(["htu": "https://api.tether.example/v1/sessions"]))) }
        await #expect(throws: JOSEError.url) { try await verify(proof(claims(["htu": "http://api.tether.example/v1/sessions/refresh"]))) }
        await #expect(throws: JOSEError.url) { try await verify(proof(claims(["htu": "https://evil.example/v1/sessions/refresh"]))) }
        let equivalent = "HTTPS://API.Tether.Example:443/v1/sessions/%72efresh?x=1#fragment"
        #expect(try await verify(proof(claims(["htu": .string(equivalent)])), url: Self.url + "?y=2").claims["htm"] == "POST")
        #expect(try await verify(proof(claims(["htu": "http://127.0.0.1:8080/"])), url: "http://127.0.0.1:8080").claims["htm"] == "POST")
    }

    @Test func staleOrFutureIssuedAtIsRejected() async throws {
        let now = clock.now().timeIntervalSince1970
        await #expect(throws: JOSEError.tooOld) { try await verify(proof(claims(["iat": .number(now - 400)]))) }
        await #expect(throws: JOSEError.issuedInFuture) { try await verify(proof(claims(["iat": .number(now + 120)]))) }
        await #expect(throws: JOSEError.missingClaim) { try await verify(proof(claims(["iat": nil]))) }
        #expect(try await verify(proof(claims(["iat": .number(now - 290)]))).claims["htm"] == "POST")
    }

    @Test func replayedProofIsRejected() async throws {
        let replayed = try proof(claims())
        _ = try await verify(replayed)
        await #expect(throws: JOSEError.replay) { try await verify(replayed) }
        clock.advance(by: 20)
        await #expect(throws: JOSEError.replay) { try await verify(replayed) }
    }

    @Test func rejectedProofDoesNotUseUpItsJTI() async throws {
        let candidate = try proof(claims())
        await #expect(throws: JOSEError.method) { try await verify(candidate, method: "DELETE") }
        #expect(try await verify(candidate).claims["htm"] == "POST")
    }

    @Test func privateKeyInTheJWKHeaderIsRejected() async throws {
        let leaked = try JWK(material: .privateKey(TestKeys.ec)).jsonObject(includingSecretMembers: true)
        await #expect(throws: JOSEError.key) { try await verify(proof(claims(), jwk: leaked)) }
    }

    @Test func symmetricAlgorithmIsRejected() async throws {
        // The attacker MACs with the public key's JSON as the secret and claims HS256.
        let jwk = try JWK(material: .publicKey(TestKeys.ec.publicKey)).jsonObject()
        let header = #"{"typ":"dpop+jwt","alg":"HS256","jwk":\#(String(decoding: jwk.jsonBytes, as: UTF8.self))}"#
        let forged = forgeToken(header: header, claims: claims()) { HMAC.authenticationCode(for: $0, key: jwk.jsonBytes, digest: .sha256) }
        await #expect(throws: JOSEError.algorithm) { try await verify(forged) }
    }

    @Test func wrongOrMissingAccessTokenHashIsRejected() async throws {
        await #expect(throws: JOSEError.accessTokenHash) { try await verify(proof(claims()), accessToken: "another-token") }
        await #expect(throws: JOSEError.missingClaim) { try await verify(proof(claims(["ath": nil]))) }
        #expect(try await verify(proof(claims(["ath": nil])), accessToken: nil).claims["ath"] == nil)
    }

    @Test func missingOrStaleNonceIsRejectedWhenTheServerRequiresOne() async throws {
        await #expect(throws: JOSEError.nonce) { try await verify(proof(claims()), acceptedNonces: ["n-2"]) }
        await #expect(throws: JOSEError.nonce) { try await verify(proof(claims(["nonce": "n-1"])), acceptedNonces: ["n-2"]) }
        #expect(try await verify(proof(claims(["nonce": "n-2"])), acceptedNonces: ["n-1", "n-2"]).claims["nonce"] == "n-2")
    }

    @Test func wrongTypeOrMissingJWKIsRejected() async throws {
        await #expect(throws: JOSEError.type) { try await verify(proof(claims(), type: "JWT")) }
        let withoutKey = try JWTSigner(privateKey: TestKeys.ec, algorithm: .es256).sign(claims: claims(), type: "dpop+jwt")
        await #expect(throws: JOSEError.header) { try await verify(withoutKey) }
    }

    @Test func proofFromAnotherKeyThanTheBoundOneIsRejected() async throws {
        let bound = try JWK(material: .publicKey(TestKeys.rsa.publicKey)).thumbprint()
        await #expect(throws: JOSEError.keyBinding) { try await verify(proof(claims()), expectedThumbprint: bound) }
    }

    @Test func signatureFromAnotherKeyThanTheEmbeddedOneIsRejected() async throws {
        let other = try JWK(material: .publicKey(PrivateKey.generate(.ecP256).publicKey)).jsonObject()
        await #expect(throws: JOSEError.signature) { try await verify(proof(claims(), jwk: other)) }
    }
}
