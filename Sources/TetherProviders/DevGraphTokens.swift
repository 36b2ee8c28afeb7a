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

    private struct State {
        var records: [String: Record] = [:]
        /// Each person's tokens not yet invalidated by ``invalidate(userID:)``, so that a revocation
        /// touches that person's tokens only, not every token ever minted (the bench mints thousands).
        var tokensByUser: [String: [String]] = [:]
    }

    private let state = Mutex(State())

    /// Stores `record` under a new random token (`EAA…` for user tokens, `XAA…` for session-info ones, as Facebook's look).
    func issue(_ record: Record) -> String {
        let token = (record.isSessionInfo ? "XAA" : "EAA") + Self.randomText(count: 48)
        state.withLock { state in
            state.records[token] = record
            state.tokensByUser[record.userID, default: []].append(token)
        }
        return token
    }

    func record(for token: String) -> Record? {
        state.withLock { $0.records[token] }
    }

    /// Makes every token of `userID` invalid (the person removed the app); answers how many were live.
    func invalidate(userID: String) -> Int {
        state.withLock { state in
            var ended = 0
            for token in state.tokensByUser.removeValue(forKey: userID) ?? [] where state.records[token]?.isValid == true {
                state.records[token]?.isValid = false
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
