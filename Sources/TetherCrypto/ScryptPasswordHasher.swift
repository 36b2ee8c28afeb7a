import Foundation

/// Password hashes made with scrypt, stored as `$scrypt$ln=<log2 N>,r=<r>,p=<p>$<salt>$<hash>`.
///
/// Salt and hash are unpadded standard base64, as in the PHC string format.
/// Every stored hash names its own parameters, so the defaults can be raised
/// later: old hashes still verify, and ``needsRehash(_:)`` says which to
/// replace at the next successful sign-in.
public struct ScryptPasswordHasher: PasswordHashing {
    /// scrypt's cost parameters.
    public struct Parameters: Sendable, Hashable, CustomStringConvertible {
        /// log2 of the CPU/memory cost N.
        public var logN: Int
        /// The block size r.
        public var blockSize: Int
        /// The parallelism p (run one after another here: p multiplies time, not memory).
        public var parallelism: Int

        /// OWASP's scrypt setting with 64 MiB per hash: N = 2^16, r = 8, p = 2.
        public static let recommended = Parameters(logN: 16, blockSize: 8, parallelism: 2)

        /// Parameters; ``ScryptPasswordHasher/init(parameters:)`` checks that they are within bounds.
        public init(logN: Int, blockSize: Int, parallelism: Int) {
            self.logN = logN
            self.blockSize = blockSize
            self.parallelism = parallelism
        }

        /// The memory one hash needs: 128 · r · N bytes.
        public var memoryBytes: Int { 128 * blockSize << logN }

        /// The parameter segment of the stored form: `ln=16,r=8,p=2`.
        public var description: String { "ln=\(logN),r=\(blockSize),p=\(parallelism)" }

        /// Bounds for parameters read back from storage: a tampered row must not make a sign-in allocate gigabytes.
        var isWithinBounds: Bool {
            (1...22).contains(logN) && (1...32).contains(blockSize) && (1...16).contains(parallelism)
                && UInt64(memoryBytes) <= Scrypt.maximumMemoryBytes
        }

        /// Whether every parameter is at least as strong as in `other`.
        func isAtLeast(_ other: Parameters) -> Bool {
            logN >= other.logN && blockSize >= other.blockSize && parallelism >= other.parallelism
        }
    }

    /// The salt length of new hashes, in bytes.
    public static let saltByteCount = 16
    /// The derived hash length, in bytes.
    public static let hashByteCount = 32

    /// The parameters of new hashes.
    public let parameters: Parameters

    /// A hasher making new hashes with `parameters`.
    ///
    /// - Precondition: the parameters are within the bounds accepted from storage
    ///   (log2 N ≤ 22, r ≤ 32, p ≤ 16, at most 1 GiB).
    public init(parameters: Parameters = .recommended) {
        precondition(parameters.isWithinBounds, "scrypt parameters \(parameters) are out of bounds")
        self.parameters = parameters
    }

    /// A new `$scrypt$…` hash of `password` with a random salt.
    public func hash(_ password: [UInt8]) throws -> String {
        let salt = SecureRandom.bytes(count: Self.saltByteCount)
        let derived = try Self.derive(password, salt: salt, parameters: parameters, length: Self.hashByteCount)
        return "$scrypt$\(parameters)$\(Self.encode(salt))$\(Self.encode(derived))"
    }

    /// Recomputes the hash with the stored salt and parameters and compares in constant time.
    ///
    /// - Throws: ``CryptoError/invalidEncoding`` when `storedHash` is not a well-formed `$scrypt$` string.
    public func verify(_ password: [UInt8], against storedHash: String) throws -> Bool {
        let stored = try StoredHash(parsing: storedHash)
        let derived = try Self.derive(password, salt: stored.salt, parameters: stored.parameters, length: stored.hash.count)
        return ConstantTime.isEqual(stored.hash, derived)
    }

    /// True when `storedHash` is unreadable or weaker than ``parameters`` in any respect.
    public func needsRehash(_ storedHash: String) -> Bool {
        guard let stored = try? StoredHash(parsing: storedHash) else { return true }
        return !stored.parameters.isAtLeast(parameters) || stored.hash.count < Self.hashByteCount
    }

    private static func derive(_ password: [UInt8], salt: [UInt8], parameters: Parameters, length: Int) throws -> [UInt8] {
        try Scrypt.deriveKey(
            password: password, salt: salt, n: 1 << UInt64(parameters.logN), r: UInt32(parameters.blockSize),
            p: UInt32(parameters.parallelism), length: length)
    }

    private static func encode(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// The parts of a stored `$scrypt$` string.
    private struct StoredHash {
        let parameters: Parameters
        let salt: [UInt8]
        let hash: [UInt8]

        init(parsing text: String) throws {
            let fields = text.split(separator: "$", omittingEmptySubsequences: false)
            guard fields.count == 5, fields[0].isEmpty, fields[1] == "scrypt" else {
                throw CryptoError.invalidEncoding.with(detail: "not a $scrypt$ password hash")
            }
            var values: [Substring: Int] = [:]
            for assignment in fields[2].split(separator: ",", omittingEmptySubsequences: false) {
                let pair = assignment.split(separator: "=", omittingEmptySubsequences: false)
                guard pair.count == 2, values[pair[0]] == nil, pair[1].count <= 4, pair[1].allSatisfy(\.isASCII),
                      let value = Int(pair[1]) else {
                    throw CryptoError.invalidEncoding.with(detail: "bad scrypt parameter \(assignment)")
                }
                values[pair[0]] = value
            }
            guard values.count == 3, let logN = values["ln"], let blockSize = values["r"], let parallelism = values["p"] else {
                throw CryptoError.invalidEncoding.with(detail: "scrypt parameters must be ln, r and p")
            }
            parameters = Parameters(logN: logN, blockSize: blockSize, parallelism: parallelism)
            guard parameters.isWithinBounds else {
                throw CryptoError.invalidEncoding.with(detail: "scrypt parameters \(parameters) are out of bounds")
            }
            salt = try Self.decode(fields[3])
            hash = try Self.decode(fields[4])
            guard (8...64).contains(salt.count), (16...64).contains(hash.count) else {
                throw CryptoError.invalidEncoding.with(detail: "scrypt salt or hash has an unexpected length")
            }
        }

        private static func decode(_ text: Substring) throws -> [UInt8] {
            // Unpadded on the way out; padding is restored only to satisfy Foundation's decoder.
            let padded = String(text) + String(repeating: "=", count: (4 - text.count % 4) % 4)
            guard !text.contains("="), let data = Data(base64Encoded: padded) else {
                throw CryptoError.invalidEncoding.with(detail: "scrypt salt or hash is not base64")
            }
            return Array(data)
        }
    }
}
