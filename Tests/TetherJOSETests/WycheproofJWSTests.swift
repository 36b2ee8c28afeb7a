import Foundation
import Testing
import TetherJOSE

@Suite("Wycheproof JSON Web Signature vectors")
struct WycheproofJWSTests {
    /// Cases Wycheproof marks `valid` that Tether rejects on purpose; each must be rejected.
    static let deliberatelyStricter: [Int: String] = [
        346: "key is pinned to PS256 by its alg, token says PS384",
        350: "key is pinned to PS256 by its alg, token says PS384",
        372: "'?' in the header segment is not base64url, and the MAC covers the text as sent",
        373: "'?' in the payload segment is not base64url, and the MAC covers the text as sent",
    ]

    struct Group: Decodable {
        var comment: String?
        var `public`: JOSEValueBox?
        var `private`: JOSEValueBox?
        var tests: [Case]
    }

    struct Case: Decodable {
        var tcId: Int
        var comment: String
        var jws: JOSEValueBox
        var result: String
    }

    /// Keeps the raw JSON of a member so JWKs and JSON-serialized JWS pass through Tether's own parser.
    struct JOSEValueBox: Decodable {
        var value: JOSEValue
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                value = .string(text)
            } else {
                let object = try container.decode([String: AnyDecodable].self)
                value = .object(JOSEObject(object.mapValues(\.value)))
            }
        }
    }

    struct AnyDecodable: Decodable {
        var value: JOSEValue
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                value = .string(text)
            } else if let list = try? container.decode([AnyDecodable].self) {
                value = .array(list.map(\.value))
            } else {
                value = .object(JOSEObject(try container.decode([String: AnyDecodable].self).mapValues(\.value)))
            }
        }
    }

    struct File: Decodable { var testGroups: [Group] }

    @Test func everyValidSignatureVerifiesAndEveryInvalidOneIsRejected() throws {
        let name = "json_web_signature_test.json"
        let file = try JSONDecoder().decode(File.self, from: sharedTestData("wycheproof/\(name)"))
        var validAccepted = 0, invalidRejected = 0, acceptable = 0, unsupportedRejected = 0, stricterRejected = 0
        var contradictory = 0
        var failures: [String] = []
        // Some `invalid` cases are byte-for-byte the same token as a `valid` one (their padding was lost
        // when the file was generated); no verifier can satisfy both, so they are counted, not judged.
        let validTokens = Set(file.testGroups.flatMap(\.tests).filter { $0.result == "valid" }.compactMap(\.jws.value.stringValue))
        for group in file.testGroups {
            let keyObject = (group.public ?? group.private)?.value.objectValue
            // A key Tether cannot use (P-521, unknown alg) leaves an empty set: every token must then fail.
            let keys = JWKSet(keys: keyObject.flatMap { try? JWK(object: $0) }.map { [$0] } ?? [])
            for test in group.tests {
                let isAccepted: Bool
                var headerAlgorithm: String?
                if let token = test.jws.value.stringValue {
                    headerAlgorithm = Self.headerAlgorithm(token)
                    isAccepted = (try? CompactJWS(parsing: token)
                        .verifySignature(using: keys, allowedAlgorithms: Set(JWSAlgorithm.allCases))) != nil
                } else {
                    // JSON serialization is not a String token at all; Tether only takes compact JWS.
                    isAccepted = false
                }
                let isUnsupported = headerAlgorithm.map { JWSAlgorithm(rawValue: $0) == nil && $0.lowercased() != "none" } ?? false
                switch (test.result, isAccepted) {
                case ("invalid", true) where test.jws.value.stringValue.map(validTokens.contains) == true: contradictory += 1
                case ("valid", false) where Self.deliberatelyStricter[test.tcId] != nil: stricterRejected += 1
                case ("valid", false) where isUnsupported: unsupportedRejected += 1
                case ("valid", true) where Self.deliberatelyStricter[test.tcId] == nil: validAccepted += 1
                case ("invalid", false): invalidRejected += 1
                case ("acceptable", _): acceptable += 1
                default: failures.append("tcId \(test.tcId) \(test.comment) (\(test.result)) was \(isAccepted ? "accepted" : "rejected")")
                }
            }
        }
        print("wycheproof \(name): \(validAccepted) valid accepted, \(invalidRejected) invalid rejected, \(acceptable) acceptable, "
            + "\(unsupportedRejected) valid with unsupported alg rejected, \(stricterRejected) valid rejected by stricter rules, "
            + "\(contradictory) invalid identical to a valid case")
        #expect(failures == [])
        #expect(validAccepted > 0 && invalidRejected > 0)
        #expect(stricterRejected == Self.deliberatelyStricter.count)
        #expect(unsupportedRejected == 2)
        #expect(contradictory <= 2)
    }

    private static func headerAlgorithm(_ token: String) -> String? {
        guard let segment = token.split(separator: ".", omittingEmptySubsequences: false).first,
              let header = try? JOSEObject(parsing: Base64URL.decode(segment)) else { return nil }
        return header["alg"]?.stringValue
    }
}

extension JOSEObject {
    /// An object from a dictionary (member order is not meaningful for test keys).
    init(_ dictionary: [String: JOSEValue]) {
        self.init()
        for (name, value) in dictionary.sorted(by: { $0.key < $1.key }) { self[name] = value }
    }
}
