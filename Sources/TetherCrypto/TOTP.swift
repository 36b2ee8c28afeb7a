import Foundation

/// Time-based one-time passwords (RFC 6238) with SHA-1, SHA-256 or SHA-512.
public struct TOTP: Sendable, Equatable, CustomStringConvertible {
    /// RFC 4226 R6: the shared secret must be at least 128 bits.
    public static let minimumSecretByteCount = 16

    /// The shared secret.
    public let secret: [UInt8]
    /// The HMAC hash function (`.sha1`, `.sha256` or `.sha512`).
    public let algorithm: DigestAlgorithm
    /// Code length, 6 to 8.
    public let digits: Int
    /// Time step in seconds.
    public let period: Int

    /// Checks and stores the parameters.
    public init(secret: [UInt8], algorithm: DigestAlgorithm = .sha1, digits: Int = 6, period: Int = 30) throws {
        guard secret.count >= Self.minimumSecretByteCount else {
            throw CryptoError.invalidInput.with(detail: "TOTP secrets need at least 128 bits")
        }
        guard algorithm != .sha384 else { throw CryptoError.invalidInput.with(detail: "TOTP uses SHA1, SHA256 or SHA512") }
        guard (6...8).contains(digits) else { throw CryptoError.invalidInput.with(detail: "TOTP codes have 6 to 8 digits") }
        guard (1...3600).contains(period) else { throw CryptoError.invalidInput.with(detail: "TOTP period out of range") }
        self.secret = secret
        self.algorithm = algorithm
        self.digits = digits
        self.period = period
    }

    /// A fresh random secret; 20 bytes matches the SHA-1 block RFC 4226 recommends.
    public static func generateSecret(byteCount: Int = 20) -> [UInt8] {
        SecureRandom.bytes(count: max(byteCount, minimumSecretByteCount))
    }

    /// The time step containing `date` (0 for dates before 1970).
    public func step(at date: Date) -> UInt64 {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        guard seconds > 0 else { return 0 }
        return UInt64(seconds) / UInt64(period)
    }

    /// The code for the step containing `date`.
    public func code(at date: Date) -> String {
        code(forStep: step(at: date))
    }

    /// The code for time step `step`.
    public func code(forStep step: UInt64) -> String {
        HOTP.code(secret: secret, counter: step, digits: digits, algorithm: algorithm)
    }

    /// The step `code` belongs to, looking `window` steps either side of `date`, or nil.
    ///
    /// Steps at or before `lastUsedStep` are not considered, so a caller that
    /// stores the returned step rejects a code used twice (RFC 6238 §5.2).
    /// Every candidate is compared in constant time, with no early exit.
    public func matchingStep(for code: String, at date: Date, window: Int = 1, after lastUsedStep: UInt64? = nil) -> UInt64? {
        precondition((0...10).contains(window), "TOTP window out of range")
        let candidate = Array(code.utf8)
        guard candidate.count == digits, candidate.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        let current = Int64(clamping: step(at: date))
        var matched: UInt64?
        for offset in -window...window {
            let step = current + Int64(offset)
            guard step >= 0 else { continue }
            if let lastUsedStep, UInt64(step) <= lastUsedStep { continue }
            if ConstantTime.isEqual(Array(self.code(forStep: UInt64(step)).utf8), candidate) {
                matched = UInt64(step)
            }
        }
        return matched
    }

    /// Describes the parameters without revealing the secret.
    public var description: String {
        "TOTP(algorithm: \(algorithm.rawValue), digits: \(digits), period: \(period), secret: <redacted>)"
    }

    /// Equal parameters and secret; the secrets are compared in constant time.
    public static func == (lhs: TOTP, rhs: TOTP) -> Bool {
        ConstantTime.isEqual(lhs.secret, rhs.secret) && lhs.algorithm == rhs.algorithm
            && lhs.digits == rhs.digits && lhs.period == rhs.period
    }
}
