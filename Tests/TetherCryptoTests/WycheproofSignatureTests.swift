import Foundation
import Testing
import TetherCrypto

/// Tallies of one Wycheproof file: every `valid` case must verify, every `invalid` one must not.
struct WycheproofTally: CustomStringConvertible {
    var validAccepted = 0
    var invalidRejected = 0
    var acceptableAccepted = 0
    var acceptableRejected = 0
    var failures: [String] = []

    mutating func record(id: Int, result: String, isAccepted: Bool, comment: String) {
        switch (result, isAccepted) {
        case ("valid", true): validAccepted += 1
        case ("invalid", false): invalidRejected += 1
        case ("acceptable", true): acceptableAccepted += 1
        case ("acceptable", false): acceptableRejected += 1
        default: failures.append("tcId \(id) (\(result), \(comment)) was \(isAccepted ? "accepted" : "rejected")")
        }
    }

    var description: String {
        "\(validAccepted) valid accepted, \(invalidRejected) invalid rejected, "
            + "\(acceptableAccepted + acceptableRejected) acceptable (\(acceptableAccepted) accepted)"
    }
}

@Suite("Wycheproof signature vectors")
struct WycheproofSignatureTests {
    struct File<Group: Decodable>: Decodable {
        var testGroups: [Group]
    }

    struct Case: Decodable {
        var tcId: Int
        var comment: String
        var msg: String
        var sig: String
        var result: String
    }

    struct RSAGroup: Decodable {
        var publicKeyPem: String
        var publicKeyDer: String
        var sha: String
        var tests: [Case]
    }

    struct ECDSAGroup: Decodable {
        struct Key: Decodable { var wx: String; var wy: String }
        var publicKey: Key
        var publicKeyPem: String
        var tests: [Case]
    }

    @Test func rsaPKCS1SHA256VectorsAreAcceptedExactlyWhenValid() throws {
        let name = "rsa_signature_2048_sha256_test.json"
        let file = try JSONDecoder().decode(File<RSAGroup>.self, from: SharedTestData.data("wycheproof/\(name)"))
        var tally = WycheproofTally()
        for group in file.testGroups {
            #expect(group.sha == "SHA-256")
            let key = try PublicKey(pem: group.publicKeyPem)
            // The DER route must yield the same key as the PEM route.
            #expect(try PublicKey(spkiDER: [UInt8](hex: group.publicKeyDer)).components == key.components)
            for test in group.tests {
                let isAccepted = key.isValidSignature([UInt8](hex: test.sig), for: [UInt8](hex: test.msg),
                                                      algorithm: .rsaPKCS1v15(.sha256))
                tally.record(id: test.tcId, result: test.result, isAccepted: isAccepted, comment: test.comment)
            }
        }
        print("wycheproof \(name): \(tally)")
        #expect(tally.failures == [])
        #expect(tally.validAccepted > 0 && tally.invalidRejected > 0)
    }

    @Test func ecdsaP256P1363VectorsAreAcceptedExactlyWhenValid() throws {
        let name = "ecdsa_secp256r1_sha256_p1363_test.json"
        let file = try JSONDecoder().decode(File<ECDSAGroup>.self, from: SharedTestData.data("wycheproof/\(name)"))
        var tally = WycheproofTally()
        for group in file.testGroups {
            // Wycheproof writes coordinates as signed big-endian hex; JWK wants exactly 32 bytes.
            let coordinate = { (hex: String) -> [UInt8] in
                let bytes = [UInt8](hex: hex).drop { $0 == 0 }
                return [UInt8](repeating: 0, count: 32 - bytes.count) + bytes
            }
            let key = try PublicKey(components: .ecP256(x: coordinate(group.publicKey.wx), y: coordinate(group.publicKey.wy)))
            #expect(try PublicKey(pem: group.publicKeyPem).components == key.components)
            for test in group.tests {
                let isAccepted = key.isValidSignature([UInt8](hex: test.sig), for: [UInt8](hex: test.msg),
                                                      algorithm: .ecdsaP256SHA256)
                tally.record(id: test.tcId, result: test.result, isAccepted: isAccepted, comment: test.comment)
            }
        }
        print("wycheproof \(name): \(tally)")
        #expect(tally.failures == [])
        #expect(tally.validAccepted > 0 && tally.invalidRejected > 0)
    }
}
