import CLibCrypt
import COpenSSL
import Foundation

/// Password hashes made by other systems and imported with their users (Firebase's `accounts:batchCreate`):
/// checked as those systems check them, so people keep their passwords when their accounts move.
///
/// Stored forms:
/// - `$firebase-scrypt$r=<rounds>,m=<mem_cost>$<signer key>$<salt separator>$<salt>$<hash>` (standard
///   base64 parts): Firebase's modified scrypt. The key is scrypt(password, salt ‖ separator, N = 2^mem_cost,
///   r = rounds, p = 1), 64 bytes; its first 32 key AES-256-CTR with a zero counter block over the
///   project's signer key, and the result is the hash.
/// - `$2a$`, `$2b$`, `$2y$` bcrypt strings of cost 4 to 12, checked by libxcrypt's `crypt_r`.
public enum ImportedPasswordHash {
    static let firebasePrefix = "$firebase-scrypt$"

    /// Whether `storedHash` is one of these formats (and not Tether's own `$scrypt$`).
    public static func isImported(_ storedHash: String) -> Bool {
        storedHash.hasPrefix(firebasePrefix) || isBcrypt(storedHash)
    }

    /// The stored form of a Firebase scrypt hash and its parameters (the raw bytes Firebase exports in base64).
    public static func firebaseScrypt(
        hash: [UInt8], salt: [UInt8], signerKey: [UInt8], saltSeparator: [UInt8], rounds: Int, memoryCost: Int
    ) throws -> String {
        guard (1...8).contains(rounds), (1...14).contains(memoryCost), !signerKey.isEmpty, hash.count == signerKey.count else {
            throw CryptoError.invalidInput.with(detail: "Firebase scrypt needs rounds 1...8, memoryCost 1...14 and a hash as long as the signer key")
        }
        let parts = [signerKey, saltSeparator, salt, hash].map { Data($0).base64EncodedString() }
        return "\(firebasePrefix)r=\(rounds),m=\(memoryCost)$" + parts.joined(separator: "$")
    }

    /// A bcrypt string as crypt(3) writes it, checked for shape.
    public static func bcrypt(_ text: String) throws -> String {
        guard isBcrypt(text) else {
            throw CryptoError.invalidInput.with(detail: "not a bcrypt hash of cost 4 to 12 ($2a$, $2b$ or $2y$, cost, 53 characters)")
        }
        return text
    }

    /// Whether `password` (its UTF-8, as the exporting system hashed it) matches `storedHash`.
    public static func verify(_ password: [UInt8], against storedHash: String) throws -> Bool {
        if storedHash.hasPrefix(firebasePrefix) { return try verifyFirebaseScrypt(password, storedHash) }
        if isBcrypt(storedHash) { return try verifyBcrypt(password, storedHash) }
        throw CryptoError.invalidEncoding.with(detail: "not an imported password hash")
    }

    private static func isBcrypt(_ text: String) -> Bool {
        // Costs above 12 are refused: one sign-in attempt must not take a core for seconds.
        text.wholeMatch(of: /\$2[aby]\$(0[4-9]|1[0-2])\$[.\/A-Za-z0-9]{53}/) != nil
    }

    private static func verifyFirebaseScrypt(_ password: [UInt8], _ storedHash: String) throws -> Bool {
        let fields = storedHash.dropFirst(firebasePrefix.count).split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count == 5, let parameters = parameters(fields[0]), let rounds = parameters["r"], let memoryCost = parameters["m"],
              (1...8).contains(rounds), (1...14).contains(memoryCost) else {
            throw CryptoError.invalidEncoding.with(detail: "malformed $firebase-scrypt$ hash")
        }
        let decoded = fields.dropFirst().map { Data(base64Encoded: String($0)).map(Array.init) }
        guard decoded.allSatisfy({ $0 != nil }) else { throw CryptoError.invalidEncoding.with(detail: "malformed $firebase-scrypt$ hash") }
        let (signerKey, separator, salt, expected) = (decoded[0]!, decoded[1]!, decoded[2]!, decoded[3]!)
        let derived = try Scrypt.deriveKey(
            password: password, salt: salt + separator, n: 1 << UInt64(memoryCost), r: UInt32(rounds), p: 1, length: 64)
        let computed = try aes256CTR(key: Array(derived.prefix(32)), input: signerKey)
        return ConstantTime.isEqual(computed, expected)
    }

    private static func parameters(_ text: Substring) -> [String: Int]? {
        var values: [String: Int] = [:]
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: "=")
            guard parts.count == 2, let value = Int(parts[1]) else { return nil }
            values[String(parts[0])] = value
        }
        return values
    }

    /// AES-256-CTR from a zero counter block (Firebase's scrypt encrypts its signer key so).
    static func aes256CTR(key: [UInt8], input: [UInt8]) throws -> [UInt8] {
        guard key.count == 32 else { throw CryptoError.invalidInput.with(detail: "AES-256 needs a 32-byte key") }
        guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSL.failure(.operationFailed, "EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        let iv = [UInt8](repeating: 0, count: 16)
        guard EVP_CipherInit_ex2(context, OpenSSL.aes256CTR, key, iv, 1, nil) == 1 else {
            throw OpenSSL.failure(.operationFailed, "EVP_CipherInit_ex2")
        }
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var length: Int32 = 0
        guard EVP_CipherUpdate(context, &output, &length, input, Int32(input.count)) == 1 else {
            throw OpenSSL.failure(.operationFailed, "EVP_CipherUpdate")
        }
        var final: Int32 = 0
        let written = Int(length)
        guard output.withUnsafeMutableBufferPointer({ EVP_CipherFinal_ex(context, $0.baseAddress! + written, &final) }) == 1 else {
            throw OpenSSL.failure(.operationFailed, "EVP_CipherFinal_ex")
        }
        return Array(output.prefix(written + Int(final)))
    }

    private static func verifyBcrypt(_ password: [UInt8], _ storedHash: String) throws -> Bool {
        // bcrypt reads at most 72 bytes and stops at NUL; a password with NUL cannot be what was hashed.
        guard !password.contains(0) else { return false }
        let data = UnsafeMutablePointer<crypt_data>.allocate(capacity: 1)
        defer { data.deallocate() }
        memset(data, 0, MemoryLayout<crypt_data>.size)
        let phrase = password.map { CChar(bitPattern: $0) } + [0]
        guard let result = crypt_r(phrase, storedHash, data) else { return false }
        let computed = Array(String(cString: result).utf8)
        // A failed crypt_r answers a string starting with "*", never the stored hash.
        return ConstantTime.isEqual(computed, Array(storedHash.utf8))
    }
}
