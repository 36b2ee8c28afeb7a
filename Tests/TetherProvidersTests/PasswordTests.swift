import Foundation
import Synchronization
import Testing
import TetherAPI
import TetherCrypto
import TetherProviders

/// Parameters cheap enough for unit tests; production uses ``ScryptPasswordHasher/Parameters/recommended``.
let testParameters = ScryptPasswordHasher.Parameters(logN: 10, blockSize: 8, parallelism: 1)

/// The real scrypt hasher, counting its key derivations.
final class CountingHasher: PasswordHashing {
    let base = ScryptPasswordHasher(parameters: testParameters)
    private let counts = Mutex<(hashes: Int, verifications: Int)>((0, 0))

    var derivations: Int { counts.withLock { $0.hashes + $0.verifications } }
    var verifications: Int { counts.withLock { $0.verifications } }

    func hash(_ password: [UInt8]) throws -> String {
        counts.withLock { $0.hashes += 1 }
        return try base.hash(password)
    }

    func verify(_ password: [UInt8], against storedHash: String) throws -> Bool {
        counts.withLock { $0.verifications += 1 }
        return try base.verify(password, against: storedHash)
    }

    func needsRehash(_ storedHash: String) -> Bool { base.needsRehash(storedHash) }
}

/// The accounts layer's directory, reduced to a dictionary (the real one is issue #5's).
struct FixedDirectory: PasswordAccountDirectory {
    let accounts: [String: PasswordAccount]

    func passwordAccount(forEmail email: String) async throws -> PasswordAccount? { accounts[email.lowercased()] }
}

@Suite("scrypt (RFC 7914 §12 vectors)")
struct ScryptTests {
    @Test func emptyPasswordAndSaltVector() throws {
        let key = try Scrypt.deriveKey(password: [UInt8](), salt: [UInt8](), n: 16, r: 1, p: 1, length: 64)
        #expect(key.hex == "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442"
            + "fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906")
    }

    @Test func passwordNaClVector() throws {
        let key = try Scrypt.deriveKey(password: Array("password".utf8), salt: Array("NaCl".utf8), n: 1024, r: 8, p: 16, length: 64)
        #expect(key.hex == "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162"
            + "2eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640")
    }

    @Test(arguments: [(UInt64(3), UInt32(1)), (16, 0), (1 << 24, 64)])
    func parametersOutsideTheRangesAreRefused(n: UInt64, r: UInt32) {
        #expect(throws: CryptoError.invalidInput) {
            try Scrypt.deriveKey(password: [UInt8](), salt: [UInt8](), n: n, r: r, p: 1, length: 32)
        }
    }
}

@Suite("Password hashes")
struct PasswordHashTests {
    let hasher = ScryptPasswordHasher(parameters: testParameters)

    @Test func hashNamesItsParametersAndVerifiesOnlyItsPassword() throws {
        let stored = try hasher.hash(Array("correct horse".utf8))
        #expect(stored.hasPrefix("$scrypt$ln=10,r=8,p=1$"))
        #expect(stored.split(separator: "$").count == 4)
        #expect(try hasher.verify(Array("correct horse".utf8), against: stored))
        #expect(try !hasher.verify(Array("correct horse!".utf8), against: stored))
        #expect(try hasher.hash(Array("correct horse".utf8)) != stored, "every hash has its own salt")
    }

    @Test func hashesOfWeakerParametersAskToBeRehashed() throws {
        let stored = try hasher.hash(Array("pw".utf8))
        #expect(!hasher.needsRehash(stored))
        let stronger = ScryptPasswordHasher(parameters: .init(logN: 11, blockSize: 8, parallelism: 1))
        #expect(stronger.needsRehash(stored))
        #expect(try stronger.verify(Array("pw".utf8), against: stored), "old hashes keep verifying after the defaults rise")
    }

    @Test func recommendedParametersAreMemoryHard() {
        #expect(ScryptPasswordHasher.Parameters.recommended.memoryBytes >= 64 * 1024 * 1024)
        #expect(ScryptPasswordHasher().parameters == .recommended)
    }

    @Test(arguments: [
        "", "$scrypt$ln=10,r=8$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA", "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA",
        "$scrypt$ln=30,r=8,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA", "$scrypt$ln=10,r=8,p=1$!!!$aGFzaGhhc2hoYXNoaGFzaA",
        "$scrypt$ln=10,r=8,p=1,ln=11$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
    ])
    func malformedOrOutOfBoundsStoredHashesAreRefused(stored: String) {
        #expect(throws: CryptoError.invalidEncoding) { try hasher.verify(Array("pw".utf8), against: stored) }
        #expect(hasher.needsRehash(stored))
    }
}

@Suite("Password policy")
struct PasswordPolicyTests {
    @Test(arguments: [("1234567", false), ("12345678", true), (String(repeating: "x", count: 128), true),
                      (String(repeating: "x", count: 129), false)])
    func newPasswordsHaveEightToOneHundredTwentyEightCharacters(password: String, isAccepted: Bool) {
        let result = Result { () throws(ProviderError) in try PasswordPolicy().validate(password) }
        #expect(((try? result.get()) != nil) == isAccepted)
        if case .failure(let error) = result {
            #expect(error.code == "invalid_request")
            #expect(error.problem.extensions["pointer"] == "/password")
        }
    }

    @Test func composedAndDecomposedAccentsHashTheSame() throws {
        let verifier = try PasswordVerifier(hasher: ScryptPasswordHasher(parameters: testParameters))
        let stored = try verifier.hash("caf\u{E9}-caf\u{E9}")
        try verifier.verify("cafe\u{301}-cafe\u{301}", storedHash: stored)
        #expect(PasswordPolicy.normalized("\u{FF11}\u{FF12}") == "12", "full-width digits fold to ASCII")
    }

    @Test func hashingChecksThePolicyFirst() throws {
        let counting = CountingHasher()
        let verifier = try PasswordVerifier(hasher: counting)
        let before = counting.derivations
        #expect(throws: ProviderError.invalidRequest("")) { try verifier.hash("short") }
        #expect(counting.derivations == before)
    }
}

@Suite("Password sign-in")
struct PasswordSignInTests {
    private func signIn(_ hasher: CountingHasher) throws -> PasswordIdentityVerifier {
        let verifier = try PasswordVerifier(hasher: hasher)
        let account = PasswordAccount(email: "ada@example.com", passwordHash: try verifier.hash("analytical engine"), isEmailVerified: true)
        return PasswordIdentityVerifier(passwords: verifier, directory: FixedDirectory(accounts: ["ada@example.com": account]))
    }

    @Test func rightPasswordGivesThePasswordIdentity() async throws {
        let identity = try await signIn(CountingHasher()).verify(.password(email: "ada@example.com", password: "analytical engine"))
        #expect(identity.provider == "password" && identity.credentialForm == .password)
        #expect(identity.uid == "ada@example.com" && identity.email == "ada@example.com" && identity.isEmailVerified)
    }

    @Test func wrongPasswordAndUnknownEmailFailAlikeAfterOneKeyDerivationEach() async throws {
        let hasher = CountingHasher()
        let signIn = try signIn(hasher)
        var errors: [ProviderError] = []
        for credential in [ProviderCredential.password(email: "ada@example.com", password: "difference engine"),
                           .password(email: "nobody@example.com", password: "difference engine")] {
            let before = hasher.verifications
            let error = await #expect(throws: ProviderError.invalidCredential(.password)) { try await signIn.verify(credential) }
            #expect(hasher.verifications == before + 1, "\(credential) ran exactly one key derivation")
            errors += error.map { [$0] } ?? []
        }
        #expect(errors.count == 2)
        #expect(errors[0].problem == errors[1].problem, "clients cannot tell an unknown email from a wrong password")
        #expect(errors[0].detail == errors[1].detail, "nor can logs scraped from the detail")
    }

    @Test func identityProvidersDispatchPasswordCredentialsOnlyWhenGivenADirectory() async throws {
        let providers = try IdentityProviders(
            configuration: ProvidersConfiguration(), nonceStore: UnreachableNonceStore(), passwords: signIn(CountingHasher()))
        #expect(providers.enabledProviders == [.password, .anonymous])
        let identity = try await providers.verify(.password(email: "ada@example.com", password: "analytical engine"))
        #expect(identity.uid == "ada@example.com")
    }

    @Test func dummyHashIsMadeUpFrontAndCheckedWithOneDerivation() throws {
        let hasher = CountingHasher()
        let verifier = try PasswordVerifier(hasher: hasher)
        #expect(hasher.derivations == 1, "the dummy hash is made up front, not on the first unknown email")
        #expect(throws: ProviderError.invalidCredential(.password)) { try verifier.verifyAgainstDummy("anything") }
        #expect(hasher.derivations == 2)
    }
}

extension Array where Element == UInt8 {
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
