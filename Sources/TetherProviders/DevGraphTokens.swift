import Foundation
import Synchronization
import TetherCrypto

/// The access tokens the fake Graph API knows: only those it minted.
final class DevGraphTokens: Sendable {
    struct Record: Sendable {
        var userID: String
        var profileID: String
        var appID: String
        var email: String?
        var name: String?
        var firstName: String?
        var lastName: String?
        var picture: String?
        var type: String
        var isValid: Bool
        var issuedAt: Date
        var expiresAt: Date?
        /// A token from the `fb_attenuate_token` exchange, which may not read profiles.
        var isSessionInfo: Bool
        var fault: DevAccessTokenRequest.GraphFault?
    }

    private let records = Mutex<[String: Record]>([:])

    /// Stores `record` under a new random token (`EAA…` for user tokens, `XAA…` for session-info ones, as Facebook's look).
    func issue(_ record: Record) -> String {
        let token = (record.isSessionInfo ? "XAA" : "EAA") + Self.randomText(count: 48)
        records.withLock { $0[token] = record }
        return token
    }

    func record(for token: String) -> Record? {
        records.withLock { $0[token] }
    }

    /// Makes every token of `userID` invalid (the person removed the app); answers how many were live.
    func invalidate(userID: String) -> Int {
        records.withLock { records in
            var ended = 0
            for (token, record) in records where record.userID == userID && record.isValid {
                records[token]?.isValid = false
                ended += 1
            }
            return ended
        }
    }

    /// Random text from the base64url alphabet.
    private static func randomText(count: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        return String(SecureRandom.bytes(count: count).map { alphabet[Int($0 & 63)] })
    }
}
