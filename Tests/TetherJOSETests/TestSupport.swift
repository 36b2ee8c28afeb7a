import Foundation
import TetherCrypto
import TetherJOSE

/// A clock the test moves by hand.
///
/// `@unchecked Sendable` invariant: `current` is only touched while `lock` is held.
final class ManualClock: WallClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) {
        current = start
    }

    func now() -> Date { lock.withLock { current } }

    func advance(by seconds: TimeInterval) {
        lock.withLock { current = current.addingTimeInterval(seconds) }
    }
}

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
