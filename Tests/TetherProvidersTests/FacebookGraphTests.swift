import TetherCore
import Foundation
import Testing
import TetherAPI
import TetherHTTP
import TetherProviders

/// What the fake Graph API is told about a token, and the check that must catch it.
enum GraphDefect: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case invalidToken, tokenOfAnotherApp, pageToken, expiredToken, profileOfAnotherUser

    var testDescription: String { rawValue }

    var request: [String: JSONValue] {
        switch self {
        case .invalidToken: ["isValid": false]
        case .tokenOfAnotherApp: ["appId": "999999"]
        case .pageToken: ["type": "PAGE"]
        case .expiredToken: ["expiresIn": -60]
        case .profileOfAnotherUser: ["profileId": "4"]
        }
    }

    var expected: CredentialRejection {
        switch self {
        case .invalidToken: .tokenInvalid
        case .tokenOfAnotherApp: .appID
        case .pageToken: .tokenType
        case .expiredToken: .expired
        case .profileOfAnotherUser: .userMismatch
        }
    }
}

/// A way the Graph API can fail that is not the token's fault.
enum GraphOutage: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case serverError, timeout, responseNotJSON, throttled

    var testDescription: String { rawValue }

    var fault: JSONValue {
        switch self {
        case .serverError: ["status": 500, "body": "Internal Server Error"]
        // The outage test gives Graph calls 0.5 s.
        case .timeout: ["delayMilliseconds": 2000]
        case .responseNotJSON: ["status": 200, "body": "<html>maintenance</html>"]
        case .throttled: ["status": 400, "body": #"{"error":{"message":"Application request limit reached","type":"OAuthException","code":4}}"#]
        }
    }

    /// Part of the logged detail, proving which path classified the failure.
    var expectedDetail: String {
        switch self {
        case .serverError: "answered 500"
        case .timeout: "transport"
        case .responseNotJSON: "not a JSON object"
        case .throttled: "request limit"
        }
    }

    /// Graph's time limit: short only where the timeout is the point.
    var graphTimeout: TimeInterval { self == .timeout ? 0.5 : 30 }
}

@Suite("Facebook classic and session-info tokens against the fake Graph API")
struct FacebookGraphTests {
    private func accessToken(_ fixture: DevIdPFixture, _ extra: [String: JSONValue] = [:]) async throws -> String {
        var request: [String: JSONValue] = [
            "userId": "10215241773831025", "email": "ada@example.com", "name": "Ada Lovelace", "firstName": "Ada",
            "lastName": "Lovelace", "picture": "https://platform-lookaside.fbsbx.com/p.jpg",
        ]
        for (name, value) in extra { request[name] = value }
        return try await fixture.facebookAccessToken(request)
    }

    /// Exchanges `token` for a session-info token the way an app does, through the fake Graph API.
    private func sessionInfoToken(_ fixture: DevIdPFixture, exchanging token: String) async throws -> String {
        let response = try await fixture.get(
            "/facebook/graph/oauth/access_token?grant_type=fb_attenuate_token&client_id=\(DevIdentityProvider.facebookAppID)&fb_exchange_token=\(token)")
        #expect(response.status == 200)
        let body = try response.decodeJSON([String: JSONValue].self)
        #expect(body["token_type"] == "bearer")
        guard case .string(let exchanged)? = body["access_token"] else { throw FixtureError("no access_token: \(response.bodyText)") }
        return exchanged
    }

    @Test func classicTokenGivesTheGraphProfileWithAnUnverifiedEmail() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let identity = try await fixture.providers.verify(.facebookAccessToken(try await accessToken(fixture)))
        #expect(identity.uid == "10215241773831025")
        #expect(identity.credentialForm == .facebookAccessToken)
        #expect(identity.email == "ada@example.com" && !identity.isEmailVerified)
        #expect(identity.displayName == "Ada Lovelace" && identity.givenName == "Ada" && identity.familyName == "Lovelace")
        #expect(identity.photoURL?.absoluteString == "https://platform-lookaside.fbsbx.com/p.jpg")
        #expect(!identity.isNameClientAsserted && !identity.isProfileClientAsserted)
        #expect(identity.audience == DevIdentityProvider.facebookAppID)
        #expect(identity.rawClaims["id"] == "10215241773831025")
        #expect(identity.tokenExpiresAt != nil)
    }

    @Test func classicTokenThatNeverExpiresIsAccepted() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let identity = try await fixture.providers.verify(.facebookAccessToken(try await accessToken(fixture, ["expiresIn": 0])))
        #expect(identity.tokenExpiresAt == nil)
    }

    @Test func debugTokenAndMeAreAskedTogether() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        // Each Graph call answers after a second: asked one after the other, the two would take two.
        let token = try await accessToken(fixture, ["graphFault": ["delayMilliseconds": 1000]])
        let started = ContinuousClock.now
        let identity = try await fixture.providers.verify(.facebookAccessToken(token))
        let elapsed = ContinuousClock.now - started
        #expect(identity.uid == "10215241773831025" && identity.email == "ada@example.com")
        #expect(elapsed >= .milliseconds(1000))
        #expect(elapsed < .milliseconds(1800), "debug_token and /me took \(elapsed): asked one after the other")
    }

    @Test(arguments: GraphDefect.allCases)
    func graphVerdictOnTheTokenIsAnInvalidCredential(defect: GraphDefect) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await accessToken(fixture, defect.request)
        let error = await #expect(throws: ProviderError.invalidCredential(defect.expected)) {
            try await fixture.providers.verify(.facebookAccessToken(token))
        }
        #expect(error?.provider == "facebook")
    }

    @Test func tokenTheGraphHasNeverSeenIsAnInvalidCredential() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        await #expect(throws: ProviderError.invalidCredential(.tokenInvalid)) {
            try await fixture.providers.verify(.facebookAccessToken("EAAmadeup"))
        }
    }

    @Test(arguments: GraphOutage.allCases)
    func graphOutageIsProviderUnavailableNeverABadCredential(outage: GraphOutage) async throws {
        try await DevIdPFixture.run(adjust: { $0.facebook.graphTimeout = outage.graphTimeout }) { fixture in
            let token = try await accessToken(fixture, ["graphFault": outage.fault])
            let error = await #expect(throws: ProviderError.providerUnavailable) {
                try await fixture.providers.verify(.facebookAccessToken(token))
            }
            #expect(error?.detail.contains(outage.expectedDetail) == true, "\(error.map(String.init(describing:)) ?? "")")
            #expect(error?.problem.status == 503)
            #expect(error?.problem.headers["Retry-After"] == String(ProviderError.retryAfterSeconds))
        }
    }

    @Test func sessionInfoTokenIsConfirmedByGraphAndItsProfileMarkedClientAsserted() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let sessionInfo = try await sessionInfoToken(fixture, exchanging: try await accessToken(fixture))
        #expect(sessionInfo.hasPrefix("XAA"))
        let profile = FacebookProfile(
            id: "10215241773831025", name: "Ada L.", email: "ada@example.com", firstName: "Ada", lastName: "L.",
            raw: ["id": "10215241773831025", "name": "Ada L."])
        let identity = try await fixture.providers.verify(.facebookSessionInfo(sessionInfoToken: sessionInfo, profile: profile))
        #expect(identity.uid == "10215241773831025")
        #expect(identity.credentialForm == .facebookSessionInfo)
        #expect(identity.isProfileClientAsserted && identity.isNameClientAsserted)
        #expect(identity.email == "ada@example.com" && !identity.isEmailVerified)
        #expect(identity.displayName == "Ada L.")
        #expect(identity.rawClaims == ["id": "10215241773831025", "name": "Ada L."])
    }

    @Test func sessionInfoProfileOfAnotherUserIsRejected() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let sessionInfo = try await sessionInfoToken(fixture, exchanging: try await accessToken(fixture))
        await #expect(throws: ProviderError.invalidCredential(.userMismatch)) {
            try await fixture.providers.verify(.facebookSessionInfo(
                sessionInfoToken: sessionInfo, profile: FacebookProfile(id: "4", name: "Mark")))
        }
    }

    @Test func sessionInfoTokenCannotReadTheProfileItself() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let sessionInfo = try await sessionInfoToken(fixture, exchanging: try await accessToken(fixture))
        // Sent as a classic token, /me refuses it: the profile can only come from the app.
        await #expect(throws: ProviderError.invalidCredential(.tokenInvalid)) {
            try await fixture.providers.verify(.facebookAccessToken(sessionInfo))
        }
    }

    @Test func classicTokensNeedTheAppSecret() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        var configuration = fixture.configuration
        configuration.facebook.appSecret = nil
        let providers = try IdentityProviders(configuration: configuration, nonceStore: fixture.nonceStore)
        let token = try await accessToken(fixture)
        await #expect(throws: ProviderError.unsupportedProvider) {
            try await providers.verify(.facebookAccessToken(token))
        }
        // The client is told which Facebook tokens are taken, not that Facebook is off.
        do {
            _ = try await providers.verify(.facebookAccessToken(token))
        } catch let error as ProviderError {
            #expect(error.problem.detail == "Facebook access tokens (classic and session-info) are not accepted on this server; Limited Login tokens are.")
        }
        // Limited Login needs no secret.
        let limited = try await fixture.idToken(.facebook)
        _ = try await providers.verify(.facebookLimitedLogin(authenticationToken: limited, rawNonce: nil))
    }
}

@Suite("The fake Graph API holds Tether to Facebook's rules")
struct DevGraphAPITests {
    @Test func debugTokenRefusesTheAppTokenInTheURL() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.facebookAccessToken(["userId": "1"])
        let appToken = "\(DevIdentityProvider.facebookAppID)%7C\(DevIdentityProvider.facebookAppSecret)"
        let inURL = try await fixture.get("/facebook/graph/debug_token?input_token=\(token)&access_token=\(appToken)")
        #expect(inURL.status == 400)
        let wrongSecret = try await fixture.get(
            "/facebook/graph/debug_token?input_token=\(token)",
            headers: ["Authorization": "Bearer \(DevIdentityProvider.facebookAppID)|wrong"])
        #expect(wrongSecret.status == 400)
        let right = try await fixture.get(
            "/facebook/graph/debug_token?input_token=\(token)",
            headers: ["Authorization": "Bearer \(DevIdentityProvider.facebookAppID)|\(DevIdentityProvider.facebookAppSecret)"])
        #expect(right.status == 200)
    }

    @Test func meRefusesAMissingOrWrongAppSecretProof() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.facebookAccessToken(["userId": "1"])
        let missing = try await fixture.get("/facebook/graph/me?fields=id", headers: ["Authorization": "Bearer \(token)"])
        #expect(missing.status == 400)
        #expect(missing.bodyText.contains("appsecret_proof"))
        let wrong = try await fixture.get(
            "/facebook/graph/me?fields=id&appsecret_proof=00", headers: ["Authorization": "Bearer \(token)"])
        #expect(wrong.status == 400)
    }

    @Test func attenuationRequiresTheTokensOwnApp() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.facebookAccessToken(["userId": "1"])
        let response = try await fixture.get(
            "/facebook/graph/oauth/access_token?grant_type=fb_attenuate_token&client_id=999&fb_exchange_token=\(token)")
        #expect(response.status == 400)
    }
}
