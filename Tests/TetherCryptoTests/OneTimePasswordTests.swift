import Foundation
import Testing
import TetherCrypto

@Suite("Base32, HOTP, TOTP and otpauth URIs")
struct OneTimePasswordTests {
    static let sha1Seed = Array("12345678901234567890".utf8)
    static let sha256Seed = Array("12345678901234567890123456789012".utf8)
    static let sha512Seed = Array("1234567890123456789012345678901234567890123456789012345678901234".utf8)

    @Test("Base32 matches RFC 4648 §10", arguments: [
        ("", ""), ("f", "MY======"), ("fo", "MZXQ===="), ("foo", "MZXW6==="),
        ("foob", "MZXW6YQ="), ("fooba", "MZXW6YTB"), ("foobar", "MZXW6YTBOI======"),
    ])
    func base32MatchesRFC4648(plain: String, encoded: String) throws {
        #expect(Base32.encode(Array(plain.utf8), padding: true) == encoded)
        #expect(try Base32.decode(encoded) == Array(plain.utf8))
        let unpadded = String(encoded.prefix { $0 != "=" })
        #expect(Base32.encode(Array(plain.utf8)) == unpadded)
        #expect(try Base32.decode(unpadded) == Array(plain.utf8))
    }

    @Test("Base32 rejects non-canonical input", arguments: [
        "my======", "MZ======", "MY=====", "MY=", "M", "MZXW6YQ==", "MZXW 6YTB", "MZXW6YT1", "MZXW6YTB=", "MY==\n====",
    ])
    func base32RejectsNonCanonicalInput(text: String) {
        #expect(throws: CryptoError.invalidEncoding) { try Base32.decode(text) }
    }

    @Test func hotpMatchesRFC4226AppendixD() {
        let expected = ["755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"]
        let codes = (0..<10).map { HOTP.code(secret: Self.sha1Seed, counter: UInt64($0)) }
        #expect(codes == expected)
    }

    @Test("TOTP matches RFC 6238 Appendix B", arguments: [
        (59.0, "94287082", "46119246", "90693936"),
        (1111111109, "07081804", "68084774", "25091201"),
        (1111111111, "14050471", "67062674", "99943326"),
        (1234567890, "89005924", "91819424", "93441116"),
        (2000000000, "69279037", "90698825", "38618901"),
        (20000000000, "65353130", "77737706", "47863826"),
    ])
    func totpMatchesRFC6238(time: Double, sha1: String, sha256: String, sha512: String) throws {
        let date = Date(timeIntervalSince1970: time)
        #expect(try TOTP(secret: Self.sha1Seed, algorithm: .sha1, digits: 8).code(at: date) == sha1)
        #expect(try TOTP(secret: Self.sha256Seed, algorithm: .sha256, digits: 8).code(at: date) == sha256)
        #expect(try TOTP(secret: Self.sha512Seed, algorithm: .sha512, digits: 8).code(at: date) == sha512)
    }

    @Test func totpAcceptsOneStepEitherSideAndReportsTheStep() throws {
        let totp = try TOTP(secret: TOTP.generateSecret())
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let step = totp.step(at: now)
        #expect(totp.matchingStep(for: totp.code(forStep: step), at: now) == step)
        #expect(totp.matchingStep(for: totp.code(forStep: step - 1), at: now) == step - 1)
        #expect(totp.matchingStep(for: totp.code(forStep: step + 1), at: now) == step + 1)
        #expect(totp.matchingStep(for: totp.code(forStep: step - 2), at: now) == nil)
        #expect(totp.matchingStep(for: totp.code(forStep: step + 2), at: now) == nil)
        #expect(totp.matchingStep(for: totp.code(forStep: step - 1), at: now, window: 0) == nil)
    }

    @Test func totpCodeCannotBeReusedOnceItsStepIsRecorded() throws {
        let totp = try TOTP(secret: TOTP.generateSecret(), algorithm: .sha256, digits: 7)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let code = totp.code(at: now)
        let used = try #require(totp.matchingStep(for: code, at: now))
        #expect(totp.matchingStep(for: code, at: now.addingTimeInterval(10), after: used) == nil)
        #expect(totp.matchingStep(for: totp.code(forStep: used + 1), at: now, after: used) == used + 1)
    }

    /// Six digits are shared by neighbouring steps about once in a million: with the RFC 6238
    /// seed, steps 57,766,335 and 57,766,336 (30 s each, November 2024) both give 251166.
    /// Such a code counts as the later step's, so the same digits are not accepted again in
    /// that step; a client that tracks the steps it used must allow for it (`scripts/soak.py`).
    @Test func aCodeTwoNeighbouringStepsShareCountsAsTheLaterStep() throws {
        let totp = try TOTP(secret: Self.sha1Seed)
        let first: UInt64 = 57_766_335
        #expect(totp.code(forStep: first) == "251166" && totp.code(forStep: first + 1) == "251166")
        let inFirst = Date(timeIntervalSince1970: TimeInterval(first * 30 + 10))
        #expect(totp.matchingStep(for: "251166", at: inFirst) == first + 1)
        #expect(totp.matchingStep(for: "251166", at: inFirst.addingTimeInterval(30), after: first + 1) == nil)
        #expect(totp.matchingStep(for: totp.code(forStep: first + 2), at: inFirst.addingTimeInterval(60), after: first + 1) == first + 2)
    }

    @Test func totpRejectsMalformedCodes() throws {
        let totp = try TOTP(secret: TOTP.generateSecret())
        let now = Date()
        let code = totp.code(at: now)
        #expect(totp.matchingStep(for: " " + code, at: now) == nil)
        #expect(totp.matchingStep(for: String(code.dropLast()), at: now) == nil)
        #expect(totp.matchingStep(for: code + "0", at: now) == nil)
        #expect(totp.matchingStep(for: "abcdef", at: now) == nil)
    }

    @Test func totpParametersAreValidated() {
        #expect(throws: CryptoError.invalidInput) { try TOTP(secret: [UInt8](repeating: 1, count: 10)) }
        #expect(throws: CryptoError.invalidInput) { try TOTP(secret: Self.sha1Seed, digits: 5) }
        #expect(throws: CryptoError.invalidInput) { try TOTP(secret: Self.sha1Seed, digits: 9) }
        #expect(throws: CryptoError.invalidInput) { try TOTP(secret: Self.sha1Seed, period: 0) }
        #expect(throws: CryptoError.invalidInput) { try TOTP(secret: Self.sha1Seed, algorithm: .sha384) }
    }

    @Test func totpDescriptionDoesNotRevealTheSecret() throws {
        let totp = try TOTP(secret: Self.sha1Seed)
        #expect(!String(describing: totp).contains(Base32.encode(Self.sha1Seed)))
        #expect(String(describing: totp).contains("redacted"))
    }

    @Test func otpauthURIPercentEncodesTheLabelAndRoundTrips() throws {
        let totp = try TOTP(secret: Self.sha256Seed, algorithm: .sha256, digits: 8, period: 60)
        let uri = try OTPAuthURI(totp: totp, issuer: "Tether & Co", accountName: "alice+test@example.com")
        #expect(uri.stringValue == "otpauth://totp/Tether%20%26%20Co:alice%2Btest%40example.com?secret="
            + Base32.encode(Self.sha256Seed) + "&issuer=Tether%20%26%20Co&algorithm=SHA256&digits=8&period=60")
        #expect(try OTPAuthURI(parsing: uri.stringValue) == uri)
    }

    @Test func otpauthURIDefaultsFollowTheKeyUriFormat() throws {
        let parsed = try OTPAuthURI(parsing: "otpauth://totp/Example:alice@google.com?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Example")
        #expect(parsed.issuer == "Example")
        #expect(parsed.accountName == "alice@google.com")
        #expect(parsed.totp.algorithm == .sha1 && parsed.totp.digits == 6 && parsed.totp.period == 30)
    }

    @Test("otpauth URIs with contradictions or bad encodings are rejected", arguments: [
        "otpauth://hotp/Example:alice?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&counter=1",
        "otpauth://totp/Example:alice?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Other",
        "otpauth://totp/Example:alice?secret=jbswy3dpehpk3pxpjbswy3dpehpk3pxp",
        "otpauth://totp/Example:alice?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP",
        "otpauth://totp/Example%2:alice?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP",
        "otpauth://totp/Example:alice?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&algorithm=MD5",
        "otpauth://totp/Example:alice?issuer=Example",
    ])
    func otpauthURIWithProblemsIsRejected(text: String) {
        #expect(throws: CryptoError.invalidEncoding) { try OTPAuthURI(parsing: text) }
    }

    @Test func otpauthURIRefusesColonsInIssuerOrAccount() throws {
        let totp = try TOTP(secret: Self.sha1Seed)
        #expect(throws: CryptoError.invalidInput) { try OTPAuthURI(totp: totp, issuer: "A:B", accountName: "alice") }
        #expect(throws: CryptoError.invalidInput) { try OTPAuthURI(totp: totp, issuer: nil, accountName: "a:b") }
    }
}
