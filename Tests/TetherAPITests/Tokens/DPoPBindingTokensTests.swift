import Foundation
import Testing
import TetherTesting
import TetherAPI
import TetherCrypto
import TetherHTTP
import TetherJOSE

@Suite("DPoP proofs on requests, with the PostgreSQL replay store")
struct DPoPBindingTokensTests {
    static let host = "127.0.0.1:8080"
    static let path = "/v1/sessions/refresh"
    static let url = "http://127.0.0.1:8080/v1/sessions/refresh"
    static let accessToken = "eyJhbGciOiJFUzI1NiIsInR5cCI6ImF0K2p3dCJ9.e30.c2lnbmF0dXJl"

    let clock = ManualClock()
    let deviceKey = try! PrivateKey.generate(.ecP256)

    var deviceThumbprint: String { (try? JWK(material: .publicKey(deviceKey.publicKey)).thumbprint()) ?? "" }

    func binding(_ db: TokensDatabase, configuration: DPoPBinding.Configuration = .init()) -> DPoPBinding {
        DPoPBinding(replayStore: PostgresDPoPReplayStore(client: db.client, clock: clock), configuration: configuration, clock: clock)
    }

    func proof(method: String = "POST", url: String = url, accessToken: String? = nil, jti: String = UUID().uuidString,
               key: PrivateKey? = nil) throws -> String {
        let key = key ?? deviceKey
        var claims: JOSEObject = ["jti": .string(jti), "htm": .string(method), "htu": .string(url),
                                  "iat": .number(clock.now().timeIntervalSince1970)]
        if let accessToken { claims["ath"] = .string(Base64URL.encode(DigestAlgorithm.sha256.hash(Array(accessToken.utf8)))) }
        let jwk = try JWK(material: .publicKey(key.publicKey)).jsonObject()
        return try JWTSigner(privateKey: key, algorithm: .es256).sign(claims: claims, type: "dpop+jwt", header: ["jwk": .object(jwk)])
    }

    func request(method: String = "POST", target: String = path, host: String = host, proofs: [String]) -> HTTPRequest {
        var headers: HTTPHeaders = ["Host": host]
        for proof in proofs { headers.add(name: "DPoP", value: proof) }
        return HTTPRequest(method: method, target: target, headers: headers)
    }

    @Test func validProofYieldsTheThumbprintOfItsKey() async throws {
        let db = try await TokensDatabase.make()
        let jkt = try await binding(db).verifyProof(in: request(proofs: [proof()]))
        #expect(jkt == deviceThumbprint)
        try await db.close()
    }

    @Test func validProofWithTheAccessTokenHashAndTheBoundKeyIsAccepted() async throws {
        let db = try await TokensDatabase.make()
        let jkt = try await binding(db).verifyProof(
            in: request(target: Self.path + "?ignored=1", proofs: [proof(accessToken: Self.accessToken)]),
            accessToken: Self.accessToken, boundThumbprint: deviceThumbprint)
        #expect(jkt == deviceThumbprint)
        try await db.close()
    }

    @Test func replayedProofIsRejectedEvenByAnotherProcess() async throws {
        let db = try await TokensDatabase.make()
        let captured = try proof()
        _ = try await binding(db).verifyProof(in: request(proofs: [captured]))
        // A second binding and store stand for a second Tether process: only the shared table knows the jti.
        let error = await #expect(throws: TokenError.invalidDPoPProof) {
            try await binding(db).verifyProof(in: request(proofs: [captured]))
        }
        #expect(error?.detail == "The DPoP proof was already used.")
        try await db.close()
    }

    @Test func ofTenRacingUsesOfOneProofExactlyOneIsAccepted() async throws {
        let db = try await TokensDatabase.make()
        let captured = try proof()
        let accepted = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<10 {
                group.addTask { (try? await binding(db).verifyProof(in: request(proofs: [captured]))) != nil }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(accepted == 1)
        try await db.close()
    }

    @Test func sameJTIUnderAnotherKeyIsADifferentProof() async throws {
        let db = try await TokensDatabase.make()
        _ = try await binding(db).verifyProof(in: request(proofs: [proof(jti: "shared-jti")]))
        let otherKey = try PrivateKey.generate(.ecP256)
        let jkt = try await binding(db).verifyProof(in: request(proofs: [proof(jti: "shared-jti", key: otherKey)]))
        #expect(jkt == (try JWK(material: .publicKey(otherKey.publicKey)).thumbprint()))
        try await db.close()
    }

    @Test(arguments: [
        ("GET", url), ("DELETE", url), ("POST", "http://127.0.0.1:8080/v1/sign-out"), ("POST", "https://127.0.0.1:8080/v1/sessions/refresh"),
        ("POST", "http://127.0.0.1:8081/v1/sessions/refresh"), ("POST", "http://evil.example/v1/sessions/refresh"),
    ])
    func proofForAnotherMethodOrURLIsRejected(method: String, url: String) async throws {
        let db = try await TokensDatabase.make()
        await #expect(throws: TokenError.invalidDPoPProof) {
            try await binding(db).verifyProof(in: request(proofs: [proof(method: method, url: url)]))
        }
        try await db.close()
    }

    @Test func proofWithoutOrWithAWrongAccessTokenHashIsRejected() async throws {
        let db = try await TokensDatabase.make()
        let binding = binding(db)
        await #expect(throws: TokenError.invalidDPoPProof) {
            try await binding.verifyProof(in: request(proofs: [proof(accessToken: Self.accessToken + "x")]), accessToken: Self.accessToken)
        }
        await #expect(throws: TokenError.invalidDPoPProof) {
            try await binding.verifyProof(in: request(proofs: [proof()]), accessToken: Self.accessToken)
        }
        try await db.close()
    }

    @Test func proofByAnotherKeyThanTheSessionsIsRejected() async throws {
        let db = try await TokensDatabase.make()
        let otherKey = try PrivateKey.generate(.ecP256)
        let error = await #expect(throws: TokenError.invalidDPoPProof) {
            try await binding(db).verifyProof(in: request(proofs: [proof(key: otherKey)]), boundThumbprint: deviceThumbprint)
        }
        #expect(error?.detail == "The DPoP proof is not by the key the session is bound to.")
        try await db.close()
    }

    @Test(arguments: [0, 2])
    func requestWithoutExactlyOneProofIsRejected(count: Int) async throws {
        let db = try await TokensDatabase.make()
        let proofs = try (0..<count).map { _ in try proof() }
        await #expect(throws: TokenError.invalidDPoPProof) { try await binding(db).verifyProof(in: request(proofs: proofs)) }
        try await db.close()
    }

    @Test func staleProofIsRejected() async throws {
        let db = try await TokensDatabase.make()
        let old = try proof()
        clock.advance(by: 400)
        await #expect(throws: TokenError.invalidDPoPProof) { try await binding(db).verifyProof(in: request(proofs: [old])) }
        try await db.close()
    }

    @Test func externalURLComesFromTheHostHeaderOrTheConfiguredOrigin() async throws {
        let db = try await TokensDatabase.make()
        #expect(try binding(db).externalURLs(of: request(target: "/v1/a%2Fb?q=1", proofs: [])) == ["http://127.0.0.1:8080/v1/a%2Fb"])
        #expect(try binding(db).externalURLs(of: request(host: "id.tether.example", proofs: [])) == ["https://id.tether.example" + Self.path])
        #expect(try binding(db).externalURLs(of: request(host: "localhost:9000", proofs: [])) == ["http://localhost:9000" + Self.path])
        let configured = binding(db, configuration: .init(publicOrigin: "https://id.tether.example/"))
        #expect(try configured.externalURLs(of: request(host: "127.0.0.1:8080", proofs: []))
                == ["https://id.tether.example" + Self.path, "http://127.0.0.1:8080" + Self.path])
        #expect(try configured.externalURLs(of: request(host: "evil.example/x@", proofs: [])) == ["https://id.tether.example" + Self.path])
        #expect(throws: TokenError.invalidDPoPProof) { try binding(db).externalURLs(of: request(host: "evil.example/x@", proofs: [])) }
        let prefixed = binding(db, configuration: .init(publicOrigin: "https://example.com/auth"))
        #expect(try prefixed.externalURLs(of: request(host: "127.0.0.1:8080", proofs: [])).first == "https://example.com/auth" + Self.path)

        // Behind the configured origin, a proof for the public URL is the one that verifies.
        let jkt = try await configured.verifyProof(in: request(proofs: [proof(url: "https://id.tether.example" + Self.path)]))
        #expect(jkt == deviceThumbprint)
        try await db.close()
    }

    @Test func expiredReplayRecordsArePurgedAndNoLongerCountAsUse() async throws {
        let db = try await TokensDatabase.make()
        let store = PostgresDPoPReplayStore(client: db.client, purgeInterval: 3600, clock: clock)
        let expiry = clock.now().addingTimeInterval(60)
        #expect(try await store.recordFirstUse(of: "proof-a", until: expiry))
        #expect(try await !store.recordFirstUse(of: "proof-a", until: expiry))
        #expect(try await store.recordFirstUse(of: "proof-b", until: expiry))
        clock.advance(by: 61)
        // The purge is not due yet; the stale row alone is no evidence of replay.
        #expect(try await store.recordFirstUse(of: "proof-a", until: clock.now().addingTimeInterval(60)))
        #expect(try await store.purgeExpired(now: clock.now()) == 1)
        #expect(try await db.adminQuery("SELECT proof_hash FROM dpop_proofs").map { try $0.decode("proof_hash", as: String.self) } == ["proof-a"])
        try await db.close()
    }

    @Test func sessionBindingComparesThumbprints() throws {
        #expect(DPoPBinding.isSameKey(deviceThumbprint, as: deviceThumbprint))
        // Change the last character to one it certainly is not (a fresh key's thumbprint may end in "A").
        let altered = String(deviceThumbprint.dropLast()) + (deviceThumbprint.hasSuffix("A") ? "B" : "A")
        #expect(!DPoPBinding.isSameKey(deviceThumbprint, as: altered))
        #expect(!DPoPBinding.isSameKey("", as: deviceThumbprint))
        try DPoPBinding.requireSameKey(deviceThumbprint, as: deviceThumbprint)
        #expect(throws: TokenError.invalidDPoPProof) { try DPoPBinding.requireSameKey("other", as: deviceThumbprint) }
    }

    @Test func invalidProofIsA401WithADPoPChallenge() {
        let problem = TokenError.invalidDPoPProof.problem
        #expect(problem.status == 401)
        #expect(problem.code == "invalid_dpop_proof")
        #expect(problem.headers["WWW-Authenticate"]?.hasPrefix(#"DPoP error="invalid_dpop_proof", algs=""#) == true)
        #expect(problem.headers["WWW-Authenticate"]?.contains("ES256") == true)
    }
}
