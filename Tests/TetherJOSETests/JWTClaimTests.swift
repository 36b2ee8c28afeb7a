import Foundation
import Testing
import TetherTesting
import TetherCrypto
import TetherJOSE

@Suite("JWT claim validation")
struct JWTClaimTests {
    static let now: TimeInterval = 1_700_000_000
    static let signer = try! JWTSigner(privateKey: TestKeys.ec, algorithm: .es256, keyID: "ec-1")
    static let keys = JWKSet(keys: [try! JWK(material: .publicKey(TestKeys.ec.publicKey), keyID: "ec-1", algorithm: .es256)])
    static let base: JOSEObject = [
        "iss": "https://accounts.example", "aud": "client-a", "sub": "alice",
        "iat": .number(now - 10), "nbf": .number(now - 10), "exp": .number(now + 600),
    ]

    static func verify(_ claims: JOSEObject, type: String? = "JWT", at time: TimeInterval = now,
                       _ configure: (inout JWTVerifier.Configuration) -> Void = { _ in }) throws -> VerifiedJWT {
        var configuration = JWTVerifier.Configuration(allowedAlgorithms: [.es256], issuer: "https://accounts.example",
                                                      audiences: ["client-a", "client-b"], leeway: 30)
        configure(&configuration)
        let verifier = JWTVerifier(configuration: configuration, clock: ManualClock(Date(timeIntervalSince1970: time)))
        return try verifier.verify(signer.sign(claims: claims, type: type), keys: keys)
    }

    static func with(_ name: String, _ value: JOSEValue?) -> JOSEObject {
        var claims = base
        claims[name] = value
        return claims
    }

    @Test func validTokenIsAcceptedAndClaimsAreTyped() throws {
        let verified = try Self.verify(Self.base)
        #expect(verified.claims.subject == "alice")
        #expect(verified.claims.audience == ["client-a"])
        #expect(verified.claims.expiresAt == Date(timeIntervalSince1970: Self.now + 600))
        #expect(verified.key.keyID == "ec-1")
        struct Subject: Decodable { var sub: String }
        #expect(try verified.decode(Subject.self).sub == "alice")
    }

    @Test func issuerMustMatchExactly() {
        #expect(throws: JOSEError.issuer) { try Self.verify(Self.with("iss", "https://accounts.example/")) }
        #expect(throws: JOSEError.issuer) { try Self.verify(Self.with("iss", "HTTPS://accounts.example")) }
        #expect(throws: JOSEError.missingClaim) { try Self.verify(Self.with("iss", nil)) }
    }

    @Test func audienceMayBeAStringOrAListOfConfiguredAudiences() throws {
        #expect(try Self.verify(Self.with("aud", ["client-b"])).claims.audience == ["client-b"])
        // Another audience beside ours is refused (OpenID Connect Core §3.1.3.7); several of ours need an `azp` of ours.
        #expect(throws: JOSEError.audience) { try Self.verify(Self.with("aud", ["other", "client-b"])) }
        #expect(throws: JOSEError.audience) { try Self.verify(Self.with("aud", ["client-a", "client-b"])) }
        var both = Self.with("aud", ["client-a", "client-b"])
        both["azp"] = "client-b"
        #expect(try Self.verify(both).claims.audience == ["client-a", "client-b"])
        both["azp"] = "other"
        #expect(throws: JOSEError.audience) { try Self.verify(both) }
        #expect(throws: JOSEError.audience) { try Self.verify(Self.with("aud", "client-c")) }
        #expect(throws: JOSEError.audience) { try Self.verify(Self.with("aud", ["x", "y"])) }
        #expect(throws: JOSEError.audience) { try Self.verify(Self.with("aud", [])) }
        #expect(throws: JOSEError.malformed) { try Self.verify(Self.with("aud", ["client-a", 7])) }
        #expect(throws: JOSEError.missingClaim) { try Self.verify(Self.with("aud", nil)) }
    }

    @Test func expiryHonoursTheLeeway() throws {
        let exp = Self.now + 600
        #expect(try Self.verify(Self.base, at: exp + 29).claims.subject == "alice")
        #expect(throws: JOSEError.expired) { try Self.verify(Self.base, at: exp + 30) }
        #expect(throws: JOSEError.missingClaim) { try Self.verify(Self.with("exp", nil)) }
        #expect(throws: JOSEError.malformed) { try Self.verify(Self.with("exp", "1700000600")) }
    }

    @Test func notBeforeAndIssuedAtInTheFutureAreRejectedBeyondTheLeeway() throws {
        #expect(try Self.verify(Self.with("nbf", .number(Self.now + 29))).claims.subject == "alice")
        #expect(throws: JOSEError.notYetValid) { try Self.verify(Self.with("nbf", .number(Self.now + 31))) }
        #expect(try Self.verify(Self.with("iat", .number(Self.now + 29))).claims.subject == "alice")
        #expect(throws: JOSEError.issuedInFuture) { try Self.verify(Self.with("iat", .number(Self.now + 31))) }
    }

    @Test func maximumAgeCountsFromIssuedAt() throws {
        let oneHour: (inout JWTVerifier.Configuration) -> Void = { $0.maximumAge = 3600 }
        #expect(try Self.verify(Self.with("iat", .number(Self.now - 3620)), oneHour).claims.subject == "alice")
        #expect(throws: JOSEError.tooOld) { try Self.verify(Self.with("iat", .number(Self.now - 3640)), oneHour) }
        #expect(throws: JOSEError.missingClaim) { try Self.verify(Self.with("iat", nil), oneHour) }
    }

    @Test func requiredClaimsMustBePresent() throws {
        #expect(throws: JOSEError.missingClaim) { try Self.verify(Self.base) { $0.requiredClaims = ["exp", "nonce"] } }
        #expect(try Self.verify(Self.with("nonce", "n-1")) { $0.requiredClaims = ["exp", "nonce"] }.claims["nonce"] == "n-1")
    }

    @Test func headerTypeIsChecked() throws {
        #expect(try Self.verify(Self.base, type: nil).claims.subject == "alice")
        #expect(try Self.verify(Self.base, type: "jwt").claims.subject == "alice")
        #expect(try Self.verify(Self.base, type: "application/JWT").claims.subject == "alice")
        #expect(throws: JOSEError.type) { try Self.verify(Self.base, type: "dpop+jwt") }
        #expect(throws: JOSEError.type) { try Self.verify(Self.base, type: "JWT") { $0.typeRequirement = .oneOf(["at+jwt"]) } }
        #expect(throws: JOSEError.type) { try Self.verify(Self.base, type: nil) { $0.typeRequirement = .oneOf(["at+jwt"]) } }
        #expect(try Self.verify(Self.base, type: "at+jwt") { $0.typeRequirement = .oneOf(["at+jwt"]) }.claims.subject == "alice")
    }

    @Test func tamperedPayloadFailsTheSignatureCheck() throws {
        let token = try Self.signer.sign(claims: Self.base)
        let parts = token.split(separator: ".")
        let forged = parts[0] + "." + Base64URL.encode(Self.with("sub", "mallory").jsonBytes) + "." + parts[2]
        let verifier = JWTVerifier(configuration: .init(allowedAlgorithms: [.es256]), clock: ManualClock(Date(timeIntervalSince1970: Self.now)))
        #expect(throws: JOSEError.signature) { try verifier.verify(String(forged), keys: Self.keys) }
    }

    @Test(arguments: [JWSAlgorithm.rs256, .ps256, .es256, .edDSA, .hs256])
    func signerOutputVerifiesWithTheMatchingPublicKey(algorithm: JWSAlgorithm) throws {
        let material: JWK.Material = switch algorithm {
        case .es256: .privateKey(TestKeys.ec)
        case .edDSA: .privateKey(TestKeys.ed25519)
        case .hs256: .symmetric(SecureRandom.bytes(count: 32))
        default: .privateKey(TestKeys.rsa)
        }
        let key = try JWK(material: material, keyID: "k-\(algorithm.rawValue)", algorithm: algorithm)
        let token = try JWTSigner(key: key).sign(claims: Self.base)
        #expect(token.hasPrefix(Base64URL.encode(Array(#"{"alg":"\#(algorithm.rawValue)","kid":"k-\#(algorithm.rawValue)","typ":"JWT"}"#.utf8))))
        let verifyingKey = key.publicJWK ?? key
        let verifier = JWTVerifier(configuration: .init(allowedAlgorithms: [algorithm]), clock: ManualClock(Date(timeIntervalSince1970: Self.now)))
        #expect(try verifier.verify(token, keys: JWKSet(keys: [verifyingKey])).claims.subject == "alice")
    }

    @Test func signerRefusesAlgorithmsThatDoNotFitTheKey() {
        #expect(throws: JOSEError.algorithm) { try JWTSigner(privateKey: TestKeys.ec, algorithm: .rs256) }
        #expect(throws: JOSEError.algorithm) { try JWTSigner(key: JWK(material: .symmetric(SecureRandom.bytes(count: 16)), algorithm: nil), algorithm: .hs256) }
        #expect(throws: JOSEError.key) { try JWTSigner(key: JWK(material: .publicKey(TestKeys.ec.publicKey)), algorithm: .es256) }
    }
}
