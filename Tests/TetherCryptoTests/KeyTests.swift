import Testing
import TetherCrypto

@Suite("Key generation, import and export")
struct KeyTests {
    static let rsa1024PublicPEM = """
        -----BEGIN PUBLIC KEY-----
        MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQCXw9/Y74Z+/tKnmsBXmji1CM4E
        w7SmWBPEln93ogS76pvK3lAw2Y84ScqyinnBRdtxuXLgvldUgGweV8EHxx0NLche
        ySB0wXXRckjY2fDuNgUhfF8keHuBtMCNdC4d13FscV6des04OxEObfvw3wHUtlWz
        qJ6tjSZbgH7cPoZqnwIDAQAB
        -----END PUBLIC KEY-----
        """
    static let p384PublicPEM = """
        -----BEGIN PUBLIC KEY-----
        MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEKdPWYQcBwe1/oWryhPir1mmTQ6qmSmI9
        To4tig2o1B5RvUbHGCziIFXruGmqozZOaJtb7i/qOWvaAUo45G5ueYqvfN2cR47a
        6WA+AT9iClspsvizID5lXD4CX38egJhQ
        -----END PUBLIC KEY-----
        """

    @Test(arguments: KeyType.allCases)
    func generatedKeyRoundTripsThroughPEMAndComponents(type: KeyType) throws {
        let key = try PrivateKey.generate(type)
        #expect(key.type == type)
        let pem = try key.pemEncoded()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let reread = try PrivateKey(pem: pem)
        #expect(try reread.components() == key.components())
        let rebuilt = try PrivateKey(components: key.components())
        #expect(rebuilt.publicKey.components == key.publicKey.components)

        let publicPEM = try key.publicKey.pemEncoded()
        #expect(publicPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        #expect(try PublicKey(pem: publicPEM).components == key.publicKey.components)
        #expect(try PublicKey(spkiDER: key.publicKey.spkiDER()).components == key.publicKey.components)
        #expect(try PublicKey(components: key.publicKey.components).components == key.publicKey.components)
    }

    @Test func rsaKeysBelow2048BitsAreRefused() throws {
        #expect(throws: CryptoError.weakKey) { try PublicKey(pem: Self.rsa1024PublicPEM) }
        #expect(throws: CryptoError.weakKey) { try PrivateKey.generate(.rsa, rsaBitCount: 1024) }
    }

    @Test func curvesOtherThanP256AreRefused() {
        #expect(throws: CryptoError.unsupportedKey) { try PublicKey(pem: Self.p384PublicPEM) }
    }

    @Test func ecPointOffTheCurveIsRefused() throws {
        guard case .ecP256(let x, var y) = try PrivateKey.generate(.ecP256).publicKey.components else {
            Issue.record("expected a P-256 key")
            return
        }
        y[31] ^= 1
        #expect(throws: CryptoError.invalidKey) { try PublicKey(components: .ecP256(x: x, y: y)) }
        #expect(throws: CryptoError.invalidKey) { try PublicKey(components: .ecP256(x: Array(x.dropFirst()), y: y)) }
    }

    @Test(arguments: KeyType.allCases)
    func privateComponentsFromDifferentKeysAreRefused(type: KeyType) throws {
        let first = try PrivateKey.generate(type).components()
        let second = try PrivateKey.generate(type).components()
        let mixed: PrivateKeyComponents = switch (first, second) {
        case (.rsa(var a), .rsa(let b)):
            { a.privateExponent = b.privateExponent; return .rsa(a) }()
        case (.ecP256(let x, let y, _), .ecP256(_, _, let d)): .ecP256(x: x, y: y, d: d)
        case (.ed25519(let x, _), .ed25519(_, let d)): .ed25519(x: x, d: d)
        default: first
        }
        #expect(throws: CryptoError.invalidKey) { try PrivateKey(components: mixed) }
    }

    @Test func garbageAndPrivatePEMAreNotAcceptedAsPublicKeys() throws {
        #expect(throws: CryptoError.invalidEncoding) { try PublicKey(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n") }
        let privatePEM = try PrivateKey.generate(.ecP256).pemEncoded()
        #expect(throws: CryptoError.invalidEncoding) { try PublicKey(pem: privatePEM) }
        let der = try PrivateKey.generate(.ed25519).publicKey.spkiDER()
        #expect(throws: CryptoError.invalidEncoding) { try PublicKey(spkiDER: der + [0]) }
    }
}
