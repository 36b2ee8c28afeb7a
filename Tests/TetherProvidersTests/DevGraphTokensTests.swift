import Foundation
import Testing
@testable import TetherProviders

@Suite("The fake Graph API's tokens")
struct DevGraphTokensTests {
    func record(_ userID: String, isValid: Bool = true) -> DevGraphTokens.Record {
        DevGraphTokens.Record(
            userID: userID, profileID: userID, appID: "app", email: nil, name: nil, firstName: nil, lastName: nil, picture: nil,
            type: "USER", isValid: isValid, issuedAt: Date(), expiresAt: nil, isSessionInfo: false, fault: nil)
    }

    /// Revoking a person's permissions ends their live tokens, and only theirs, however many were minted.
    @Test func invalidatingAPersonEndsTheirLiveTokensOnly() {
        let tokens = DevGraphTokens()
        let ada = (0..<3).map { _ in tokens.issue(record("ada")) }
        let bornInvalid = tokens.issue(record("ada", isValid: false))
        let others = (0..<500).map { tokens.issue(record("user-\($0 % 50)")) }

        #expect(tokens.invalidate(userID: "ada") == 3)
        #expect(ada.allSatisfy { tokens.record(for: $0)?.isValid == false })
        #expect(tokens.record(for: bornInvalid)?.isValid == false)
        #expect(others.allSatisfy { tokens.record(for: $0)?.isValid == true })
        #expect(tokens.invalidate(userID: "ada") == 0, "nothing live is left to end")

        // A token minted after the revocation is live until the next one.
        let later = tokens.issue(record("ada"))
        #expect(tokens.record(for: later)?.isValid == true)
        #expect(tokens.invalidate(userID: "ada") == 1)
        #expect(tokens.record(for: later)?.isValid == false)
        #expect(tokens.invalidate(userID: "nobody") == 0)
    }
}
