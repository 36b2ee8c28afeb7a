import Foundation
import Testing
import TetherCrypto

@Suite("Digests, HMAC, random and constant-time comparison")
struct DigestAndMACTests {
    @Test("SHA digests of \"abc\" match FIPS 180 examples", arguments: [
        (DigestAlgorithm.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (.sha384, "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"),
        (.sha512, "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
    ])
    func digestOfABCMatchesStandard(algorithm: DigestAlgorithm, expected: String) {
        let digest = algorithm.hash(Array("abc".utf8))
        #expect(digest.hex == expected)
        #expect(digest.count == algorithm.byteCount)
    }

    @Test("HMAC matches RFC 4231 test case 2 and RFC 2202 test case 2", arguments: [
        (DigestAlgorithm.sha1, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
        (.sha256, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        (.sha512, "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"),
    ])
    func hmacMatchesPublishedVector(algorithm: DigestAlgorithm, expected: String) {
        let key = Array("Jefe".utf8)
        let message = Array("what do ya want for nothing?".utf8)
        let code = HMAC.authenticationCode(for: message, key: key, digest: algorithm)
        #expect(code.hex == expected)
        #expect(HMAC.isValidAuthenticationCode(code, for: message, key: key, digest: algorithm))
        #expect(!HMAC.isValidAuthenticationCode(code.dropLast(), for: message, key: key, digest: algorithm))
        #expect(!HMAC.isValidAuthenticationCode(code, for: message + [0], key: key, digest: algorithm))
        // A kept key gives the same code, again and again: each code is made on a copy of the keyed context.
        let kept = HMACKey(key, digest: algorithm)
        #expect(kept.authenticationCode(for: message).hex == expected)
        #expect(kept.authenticationCode(for: message).hex == expected)
        #expect(kept.authenticationCode(for: message + [0]) == HMAC.authenticationCode(for: message + [0], key: key, digest: algorithm))
    }

    /// Codes made on one kept key from many threads at once are each the code of their own message.
    @Test func aKeptHMACKeyServesManyThreadsAtOnce() async {
        let key = HMACKey(Array("a key kept for many codes".utf8), digest: .sha256)
        let mismatches = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var mismatches = 0
                    for index in 0..<500 {
                        let message = Array("message \(task) \(index)".utf8)
                        if key.authenticationCode(for: message)
                            != HMAC.authenticationCode(for: message, key: Array("a key kept for many codes".utf8), digest: .sha256) {
                            mismatches += 1
                        }
                    }
                    return mismatches
                }
            }
            return await group.reduce(0, +)
        }
        #expect(mismatches == 0)
        #expect(key == HMACKey(Array("a key kept for many codes".utf8), digest: .sha256))
        #expect(key != HMACKey(Array("another key".utf8), digest: .sha256))
    }

    @Test func hmacWithEmptyKeyAndMessageIsDefined() {
        // RFC 4231 has no empty vector; this is HMAC-SHA256("", "") as every implementation computes it.
        let code = HMAC.authenticationCode(for: [UInt8](), key: [UInt8](), digest: .sha256)
        #expect(code.hex == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    @Test func randomBytesHaveTheRequestedLengthAndDiffer() {
        let first = SecureRandom.bytes(count: 32)
        let second = SecureRandom.bytes(count: 32)
        #expect(first.count == 32)
        #expect(first != second)
        #expect(SecureRandom.bytes(count: 0).isEmpty)
    }

    @Test func constantTimeComparisonAnswersEqualityIncludingLengthMismatch() {
        let value: [UInt8] = [1, 2, 3, 4]
        #expect(ConstantTime.isEqual(value, [1, 2, 3, 4]))
        #expect(!ConstantTime.isEqual(value, [1, 2, 3, 5]))
        #expect(!ConstantTime.isEqual(value, [1, 2, 3]))
        #expect(!ConstantTime.isEqual(value, [1, 2, 3, 4, 0]))
        #expect(!ConstantTime.isEqual(value, [UInt8]()))
        #expect(!ConstantTime.isEqual([UInt8](), value))
        #expect(ConstantTime.isEqual([UInt8](), [UInt8]()))
    }
}
