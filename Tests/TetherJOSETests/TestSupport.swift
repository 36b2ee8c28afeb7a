import Foundation
import TetherCrypto
import TetherJOSE
import TetherTesting

/// Keys generated once per test process; RSA generation is the slow part.
enum TestKeys {
    static let rsa = try! PrivateKey.generate(.rsa)
    static let ec = try! PrivateKey.generate(.ecP256)
    static let ed25519 = try! PrivateKey.generate(.ed25519)
}

/// The shared Wycheproof/RFC data beside the repository: `<repo>/../shared/testdata`.
func sharedTestData(_ path: String, file: String = #filePath) throws -> Data {
    let root = URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return try Data(contentsOf: root.appendingPathComponent("../shared/testdata/\(path)").standardizedFileURL)
}

/// A token whose header is exactly `header`, signed by `sign` over the signing input (for forged headers).
func forgeToken(header: String, claims: JOSEObject, sign: ([UInt8]) throws -> [UInt8]) rethrows -> String {
    let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(claims.jsonBytes)
    return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
}
