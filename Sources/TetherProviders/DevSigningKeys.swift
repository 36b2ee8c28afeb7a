import Foundation
import Synchronization
import TetherCrypto
import TetherJOSE

/// The dev identity provider's RSA signing keys, one ring per token-issuing provider.
///
/// With a directory, each provider's current key lives in `<provider>.pem`
/// (PKCS#8, mode 0600), made on first start and reused afterwards, so tokens
/// minted before a restart of `tether dev` still verify. Without one, keys are
/// fresh, in memory only, and made when first needed (tests). A rotation keeps the previous key
/// published, as real providers do, so tokens already minted keep verifying until the next
/// restart: only the current key is kept on disk.
final class DevSigningKeys: Sendable {
    /// The current signing key and the one it replaced.
    struct Ring: Sendable {
        var current: JWK
        var previous: JWK?

        var published: JWKSet { JWKSet(keys: [current, previous].compactMap { $0?.publicJWK }) }
    }

    /// The providers whose tokens the dev identity provider signs.
    static let issuers: [ProviderName] = [.apple, .facebook, .google]

    private let directory: URL?
    private let rings: Mutex<[ProviderName: Ring]>

    /// Loads or makes the keys under `directory`; without one, each key is made on first use.
    init(directory: URL?) throws {
        self.directory = directory
        var rings: [ProviderName: Ring] = [:]
        if let directory {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            for provider in Self.issuers {
                let file = directory.appendingPathComponent("\(provider.rawValue).pem")
                var key: PrivateKey
                if FileManager.default.fileExists(atPath: file.path) {
                    key = try Self.read(file)
                } else {
                    key = try PrivateKey.generate(.rsa)
                    // Another `tether dev` of the checkout starting at the same moment may have put its key there
                    // first: then both use that one.
                    if !(try Self.write(key, to: file, keepingAnExistingKey: true)) { key = try Self.read(file) }
                }
                rings[provider] = Ring(current: try Self.jwk(key, provider: provider), previous: nil)
            }
        }
        self.rings = Mutex(rings)
    }

    /// The ring of `provider`; an in-memory key is made on first use (RSA generation is the slow part of a test).
    func ring(_ provider: ProviderName) throws -> Ring {
        try rings.withLock { rings in
            if let ring = rings[provider] { return ring }
            let ring = Ring(current: try Self.jwk(PrivateKey.generate(.rsa), provider: provider), previous: nil)
            rings[provider] = ring
            return ring
        }
    }

    /// Replaces `provider`'s signing key with a new one (persisted when there is a directory); returns its `kid`.
    func rotate(_ provider: ProviderName) throws -> String {
        let key = try PrivateKey.generate(.rsa)
        let jwk = try Self.jwk(key, provider: provider)
        // Written under the lock, so that two rotations at once leave on disk the key they leave current.
        try rings.withLock { rings in
            if let directory {
                _ = try Self.write(key, to: directory.appendingPathComponent("\(provider.rawValue).pem"), keepingAnExistingKey: false)
            }
            rings[provider] = Ring(current: jwk, previous: rings[provider]?.current)
        }
        return jwk.keyID!
    }

    /// A signing JWK whose `kid` is derived from the key (RFC 7638 thumbprint), so it is stable across restarts.
    private static func jwk(_ key: PrivateKey, provider: ProviderName) throws -> JWK {
        let thumbprint = try JWK(material: .privateKey(key)).thumbprint()
        return try JWK(
            material: .privateKey(key), keyID: "dev-\(provider.rawValue)-\(thumbprint.prefix(16))", algorithm: .rs256,
            use: "sig")
    }

    private static func read(_ file: URL) throws -> PrivateKey {
        try PrivateKey(pem: String(contentsOf: file, encoding: .utf8))
    }

    /// Writes the PEM to a private temporary file, then gives it the name `file` in one step, so that the key is never
    /// world-readable or half-written, and `file` never missing while it is replaced (a reader sees the old key or the
    /// new one). With `keepingAnExistingKey`, a key already at `file` stays (POSIX `link` refuses to replace it) and
    /// this answers false; otherwise it is replaced (`rename`).
    private static func write(_ key: PrivateKey, to file: URL, keepingAnExistingKey: Bool) throws -> Bool {
        let temporary = file.deletingLastPathComponent().appendingPathComponent(".\(file.lastPathComponent).\(UUID.random().uuidString)")
        guard FileManager.default.createFile(
            atPath: temporary.path, contents: Data(try key.pemEncoded().utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary.path])
        }
        // After a link the temporary name is a second one of the key's file; after a rename it is gone already.
        defer { unlink(temporary.path) }
        if keepingAnExistingKey {
            if link(temporary.path, file.path) == 0 { return true }
            let failure = errno
            if failure == EEXIST { return false }
            // A file system without hard links: the key is kept unless one appeared since the caller looked.
            guard [EPERM, EOPNOTSUPP, ENOSYS].contains(failure) else { throw Self.failure(failure, file) }
            if FileManager.default.fileExists(atPath: file.path) { return false }
        }
        guard rename(temporary.path, file.path) == 0 else { throw Self.failure(errno, file) }
        return true
    }

    private static func failure(_ code: Int32, _ file: URL) -> POSIXError {
        POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO, userInfo: [NSFilePathErrorKey: file.path])
    }
}
