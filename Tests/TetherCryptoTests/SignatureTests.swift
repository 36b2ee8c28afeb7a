import Testing
import TetherCrypto

@Suite("Signing and verification")
struct SignatureTests {
    static let algorithms: [SignatureAlgorithm] = [
        .rsaPKCS1v15(.sha256), .rsaPKCS1v15(.sha384), .rsaPKCS1v15(.sha512),
        .rsaPSS(.sha256), .rsaPSS(.sha384), .rsaPSS(.sha512), .ecdsaP256SHA256, .ed25519,
    ]
    static let keys: [KeyType: PrivateKey] = {
        Dictionary(uniqueKeysWithValues: KeyType.allCases.map { ($0, try! PrivateKey.generate($0)) })
    }()

    @Test(arguments: algorithms)
    func signatureVerifiesAndFailsWhenAnythingChanges(algorithm: SignatureAlgorithm) throws {
        let key = Self.keys[algorithm.keyType]!
        let message = Array("tether".utf8)
        let signature = try key.signature(for: message, algorithm: algorithm)
        #expect(key.publicKey.isValidSignature(signature, for: message, algorithm: algorithm))
        // Reuse of pooled verification contexts must give the same answer.
        #expect(key.publicKey.isValidSignature(signature, for: message, algorithm: algorithm))
        #expect(!key.publicKey.isValidSignature(signature, for: message + [0], algorithm: algorithm))
        var flipped = signature
        flipped[flipped.count / 2] ^= 0x01
        #expect(!key.publicKey.isValidSignature(flipped, for: message, algorithm: algorithm))
        #expect(!key.publicKey.isValidSignature(signature.dropLast(), for: message, algorithm: algorithm))
        #expect(!key.publicKey.isValidSignature([UInt8](), for: message, algorithm: algorithm))
        let otherKey = try PrivateKey.generate(algorithm.keyType)
        #expect(!otherKey.publicKey.isValidSignature(signature, for: message, algorithm: algorithm))
    }

    @Test func emptyMessageCanBeSignedAndVerified() throws {
        for algorithm in Self.algorithms {
            let key = Self.keys[algorithm.keyType]!
            let signature = try key.signature(for: [UInt8](), algorithm: algorithm)
            #expect(key.publicKey.isValidSignature(signature, for: [UInt8](), algorithm: algorithm))
        }
    }

    @Test func ecdsaSignatureIsRawRAndSAndVerifiesOnlyInTheRightForm() throws {
        let key = Self.keys[.ecP256]!
        let message = Array("raw".utf8)
        let signature = try key.signature(for: message, algorithm: .ecdsaP256SHA256)
        #expect(signature.count == 64)
        // The raw form is not DER; a DER verifier must refuse it.
        #expect(!key.publicKey.isValidECDSASignature(der: signature, for: message))
    }

    @Test func pkcs1SignatureDoesNotVerifyAsPSSOrWithAnotherHash() throws {
        let key = Self.keys[.rsa]!
        let message = Array("m".utf8)
        let signature = try key.signature(for: message, algorithm: .rsaPKCS1v15(.sha256))
        #expect(!key.publicKey.isValidSignature(signature, for: message, algorithm: .rsaPSS(.sha256)))
        #expect(!key.publicKey.isValidSignature(signature, for: message, algorithm: .rsaPKCS1v15(.sha512)))
    }

    @Test func keyOfTheWrongTypeNeverVerifiesOrSigns() throws {
        let message = Array("m".utf8)
        let ecSignature = try Self.keys[.ecP256]!.signature(for: message, algorithm: .ecdsaP256SHA256)
        #expect(!Self.keys[.rsa]!.publicKey.isValidSignature(ecSignature, for: message, algorithm: .ecdsaP256SHA256))
        #expect(!Self.keys[.ed25519]!.publicKey.isValidSignature(ecSignature, for: message, algorithm: .ed25519))
        #expect(throws: CryptoError.invalidKey) { try Self.keys[.rsa]!.signature(for: message, algorithm: .ed25519) }
        #expect(throws: CryptoError.invalidKey) { try Self.keys[.rsa]!.signature(for: message, algorithm: .rsaPKCS1v15(.sha1)) }
    }

    @Test func ed25519SignatureMatchesRFC8037Example() throws {
        // RFC 8037 Appendix A.1 key and A.4 JWS signing input; Ed25519 is deterministic.
        let d = [UInt8](hex: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
        let x = [UInt8](hex: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        let key = try PrivateKey(components: .ed25519(x: x, d: d))
        let signature = try key.signature(for: Array("eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc".utf8),
                                          algorithm: .ed25519)
        #expect(signature.hex == "860c98d2297f3060a33f42739672d61b53cf3adefed3d3c672f320dc021b411e9d59b8628dc351e248b88b29468e0e41855b0fb7d83bb15be902bfccb8cd0a02")
    }

    @Test(arguments: algorithms)
    func signingAgainOnAKeptContextStaysCorrectAndFresh(algorithm: SignatureAlgorithm) throws {
        let key = Self.keys[algorithm.keyType]!
        let message = Array("again".utf8)
        let signatures = try (0..<4).map { _ in try key.signature(for: message, algorithm: algorithm) }
        for signature in signatures {
            #expect(key.publicKey.isValidSignature(signature, for: message, algorithm: algorithm))
        }
        switch algorithm {
        case .ecdsaP256SHA256:
            // A kept context must still draw a new nonce for each signature: one reused k gives the private key away.
            #expect(Set(signatures.map { $0.prefix(32) }).count == signatures.count)
        case .rsaPSS:
            #expect(Set(signatures).count == signatures.count, "a new salt each time")
        case .rsaPKCS1v15, .ed25519:
            #expect(Set(signatures).count == 1, "deterministic schemes sign alike")
        }
        // Another message on the same kept context signs that message, not the first.
        let other = try key.signature(for: Array("other".utf8), algorithm: algorithm)
        #expect(key.publicKey.isValidSignature(other, for: Array("other".utf8), algorithm: algorithm))
        #expect(!key.publicKey.isValidSignature(other, for: message, algorithm: algorithm))
    }

    @Test func concurrentSignaturesOnOneKeyAllVerifyWithDistinctNonces() async throws {
        let key = Self.keys[.ecP256]!
        let signatures = await withTaskGroup(of: (Int, [UInt8]?).self) { group in
            for index in 0..<64 {
                group.addTask { (index, try? key.signature(for: Array("message \(index % 8)".utf8), algorithm: .ecdsaP256SHA256)) }
            }
            return await group.reduce(into: [(Int, [UInt8]?)]()) { $0.append($1) }
        }
        #expect(signatures.count == 64)
        for (index, signature) in signatures {
            let signature = try #require(signature)
            #expect(key.publicKey.isValidSignature(signature, for: Array("message \(index % 8)".utf8), algorithm: .ecdsaP256SHA256))
        }
        #expect(Set(signatures.compactMap { $0.1?.prefix(32) }).count == 64)
    }

    @Test func concurrentVerificationsOnOneKeyAllSucceed() async throws {
        let key = Self.keys[.rsa]!
        let message = Array("shared".utf8)
        let signature = try key.signature(for: message, algorithm: .rsaPKCS1v15(.sha256))
        let publicKey = key.publicKey
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask {
                    // Every fourth task presents a bad signature, so failed contexts are discarded mid-stream.
                    var candidate = signature
                    if index % 4 == 0 { candidate[0] ^= 1 }
                    return publicKey.isValidSignature(candidate, for: message, algorithm: .rsaPKCS1v15(.sha256)) == (index % 4 != 0)
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.count == 64 && results.allSatisfy { $0 })
    }
}

@Suite("ECDSA DER signatures")
struct ECDSADERTests {
    /// An independent raw → DER encoder, so the production converter is not tested against itself.
    static func der(r: ArraySlice<UInt8>, s: ArraySlice<UInt8>, padR: Bool = false) -> [UInt8] {
        func integer(_ bytes: ArraySlice<UInt8>, extraZero: Bool) -> [UInt8] {
            var digits = Array(bytes.drop { $0 == 0 })
            if digits.isEmpty || digits[0] & 0x80 != 0 { digits.insert(0, at: 0) }
            if extraZero { digits.insert(0, at: 0) }
            return [0x02, UInt8(digits.count)] + digits
        }
        let body = integer(r, extraZero: padR) + integer(s, extraZero: false)
        return [0x30, UInt8(body.count)] + body
    }

    @Test func derSignatureVerifiesAndNonCanonicalDERIsRejected() throws {
        let key = SignatureTests.keys[.ecP256]!
        let message = Array("der".utf8)
        let raw = try key.signature(for: message, algorithm: .ecdsaP256SHA256)
        let der = Self.der(r: raw[0..<32], s: raw[32...])
        #expect(key.publicKey.isValidECDSASignature(der: der, for: message))
        #expect(!key.publicKey.isValidECDSASignature(der: der, for: message + [1]))
        #expect(!key.publicKey.isValidECDSASignature(der: der + [0], for: message))
        #expect(!key.publicKey.isValidECDSASignature(der: Self.der(r: raw[0..<32], s: raw[32...], padR: true), for: message))
        #expect(!SignatureTests.keys[.rsa]!.publicKey.isValidECDSASignature(der: der, for: message))
    }
}
