import Foundation
import Testing
import TetherTesting
import TetherCrypto
import TetherJOSE

@Suite("Algorithm pinning and header rules")
struct AlgorithmPinningTests {
    static let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
    static let claims: JOSEObject = ["iss": "https://idp.example", "sub": "alice", "exp": 1_700_000_600, "iat": 1_700_000_000]
    static let rsaJWK = try! JWK(material: .publicKey(TestKeys.rsa.publicKey), keyID: "rsa-1", algorithm: .rs256)
    static let verifier = JWTVerifier(configuration: .init(allowedAlgorithms: JWSAlgorithm.asymmetric.union([.hs256])), clock: clock)

    static func hs256Token(secret: [UInt8], kid: String = "rsa-1") -> String {
        forgeToken(header: #"{"alg":"HS256","kid":"\#(kid)"}"#, claims: claims) { HMAC.authenticationCode(for: $0, key: secret, digest: .sha256) }
    }

    @Test func hs256WithRSAPublicKeyPEMAsSecretIsRejected() throws {
        let pem = try TestKeys.rsa.publicKey.pemEncoded()
        let token = Self.hs256Token(secret: Array(pem.utf8))
        #expect(throws: JOSEError.algorithm) { try Self.verifier.verify(token, keys: JWKSet(keys: [Self.rsaJWK])) }
    }

    @Test func hs256WithRSAPublicKeyDERAsSecretIsRejected() throws {
        let token = Self.hs256Token(secret: try TestKeys.rsa.publicKey.spkiDER())
        #expect(throws: JOSEError.algorithm) { try Self.verifier.verify(token, keys: JWKSet(keys: [Self.rsaJWK])) }
    }

    @Test func hs256WithRSAPublicJWKBytesAsSecretIsRejected() throws {
        let token = Self.hs256Token(secret: try Self.rsaJWK.jsonObject().jsonBytes)
        #expect(throws: JOSEError.algorithm) { try Self.verifier.verify(token, keys: JWKSet(keys: [Self.rsaJWK])) }
        // Even a key with no alg of its own never pairs HMAC with an RSA key.
        let unpinned = try JWK(material: .publicKey(TestKeys.rsa.publicKey), keyID: "rsa-1")
        #expect(throws: JOSEError.algorithm) { try Self.verifier.verify(token, keys: JWKSet(keys: [unpinned])) }
    }

    @Test("alg none is rejected in every spelling", arguments: ["none", "None", "NONE", "nOnE", "noNE"])
    func algNoneIsRejectedInEverySpelling(spelling: String) throws {
        let token = Base64URL.encode(Array(#"{"alg":"\#(spelling)","kid":"rsa-1"}"#.utf8)) + "." + Base64URL.encode(Self.claims.jsonBytes) + "."
        #expect(throws: JOSEError.algorithm) { try Self.verifier.verify(token, keys: JWKSet(keys: [Self.rsaJWK])) }
        #expect(throws: JOSEError.algorithm) { try Self.verifier.verify(token + "c2ln", keys: JWKSet(keys: [Self.rsaJWK])) }
    }

    @Test func tokenAlgorithmOutsideTheAllowlistIsRejectedEvenIfTheSignatureIsGood() throws {
        let signer = try JWTSigner(privateKey: TestKeys.rsa, algorithm: .ps256, keyID: "rsa-2")
        let keys = JWKSet(keys: [try JWK(material: .publicKey(TestKeys.rsa.publicKey), keyID: "rsa-2")])
        let token = try signer.sign(claims: Self.claims)
        let pinned = JWTVerifier(configuration: .init(allowedAlgorithms: [.rs256]), clock: Self.clock)
        #expect(throws: JOSEError.algorithm) { try pinned.verify(token, keys: keys) }
        #expect(try Self.verifier.verify(token, keys: keys).claims.subject == "alice")
    }

    @Test("Embedded key headers are rejected", arguments: ["jwk", "jku", "x5u", "x5c"])
    func embeddedKeyHeadersAreRejected(parameter: String) throws {
        let value = parameter == "jwk" ? String(decoding: try Self.rsaJWK.jsonObject().jsonBytes, as: UTF8.self)
            : parameter == "x5c" ? #"["MIIB"]"# : #""https://attacker.example/keys""#
        let token = try forgeToken(header: #"{"alg":"RS256","kid":"rsa-1","\#(parameter)":\#(value)}"#, claims: Self.claims) {
            try TestKeys.rsa.signature(for: $0, algorithm: .rsaPKCS1v15(.sha256))
        }
        #expect(throws: JOSEError.header) { try Self.verifier.verify(token, keys: JWKSet(keys: [Self.rsaJWK])) }
    }

    @Test("Unknown or malformed crit headers are rejected", arguments: [
        #""crit":["exp"],"exp":1"#, #""crit":[]"#, #""crit":"exp""#, #""crit":["alg"]"#, #""crit":["b64x"]"#,
    ])
    func unknownCriticalHeadersAreRejected(member: String) throws {
        let token = try forgeToken(header: #"{"alg":"RS256","kid":"rsa-1",\#(member)}"#, claims: Self.claims) {
            try TestKeys.rsa.signature(for: $0, algorithm: .rsaPKCS1v15(.sha256))
        }
        #expect(throws: JOSEError.critical) { try Self.verifier.verify(token, keys: JWKSet(keys: [Self.rsaJWK])) }
    }

    @Test func understoodCriticalHeaderIsAccepted() throws {
        let token = try forgeToken(header: #"{"alg":"RS256","kid":"rsa-1","crit":["tether"],"tether":1}"#, claims: Self.claims) {
            try TestKeys.rsa.signature(for: $0, algorithm: .rsaPKCS1v15(.sha256))
        }
        let verifier = JWTVerifier(configuration: .init(allowedAlgorithms: [.rs256], understoodCriticalParameters: ["tether"]),
                                   clock: Self.clock)
        #expect(try verifier.verify(token, keys: JWKSet(keys: [Self.rsaJWK])).claims.subject == "alice")
    }

    @Test("Unsafe kid values are rejected", arguments: [
        String(repeating: "k", count: 257), "", "a\"b", "a\\b", "a'b", "line\nbreak", "tab\tkid", "ünïcode",
    ])
    func unsafeKidValuesAreRejected(kid: String) throws {
        var header: JOSEObject = ["alg": "RS256"]
        header["kid"] = .string(kid)
        let token = try forgeToken(header: String(decoding: header.jsonBytes, as: UTF8.self), claims: Self.claims) {
            try TestKeys.rsa.signature(for: $0, algorithm: .rsaPKCS1v15(.sha256))
        }
        #expect(throws: JOSEError.keyID) { try Self.verifier.verify(token, keys: JWKSet(keys: [Self.rsaJWK])) }
    }

    @Test func kidOf256PrintableCharactersIsAccepted() throws {
        let kid = String(repeating: "k", count: 250) + "-_.:/ "
        let signer = try JWTSigner(privateKey: TestKeys.rsa, algorithm: .rs256, keyID: kid)
        let keys = JWKSet(keys: [try JWK(material: .publicKey(TestKeys.rsa.publicKey), keyID: kid)])
        #expect(try Self.verifier.verify(signer.sign(claims: Self.claims), keys: keys).key.keyID == kid)
    }

    @Test func unknownKidIsReportedAsUnknownKey() throws {
        let signer = try JWTSigner(privateKey: TestKeys.rsa, algorithm: .rs256, keyID: "rotated-away")
        #expect(throws: JOSEError.unknownKey) { try Self.verifier.verify(signer.sign(claims: Self.claims), keys: JWKSet(keys: [Self.rsaJWK])) }
    }

    @Test func signatureByAnotherKeyWithTheSameKidIsRejected() throws {
        let impostor = try JWTSigner(privateKey: PrivateKey.generate(.ecP256), algorithm: .es256, keyID: "ec-1")
        let keys = JWKSet(keys: [try JWK(material: .publicKey(TestKeys.ec.publicKey), keyID: "ec-1")])
        #expect(throws: JOSEError.signature) { try Self.verifier.verify(impostor.sign(claims: Self.claims), keys: keys) }
    }

    @Test func rsaJWKUnder2048BitsIsRefused() throws {
        // 1024-bit modulus: 128 bytes with the top bit set.
        let modulus = [UInt8](repeating: 0xC5, count: 127) + [0x01]
        let json = #"{"kty":"RSA","n":"\#(Base64URL.encode(modulus))","e":"AQAB"}"#
        #expect(throws: JOSEError.key) { try JWK(parsing: Array(json.utf8)) }
    }

    @Test func jwsOtherThanCompactSerializationIsRejected() {
        #expect(throws: JOSEError.malformed) { try CompactJWS(parsing: #"{"payload":"e30","signatures":[]}"#) }
        #expect(throws: JOSEError.malformed) { try CompactJWS(parsing: "a.b.c.d.e") }
        #expect(throws: JOSEError.malformed) { try CompactJWS(parsing: String(repeating: "a", count: 20_000) + ".e30.c2ln") }
    }
}
