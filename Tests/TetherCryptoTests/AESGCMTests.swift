import Foundation
import Testing
import TetherCrypto

@Suite("AES-256-GCM")
struct AESGCMTests {
    let key = SecureRandom.bytes(count: 32)

    @Test("Seal matches the GCM specification's AES-256 test cases 13 and 14", arguments: [
        ("", "", "530f8afbc74536b9a963b4f1c4cb738b"),
        ("00000000000000000000000000000000", "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"),
    ])
    func sealMatchesSpecificationVector(plaintext: String, ciphertext: String, tag: String) throws {
        let box = try AESGCM.seal([UInt8](hex: plaintext), key: [UInt8](repeating: 0, count: 32),
                                  nonce: [UInt8](repeating: 0, count: 12))
        #expect(box.ciphertext.hex == ciphertext)
        #expect(box.tag.hex == tag)
        #expect(try AESGCM.open(box, key: [UInt8](repeating: 0, count: 32)).hex == plaintext)
    }

    @Test func sealedBoxOpensWithTheSameKeyAndAAD() throws {
        let message = Array("personal data".utf8)
        let aad = Array("user-42".utf8)
        let box = try AESGCM.seal(message, key: key, authenticating: aad)
        #expect(box.nonce.count == 12 && box.tag.count == 16)
        #expect(try AESGCM.open(AESGCM.SealedBox(combined: box.combined), key: key, authenticating: aad) == message)
        // The same bytes in Data, a slice of a larger buffer among them, split alike.
        #expect(try AESGCM.SealedBox(combined: Data(box.combined)) == box)
        #expect(try AESGCM.SealedBox(combined: Data([9, 9] + box.combined).dropFirst(2)) == box)
    }

    @Test func anEmptyMessageWithAADSealsAndOpens() throws {
        let aad = Array("a longer additional authenticated data than the tag".utf8)
        let box = try AESGCM.seal([UInt8](), key: key, authenticating: aad)
        #expect(box.ciphertext.isEmpty)
        #expect(try AESGCM.open(box, key: key, authenticating: aad).isEmpty)
        #expect(throws: CryptoError.self) { try AESGCM.open(box, key: key, authenticating: Array("other".utf8)) }
    }

    @Test func tamperedCiphertextTagOrAADFailsAuthentication() throws {
        let box = try AESGCM.seal(Array("secret".utf8), key: key, authenticating: Array("a".utf8))
        var flipped = box
        flipped.ciphertext[0] ^= 1
        var badTag = box
        badTag.tag[15] ^= 1
        #expect(throws: CryptoError.authenticationFailed) { try AESGCM.open(flipped, key: key, authenticating: Array("a".utf8)) }
        #expect(throws: CryptoError.authenticationFailed) { try AESGCM.open(badTag, key: key, authenticating: Array("a".utf8)) }
        #expect(throws: CryptoError.authenticationFailed) { try AESGCM.open(box, key: key, authenticating: Array("b".utf8)) }
        #expect(throws: CryptoError.authenticationFailed) { try AESGCM.open(box, key: SecureRandom.bytes(count: 32), authenticating: Array("a".utf8)) }
    }

    @Test func wrongKeyOrNonceSizeIsRejected() {
        #expect(throws: CryptoError.invalidInput) { try AESGCM.seal([UInt8](), key: [UInt8](repeating: 0, count: 16)) }
        #expect(throws: CryptoError.invalidInput) { try AESGCM.seal([UInt8](), key: key, nonce: [UInt8](repeating: 0, count: 8)) }
        #expect(throws: CryptoError.invalidInput) { try AESGCM.SealedBox(combined: [UInt8](repeating: 0, count: 27)) }
        #expect(throws: CryptoError.invalidInput) { try AESGCM.SealedBox(combined: Data(count: 27)) }
    }

    @Test func aScheduledKeySealsAndOpensManyTimesAsTheOneShotCallsDo() throws {
        let scheduled = try AESGCM.ScheduledKey(key)
        for length in [0, 1, 15, 16, 17, 200] {
            let message = SecureRandom.bytes(count: length)
            let aad = Array("event \(length)".utf8)
            let nonce = SecureRandom.bytes(count: 12)
            // The same nonce gives the same box whichever way it is sealed, and each opens the other's.
            let box = try scheduled.seal(message, nonce: nonce, authenticating: aad)
            #expect(box == (try AESGCM.seal(message, key: key, nonce: nonce, authenticating: aad)))
            #expect(try scheduled.open(box, authenticating: aad) == message)
            #expect(try AESGCM.open(try scheduled.seal(message, authenticating: aad), key: key, authenticating: aad) == message)
        }
        // A failed open leaves the key ready for the next one, in either direction.
        let box = try scheduled.seal(Array("kept".utf8), authenticating: Array("a".utf8))
        var tampered = box
        tampered.tag[0] ^= 1
        #expect(throws: CryptoError.authenticationFailed) { try scheduled.open(tampered, authenticating: Array("a".utf8)) }
        #expect(throws: CryptoError.authenticationFailed) { try scheduled.open(box, authenticating: Array("b".utf8)) }
        #expect(try scheduled.open(box, authenticating: Array("a".utf8)) == Array("kept".utf8))
        let zero = try AESGCM.ScheduledKey([UInt8](repeating: 0, count: 32))
        let vector = try zero.seal([UInt8](repeating: 0, count: 16), nonce: [UInt8](repeating: 0, count: 12))
        #expect(vector.ciphertext.hex == "cea7403d4d606b6e074ec5d3baf39d18" && vector.tag.hex == "d0d1c8a799996bf0265b98b5d48ab919")
        // The GCM specification's test case 16: AES-256, AAD, a plaintext not a whole number of blocks; opened
        // on a context that has just sealed, and sealed on one that has just opened.
        let key16 = try AESGCM.ScheduledKey([UInt8](hex: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"))
        let plaintext16 = [UInt8](hex: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
        let aad16 = [UInt8](hex: "feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let box16 = try key16.seal(plaintext16, nonce: [UInt8](hex: "cafebabefacedbaddecaf888"), authenticating: aad16)
        #expect(box16.ciphertext.hex == "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662")
        #expect(box16.tag.hex == "76fc6ece0f4e1768cddf8853bb2d551b")
        #expect(try key16.open(box16, authenticating: aad16) == plaintext16)
        #expect(try key16.seal(plaintext16, nonce: box16.nonce, authenticating: aad16) == box16)
        #expect(throws: CryptoError.invalidInput) { try AESGCM.ScheduledKey([UInt8](repeating: 0, count: 31)) }
        #expect(throws: CryptoError.invalidInput) { try scheduled.seal([UInt8](), nonce: [UInt8](repeating: 0, count: 8)) }
    }
}
