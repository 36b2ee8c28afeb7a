import Foundation
import Testing
import TetherCrypto
import TetherJOSE

@Suite("JWK and JWK Set")
struct JWKTests {
    static func jwk(_ json: String) throws -> JWK { try JWK(parsing: Array(json.utf8)) }

    @Test(arguments: [TestKeys.rsa, TestKeys.ec, TestKeys.ed25519])
    func privateJWKRoundTripsAndPublicExportHasNoSecrets(key: PrivateKey) throws {
        let jwk = try JWK(material: .privateKey(key), keyID: "k1", use: "sig")
        let secretJSON = try jwk.jsonObject(includingSecretMembers: true)
        #expect(secretJSON["d"] != nil)
        let reparsed = try JWK(object: secretJSON)
        #expect(reparsed.isSecret && reparsed.keyID == "k1" && reparsed.use == "sig")
        #expect(reparsed.thumbprint() == jwk.thumbprint())
        let publicJSON = try #require(jwk.publicJWK).jsonObject()
        #expect(Set(publicJSON.names).isDisjoint(with: ["d", "p", "q", "dp", "dq", "qi", "k"]))
        #expect(try JWK(object: publicJSON).thumbprint() == jwk.thumbprint())
        #expect(try jwk.jsonObject()["d"] == nil)
    }

    @Test("Inconsistent JWKs are refused", arguments: [
        #"{"kty":"EC","crv":"P-256","alg":"RS256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#,
        #"{"kty":"EC","crv":"P-384","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#,
        #"{"kty":"EC","crv":"P-256","use":"sig","key_ops":["encrypt"],"x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#,
        #"{"kty":"EC","crv":"P-256","key_ops":["verify","verify"],"x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#,
        #"{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a1"}"#,
        #"{"kty":"oct","alg":"HS512","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}"#,
        #"{"kty":"oct","k":""}"#,
        #"{"kty":"OKP","crv":"X25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#,
        #"{"kty":"RSA","e":"AQAB"}"#,
        #"{"n":"AQAB","e":"AQAB"}"#,
        #"{"kty":"EC","crv":"P-256","alg":"ES256K","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#,
    ])
    func inconsistentJWKIsRefused(json: String) {
        #expect(throws: JOSEError.key) { try Self.jwk(json) }
    }

    @Test func keyIntendedForEncryptionIsNotUsedToVerify() throws {
        let encryption = try JWK(material: .publicKey(TestKeys.ec.publicKey), keyID: "enc", use: "enc")
        let verifyOnly = try JWK(material: .publicKey(TestKeys.ec.publicKey), keyID: "ops", operations: ["encrypt"])
        #expect(!encryption.isUsableForVerification && !verifyOnly.isUsableForVerification)
        let token = try JWTSigner(privateKey: TestKeys.ec, algorithm: .es256, keyID: "enc").sign(claims: ["exp": 4_000_000_000])
        let jws = try CompactJWS(parsing: token)
        #expect(throws: JOSEError.key) { try jws.verifySignature(with: encryption, allowedAlgorithms: [.es256]) }
    }

    @Test func keySetSkipsAndCountsUnusableKeysAndIndexesByKid() throws {
        let ecPublic = try JWK(material: .publicKey(TestKeys.ec.publicKey), keyID: "ec-1").jsonObject()
        let rsaPublic = try JWK(material: .publicKey(TestKeys.rsa.publicKey), keyID: "rsa-1", algorithm: .rs256).jsonObject()
        let ecPrivate = try JWK(material: .privateKey(TestKeys.ec), keyID: "leaked").jsonObject(includingSecretMembers: true)
        let document: JOSEObject = ["keys": [
            .object(ecPublic), .object(rsaPublic), .object(ecPrivate),
            ["kty": "EC", "crv": "P-521", "kid": "p521", "x": "AA", "y": "AA"],
            ["kty": "RSA", "kid": "enc", "use": "enc", "n": rsaPublic["n"]!, "e": "AQAB"],
            ["kty": "RSA", "kid": "bad\"kid", "n": rsaPublic["n"]!, "e": "AQAB"],
            "not an object",
        ]]
        let set = try JWKSet(parsing: document.jsonBytes)
        #expect(set.keys.count == 2)
        #expect(set.unusableKeyCount == 5)
        #expect(set.keys(withID: "rsa-1").first?.algorithm == .rs256)
        #expect(set.containsKey(withID: "ec-1") && !set.containsKey(withID: "leaked"))
        let published = try set.publicJSONObject()
        #expect(try JWKSet(parsing: published.jsonBytes).keys.map(\.keyID) == ["ec-1", "rsa-1"])
    }

    @Test func keySetFromTheNetworkSkipsHMACSecrets() throws {
        let document: JOSEObject = ["keys": [["kty": "oct", "kid": "shared", "k": .string(Base64URL.encode(SecureRandom.bytes(count: 32)))]]]
        #expect(try JWKSet(parsing: document.jsonBytes).keys.count == 1)
        let published = try JWKSet(parsing: document.jsonBytes, allowsSymmetricKeys: false)
        #expect(published.keys.isEmpty && published.unusableKeyCount == 1)
    }

    @Test func publicHalfOfASigningKeyMayVerify() throws {
        let signing = try JWK(material: .privateKey(TestKeys.ec), keyID: "s", operations: ["sign"])
        let published = try #require(signing.publicJWK)
        #expect(published.operations == ["verify"] && published.isUsableForVerification)
        #expect(try JWK(material: .privateKey(TestKeys.ec)).publicJWK?.operations == nil)
    }

    @Test func keySetDocumentMustHaveAKeysArray() {
        #expect(throws: JOSEError.malformed) { try JWKSet(parsing: Array(#"{"kty":"oct","k":"AAAA"}"#.utf8)) }
        #expect(throws: JOSEError.malformed) { try JWKSet(parsing: Array("[]".utf8)) }
    }

    @Test func tokenWithoutKidNeedsExactlyOneFittingKey() throws {
        let claims: JOSEObject = ["exp": 4_000_000_000]
        let token = try JWTSigner(privateKey: TestKeys.ec, algorithm: .es256).sign(claims: claims)
        let jws = try CompactJWS(parsing: token)
        let single = JWKSet(keys: [try JWK(material: .publicKey(TestKeys.ec.publicKey))])
        #expect(try jws.verifySignature(using: single, allowedAlgorithms: [.es256]).keyType == "EC")
        let two = JWKSet(keys: [try JWK(material: .publicKey(TestKeys.ec.publicKey)),
                                try JWK(material: .publicKey(PrivateKey.generate(.ecP256).publicKey))])
        #expect(throws: JOSEError.unknownKey) { try jws.verifySignature(using: two, allowedAlgorithms: [.es256]) }
    }
}
