import Testing
import TetherAPI
import TetherCrypto
import TetherJOSE

@Suite("Refresh tokens: format and storage hash")
struct RefreshTokensTests {
    @Test func generatedTokenIsPrefixedBase64URLOf256RandomBits() throws {
        let token = RefreshTokens.generate()
        #expect(token.hasPrefix("rt_"))
        #expect(token.utf8.count == 46)
        #expect(try Base64URL.decode(token.dropFirst(3)).count == 32)
        #expect(RefreshTokens.isWellFormed(token))
    }

    @Test func generatedTokensDoNotRepeat() {
        let tokens = Set((0..<1000).map { _ in RefreshTokens.generate() })
        #expect(tokens.count == 1000)
    }

    @Test func storageHashIsTheLowercaseHexSHA256OfTheWholeToken() {
        // SHA-256("abc") from FIPS 180-2 appendix B.1.
        #expect(RefreshTokens.hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let token = RefreshTokens.generate()
        let hash = RefreshTokens.hash(token)
        #expect(hash.utf8.count == 64)
        #expect(hash.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(hash != RefreshTokens.hash(String(token.dropFirst(3))))
    }

    @Test func presentedTokenMatchesOnlyItsOwnHash() {
        let token = RefreshTokens.generate()
        let stored = RefreshTokens.hash(token)
        #expect(RefreshTokens.matches(token, storedHash: stored))
        #expect(!RefreshTokens.matches(RefreshTokens.generate(), storedHash: stored))
        #expect(!RefreshTokens.matches(token, storedHash: String(stored.dropLast())))
        #expect(!RefreshTokens.matches(token, storedHash: ""))
    }

    @Test func lookupHashOfAWellFormedTokenIsItsStorageHash() throws {
        let token = RefreshTokens.generate()
        #expect(try RefreshTokens.lookupHash(of: token) == RefreshTokens.hash(token))
    }

    @Test(arguments: [
        "", "rt_", "rt_" + String(repeating: "A", count: 42), "rt_" + String(repeating: "A", count: 44),
        "RT_" + String(repeating: "A", count: 43), "at_" + String(repeating: "A", count: 43),
        "rt_" + String(repeating: "A", count: 42) + "=", "rt_" + String(repeating: "A", count: 42) + "+",
        "rt_" + String(repeating: "A", count: 42) + "/", "rt_" + String(repeating: "A", count: 41) + " A",
        "rt_" + String(repeating: "A", count: 42) + "B", // non-zero trailing bits: not the canonical spelling
        "rt_" + String(repeating: "é", count: 21) + "A",
    ])
    func malformedTokenIsRefusedBeforeAnyLookup(token: String) {
        #expect(!RefreshTokens.isWellFormed(token))
        #expect(throws: TokenError.invalidToken) { try RefreshTokens.lookupHash(of: token) }
    }

    @Test(arguments: ["A", "E", "I", "Q", "g", "w", "0", "4", "8"])
    func everyCanonicalLastCharacterIsAccepted(last: String) {
        #expect(RefreshTokens.isWellFormed("rt_" + String(repeating: "-", count: 21) + String(repeating: "_", count: 21) + last))
    }
}
