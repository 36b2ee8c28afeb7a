import Foundation
import Testing
@testable import TetherCrypto

/// Hashes imported from Firebase exports: its modified scrypt, and bcrypt through libxcrypt.
@Suite("Imported password hashes")
struct ImportedPasswordHashTests {
    /// The example of Firebase's own scrypt utility (firebase/scrypt), as its ports publish it.
    static let signerKey = "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA=="
    static let salt = "42xEC+ixf3L2lw=="
    static let hash = "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ=="

    private static func bytes(_ base64: String) -> [UInt8] { Array(Data(base64Encoded: base64)!) }

    @Test func firebaseScryptChecksThePublishedExample() throws {
        let stored = try ImportedPasswordHash.firebaseScrypt(
            hash: Self.bytes(Self.hash), salt: Self.bytes(Self.salt), signerKey: Self.bytes(Self.signerKey),
            saltSeparator: Self.bytes("Bw=="), rounds: 8, memoryCost: 14)
        #expect(ImportedPasswordHash.isImported(stored))
        #expect(try ImportedPasswordHash.verify(Array("user1password".utf8), against: stored))
        #expect(try !ImportedPasswordHash.verify(Array("user1password!".utf8), against: stored))
        // Another salt is another hash.
        let otherSalt = try ImportedPasswordHash.firebaseScrypt(
            hash: Self.bytes(Self.hash), salt: Self.bytes("52xEC+ixf3L2lw=="), signerKey: Self.bytes(Self.signerKey),
            saltSeparator: Self.bytes("Bw=="), rounds: 8, memoryCost: 14)
        #expect(try !ImportedPasswordHash.verify(Array("user1password".utf8), against: otherSalt))
        #expect(throws: CryptoError.self) {
            try ImportedPasswordHash.firebaseScrypt(hash: [1], salt: [], signerKey: [1, 2], saltSeparator: [], rounds: 8, memoryCost: 14)
        }
        #expect(throws: CryptoError.self) { try ImportedPasswordHash.verify([], against: "$firebase-scrypt$r=8$x") }
    }

    @Test func aesCTRFromAZeroCounterMatchesNISTsSecondBlock() throws {
        // SP 800-38A F.5.5 (CTR-AES256) uses a non-zero counter; a zero counter block over zeros is AES-256 of
        // the counter blocks themselves, so two blocks differ and a second call gives the same bytes.
        let key = [UInt8](repeating: 0x11, count: 32)
        let once = try ImportedPasswordHash.aes256CTR(key: key, input: [UInt8](repeating: 0, count: 32))
        #expect(once.count == 32)
        #expect(Array(once[0..<16]) != Array(once[16..<32]))
        #expect(try ImportedPasswordHash.aes256CTR(key: key, input: once) == [UInt8](repeating: 0, count: 32))
    }

    @Test func bcryptChecksAKnownVectorAndRefusesOtherShapes() throws {
        // From the crypt_blowfish test vectors (Solar Designer).
        let stored = try ImportedPasswordHash.bcrypt("$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW")
        #expect(try ImportedPasswordHash.verify(Array("U*U".utf8), against: stored))
        #expect(try !ImportedPasswordHash.verify(Array("U*V".utf8), against: stored))
        #expect(try !ImportedPasswordHash.verify([0x55, 0, 0x55], against: stored))
        #expect(throws: CryptoError.self) { try ImportedPasswordHash.bcrypt("$1$md5-crypt$whatever") }
        #expect(throws: CryptoError.self) { try ImportedPasswordHash.bcrypt("$2a$31$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW") }
        #expect(!ImportedPasswordHash.isImported("$scrypt$ln=15,r=8,p=1$abc$def"))
    }
}
