// tether-bench: throughput measured against a baseline taken in the same run,
// because these machines are too noisy for absolute numbers (DESIGN.md §8).
import Foundation
import TetherCrypto
import TetherJOSE

/// One measured rate.
struct Rate {
    var operations: Int
    var seconds: Double
    var perSecond: Double { Double(operations) / seconds }
}

/// Runs `operation` on this thread for about `duration` seconds after a short warm-up.
func measure(for duration: Double, _ operation: () throws -> Void) rethrows -> Rate {
    for _ in 0..<200 { try operation() }
    let clock = ContinuousClock()
    let start = clock.now
    var operations = 0
    var elapsed = 0.0
    repeat {
        for _ in 0..<100 { try operation() }
        operations += 100
        let duration = start.duration(to: clock.now)
        elapsed = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    } while elapsed < duration
    return Rate(operations: operations, seconds: elapsed)
}

/// Signatures and verifications per second of `openssl speed` for RSA-2048 and ECDSA P-256, single process.
struct OpenSSLSpeed {
    var rsa2048: (sign: Double, verify: Double)
    var ecdsaP256: (sign: Double, verify: Double)
}

func opensslSpeed(seconds: Int) throws -> OpenSSLSpeed {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl", "speed", "-seconds", String(seconds), "rsa2048", "ecdsap256"]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    // Summary rows end with "... sign/s verify/s", e.g. "rsa 2048 bits 0.000254s 0.000016s 3930.0 61133.5".
    func lastTwoNumbers(ofLineContaining marker: String) -> (sign: Double, verify: Double)? {
        guard let words = text.split(separator: "\n").last(where: { $0.contains(marker) && $0.contains("s ") })?.split(separator: " "),
              words.count >= 2, let sign = Double(words[words.count - 2]), let verify = Double(words[words.count - 1]) else { return nil }
        return (sign, verify)
    }
    guard process.terminationStatus == 0, let rsa = lastTwoNumbers(ofLineContaining: "rsa 2048 bits"),
          let ecdsa = lastTwoNumbers(ofLineContaining: "ecdsa (nistp256)") else {
        throw BenchError("could not read sign/s and verify/s from `openssl speed` output:\n\(text)")
    }
    return OpenSSLSpeed(rsa2048: rsa, ecdsaP256: ecdsa)
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A realistic ID token and the verifier an identity-provider integration would use for it.
func tokenAndVerifier(algorithm: JWSAlgorithm, key: PrivateKey) throws -> (String, JWKSet, JWTVerifier) {
    let now = Date().timeIntervalSince1970.rounded()
    let claims: JOSEObject = [
        "iss": "https://accounts.example.com", "aud": "tether-client-id", "sub": "110169484474386276334",
        "email": "alice@example.com", "email_verified": true, "nonce": "n-0S6_WzA2Mj",
        "iat": .number(now), "nbf": .number(now - 5), "exp": .number(now + 3600),
    ]
    let token = try JWTSigner(privateKey: key, algorithm: algorithm, keyID: "bench-key").sign(claims: claims)
    let keys = JWKSet(keys: [try JWK(material: .publicKey(key.publicKey), keyID: "bench-key", algorithm: algorithm)])
    let verifier = JWTVerifier(configuration: .init(allowedAlgorithms: [algorithm], issuer: "https://accounts.example.com",
                                                    audiences: ["tether-client-id"], maximumAge: 86_400))
    return (token, keys, verifier)
}

func runCryptoBenchmark(seconds: Int) throws {
    print("TetherJOSE JWT verification and signing vs `openssl speed`, single thread, \(seconds) s each")
    var verified: [JWSAlgorithm: Rate] = [:]
    var signed: [JWSAlgorithm: Rate] = [:]
    for (algorithm, key) in [(JWSAlgorithm.rs256, try PrivateKey.generate(.rsa)), (.es256, try PrivateKey.generate(.ecP256))] {
        let (token, keys, verifier) = try tokenAndVerifier(algorithm: algorithm, key: key)
        let rate = try measure(for: Double(seconds)) { _ = try verifier.verify(token, keys: keys) }
        verified[algorithm] = rate
        print(String(format: "  %@ JWT verify (TetherJOSE): %10.1f /s  (%d in %.2f s)", algorithm.rawValue,
                     rate.perSecond, rate.operations, rate.seconds))
        // The signature alone shows how much of the gap is JOSE parsing and claim checks.
        let parts = token.split(separator: ".")
        let input = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let signature = try Base64URL.decode(parts[2])
        let publicKey = key.publicKey
        let signatureOnly = measure(for: 1) {
            _ = publicKey.isValidSignature(signature, for: input, algorithm: algorithm.signatureAlgorithm!)
        }
        print(String(format: "  %@ signature only (TetherCrypto): %10.1f /s", algorithm.rawValue, signatureOnly.perSecond))
        // Signing: what Tether does for every access token (ES256) and Firebase ID token (RS256) it issues.
        let signer = try JWTSigner(privateKey: key, algorithm: algorithm, keyID: "bench-key")
        let claims: JOSEObject = ["sub": "8f2d0f9c-2b8e-4c55-9d1e-0d4f1f7b2a11", "sid": "c4fe45be", "iat": .number(1_764_000_000), "exp": .number(1_764_000_900)]
        let signing = try measure(for: Double(seconds)) { _ = try signer.sign(claims: claims) }
        signed[algorithm] = signing
        print(String(format: "  %@ JWT sign (TetherJOSE): %12.1f /s  (%d in %.2f s)", algorithm.rawValue,
                     signing.perSecond, signing.operations, signing.seconds))
    }
    let baseline = try opensslSpeed(seconds: seconds)
    print(String(format: "  rsa2048 verify / sign (openssl speed): %10.1f / %.1f /s", baseline.rsa2048.verify, baseline.rsa2048.sign))
    print(String(format: "  ecdsap256 verify / sign (openssl speed): %8.1f / %.1f /s", baseline.ecdsaP256.verify, baseline.ecdsaP256.sign))
    print(String(format: "ratio RS256/rsa2048 verify:   %.3f (target >= 0.8)", verified[.rs256]!.perSecond / baseline.rsa2048.verify))
    print(String(format: "ratio ES256/ecdsap256 verify: %.3f (target >= 0.8)", verified[.es256]!.perSecond / baseline.ecdsaP256.verify))
    print(String(format: "ratio RS256/rsa2048 sign:     %.3f", signed[.rs256]!.perSecond / baseline.rsa2048.sign))
    print(String(format: "ratio ES256/ecdsap256 sign:   %.3f", signed[.es256]!.perSecond / baseline.ecdsaP256.sign))
}

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "crypto":
    let seconds = arguments.dropFirst().first.flatMap(Int.init) ?? 3
    do {
        try runCryptoBenchmark(seconds: seconds)
    } catch {
        FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
        exit(1)
    }
default:
    FileHandle.standardError.write(Data("usage: tether-bench crypto [seconds]\n".utf8))
    exit(2)
}
