import TetherCore
import Foundation
import Testing
import TetherTesting
import TetherAPI
import TetherHTTP
import TetherProviders

/// A flaw a minted ID token can have, the request that produces it, and the check that must catch it.
enum TokenDefect: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case wrongAudience, wrongIssuer, expired, issuedInFuture, tooOld, badSignature, algNone, hs256SignedWithPublicKey,
        unknownKeyID, missingSubject, emptySubject, blankSubject, missingExpiry, nonceWithoutRawNonce, rawNonceWithoutNonce,
        nonceMismatch

    var testDescription: String { rawValue }

    /// The members of the mint request, relative to `now`.
    func request(now: TimeInterval) -> [String: JSONValue] {
        switch self {
        case .wrongAudience: ["aud": "com.example.someone-else"]
        case .wrongIssuer: ["iss": "https://issuer.example"]
        case .expired: ["exp": .double(now - 120)]
        case .issuedInFuture: ["iat": .double(now + 600)]
        // Older than every provider's maximum age, yet unexpired.
        case .tooOld: ["iat": .double(now - 4000)]
        case .badSignature: ["forge": "bad-signature"]
        case .algNone: ["forge": "alg-none"]
        case .hs256SignedWithPublicKey: ["forge": "hs256-public-key"]
        case .unknownKeyID: ["header": ["kid": "no-such-key"]]
        case .missingSubject: ["claims": ["sub": nil]]
        case .emptySubject: ["sub": ""]
        // Spaces, a tab and line breaks name no one either.
        case .blankSubject: ["sub": " \t\n\r "]
        case .missingExpiry: ["claims": ["exp": nil]]
        case .nonceWithoutRawNonce, .nonceMismatch: ["rawNonce": "nonce-minted-into-the-token"]
        case .rawNonceWithoutNonce: [:]
        }
    }

    /// The raw nonce the client presents.
    var presentedRawNonce: String? {
        switch self {
        case .rawNonceWithoutNonce, .nonceMismatch: "a-different-raw-nonce"
        default: nil
        }
    }

    var expected: CredentialRejection {
        switch self {
        case .wrongAudience: .audience
        case .wrongIssuer: .issuer
        case .expired: .expired
        case .issuedInFuture: .issuedInFuture
        case .tooOld: .tooOld
        case .badSignature: .signature
        case .algNone, .hs256SignedWithPublicKey: .algorithm
        case .unknownKeyID: .unknownKey
        case .missingSubject, .emptySubject, .blankSubject: .subject
        case .missingExpiry: .missingClaim
        case .nonceWithoutRawNonce, .rawNonceWithoutNonce: .nonceMissing
        case .nonceMismatch: .nonceMismatch
        }
    }
}

@Suite("ID tokens from Apple, Facebook Limited Login and Google, verified against the dev identity provider")
struct IDTokenVerificationTests {
    static let tokenProviders: [ProviderName] = [.apple, .facebook, .google]

    @Test(arguments: tokenProviders, TokenDefect.allCases)
    func defectiveTokenIsRejectedNamingTheFailedCheck(provider: ProviderName, defect: TokenDefect) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(provider, defect.request(now: Date().timeIntervalSince1970))
        let credential = idTokenCredential(provider, token, rawNonce: defect.presentedRawNonce)
        let error = await #expect(throws: ProviderError.invalidCredential(defect.expected)) {
            try await fixture.providers.verify(credential)
        }
        #expect(error?.provider == provider.rawValue)
        #expect(error?.problem.status == 401)
        #expect(error?.problem.extensions["reason"] == .string(defect.expected.rawValue))
    }

    @Test(arguments: tokenProviders)
    func aReleasedNonceMayBeSpentAgainByTheSameToken(provider: ProviderName) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let rawNonce = UUID().uuidString
        let token = try await fixture.idToken(provider, ["sub": .string("retry-\(provider.rawValue)"), "rawNonce": .string(rawNonce)])
        let first = try await fixture.providers.verify(idTokenCredential(provider, token, rawNonce: rawNonce))
        let spent = try #require(first.spentNonce, "a token with a nonce reports the nonce it spent")
        // The sign-in it was for failed on the server's side: the nonce is given back, and the retry works once.
        try await fixture.nonceStore.release(spent)
        let retry = try await fixture.providers.verify(idTokenCredential(provider, token, rawNonce: rawNonce))
        #expect(retry.uid == first.uid)
        await #expect(throws: ProviderError.invalidCredential(.nonceReused)) {
            try await fixture.providers.verify(idTokenCredential(provider, token, rawNonce: rawNonce))
        }
        let withoutNonce = try await fixture.idToken(provider, ["sub": .string("retry-\(provider.rawValue)")])
        #expect(try await fixture.providers.verify(idTokenCredential(provider, withoutNonce)).spentNonce == nil)
    }

    @Test(arguments: tokenProviders)
    func tokenWithMatchingNonceIsAcceptedOnceAndItsReplayIsRefused(provider: ProviderName) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let rawNonce = UUID().uuidString
        let token = try await fixture.idToken(provider, ["sub": .string("user-\(provider.rawValue)"), "rawNonce": .string(rawNonce)])
        let identity = try await fixture.providers.verify(idTokenCredential(provider, token, rawNonce: rawNonce))
        #expect(identity.uid == "user-\(provider.rawValue)")
        await #expect(throws: ProviderError.invalidCredential(.nonceReused)) {
            try await fixture.providers.verify(idTokenCredential(provider, token, rawNonce: rawNonce))
        }
        // A fresh token carrying the same nonce is a replay of the same sign-in too.
        let second = try await fixture.idToken(provider, ["rawNonce": .string(rawNonce)])
        await #expect(throws: ProviderError.invalidCredential(.nonceReused)) {
            try await fixture.providers.verify(idTokenCredential(provider, second, rawNonce: rawNonce))
        }
    }

    @Test(arguments: tokenProviders)
    func tokenWithoutNonceIsAcceptedWithoutRawNonce(provider: ProviderName) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(provider, [:])
        let identity = try await fixture.providers.verify(idTokenCredential(provider, token))
        #expect(identity.provider == provider.rawValue)
        #expect(!identity.uid.isEmpty)
    }

    @Test(arguments: tokenProviders)
    func unknownKeyIDIsRefusedUntilTheKeySetIsRefetchedAfterTheCooldown(provider: ProviderName) async throws {
        let clock = ManualClock()
        try await DevIdPFixture.run(clock: clock) { fixture in
            _ = try await fixture.providers.verify(idTokenCredential(provider, try await fixture.idToken(provider)))
            let rotated = try await fixture.post("/\(provider.rawValue)/rotate-key")
            #expect(rotated.status == 200)
            let token = try await fixture.idToken(provider)
            // Within the cooldown of the first fetch the cache does not go back to the network.
            await #expect(throws: ProviderError.invalidCredential(.unknownKey)) {
                try await fixture.providers.verify(idTokenCredential(provider, token))
            }
            clock.advance(by: 31)
            let identity = try await fixture.providers.verify(idTokenCredential(provider, token))
            #expect(identity.provider == provider.rawValue)
        }
    }

    @Test(arguments: tokenProviders)
    func unreachableKeySetWithNothingCachedIsProviderUnavailable(provider: ProviderName) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(provider)
        let closed = try await closedLoopbackURL()
        var configuration = fixture.configuration
        configuration.apple.jwksURL = closed
        configuration.facebook.limitedLoginJWKSURL = closed
        configuration.google.jwksURL = closed
        let providers = try IdentityProviders(
            configuration: configuration, nonceStore: fixture.nonceStore)
        let error = await #expect(throws: ProviderError.providerUnavailable) {
            try await providers.verify(idTokenCredential(provider, token))
        }
        #expect(error?.problem.status == 503)
        #expect(error?.problem.headers["Retry-After"] != nil)
        #expect(error?.isRetryable == true)
    }
}

@Suite("Apple identity tokens")
struct AppleIdentityTokenTests {
    @Test func verifiedAppleIdentityCarriesEmailFlagsAndTheClientAssertedName() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let rawNonce = UUID().uuidString
        let token = try await fixture.idToken(.apple, [
            "sub": "001234.abcdef.0001", "email": "relay@privaterelay.appleid.com", "emailVerified": "true",
            "isPrivateEmail": "true", "realUserStatus": 2, "rawNonce": .string(rawNonce),
        ])
        let identity = try await fixture.providers.verify(.apple(
            identityToken: token, rawNonce: rawNonce, fullName: PersonName(givenName: "Ada", familyName: "Lovelace")))
        #expect(identity.uid == "001234.abcdef.0001")
        #expect(identity.credentialForm == .appleIdentityToken)
        #expect(identity.email == "relay@privaterelay.appleid.com")
        #expect(identity.isEmailVerified)
        #expect(identity.isPrivateEmail)
        #expect(identity.realUserStatus == 2)
        #expect(identity.displayName == "Ada Lovelace")
        #expect(identity.givenName == "Ada" && identity.familyName == "Lovelace")
        #expect(identity.isNameClientAsserted)
        #expect(!identity.isProfileClientAsserted)
        #expect(identity.audience == DevIdentityProvider.appleClientID)
        #expect(identity.rawClaims["sub"] == "001234.abcdef.0001")
        #expect(identity.tokenExpiresAt != nil)
    }

    @Test(arguments: [JSONValue.bool(false), .string("false")])
    func emailVerifiedFalseInEitherSpellingIsNotVerified(value: JSONValue) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(.apple, ["email": "a@example.com", "emailVerified": value])
        let identity = try await fixture.providers.verify(.apple(identityToken: token, rawNonce: nil, fullName: nil))
        #expect(!identity.isEmailVerified)
        #expect(!identity.isNameClientAsserted && identity.displayName == nil)
    }

    @Test func serverToServerNotificationWithEventsClaimIsNotASignIn() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(.apple, ["events": #"{"type":"email-disabled","sub":"x"}"#])
        await #expect(throws: ProviderError.invalidCredential(.eventsClaim)) {
            try await fixture.providers.verify(.apple(identityToken: token, rawNonce: nil, fullName: nil))
        }
    }

    @Test(arguments: [JSONValue.string("maybe"), .int(1)])
    func emailVerifiedOfAnotherShapeIsMalformed(value: JSONValue) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(.apple, ["email": "a@example.com", "emailVerified": value])
        await #expect(throws: ProviderError.invalidCredential(.malformed)) {
            try await fixture.providers.verify(.apple(identityToken: token, rawNonce: nil, fullName: nil))
        }
    }
}

@Suite("Google ID tokens")
struct GoogleIDTokenTests {
    @Test(arguments: ["https://accounts.google.com", "accounts.google.com"])
    func bothSpellingsOfGooglesIssuerAreAccepted(issuer: String) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(.google, [
            "iss": .string(issuer), "sub": "110000000000000000001", "email": "ada@gmail.com", "name": "Ada Lovelace",
            "givenName": "Ada", "familyName": "Lovelace", "picture": "https://lh3.googleusercontent.com/a/photo",
        ])
        let identity = try await fixture.providers.verify(.google(idToken: token, rawNonce: nil))
        #expect(identity.uid == "110000000000000000001")
        #expect(identity.email == "ada@gmail.com" && identity.isEmailVerified)
        #expect(identity.displayName == "Ada Lovelace" && !identity.isNameClientAsserted)
        #expect(identity.photoURL?.absoluteString == "https://lh3.googleusercontent.com/a/photo")
        #expect(identity.audience == DevIdentityProvider.googleClientID)
    }

    @Test func unverifiedGoogleEmailStaysUnverified() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(.google, ["email": "ada@example.com", "emailVerified": false])
        let identity = try await fixture.providers.verify(.google(idToken: token, rawNonce: nil))
        #expect(!identity.isEmailVerified)
    }
}

@Suite("Facebook Limited Login tokens")
struct FacebookLimitedLoginTests {
    @Test func limitedLoginIdentityKeepsProfileClaimsAndNeverVerifiesTheEmail() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let rawNonce = UUID().uuidString
        let token = try await fixture.idToken(.facebook, [
            "userId": "10215241773831025", "email": "ada@example.com", "name": "Ada Lovelace", "givenName": "Ada",
            "familyName": "Lovelace", "picture": "https://platform-lookaside.fbsbx.com/p.jpg", "rawNonce": .string(rawNonce),
        ])
        let identity = try await fixture.providers.verify(.facebookLimitedLogin(authenticationToken: token, rawNonce: rawNonce))
        #expect(identity.uid == "10215241773831025")
        #expect(identity.credentialForm == .facebookLimitedLogin)
        #expect(identity.email == "ada@example.com" && !identity.isEmailVerified)
        #expect(identity.displayName == "Ada Lovelace" && identity.givenName == "Ada" && identity.familyName == "Lovelace")
        #expect(identity.photoURL != nil)
        #expect(identity.audience == DevIdentityProvider.facebookAppID)
        #expect(identity.rawClaims["jti"] != nil)
    }

    @Test(arguments: [JSONValue.null, .string(""), .string(" \n ")])
    func limitedLoginTokenWithoutTokenIDIsRejected(jti: JSONValue) async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(.facebook, ["claims": ["jti": jti]])
        await #expect(throws: ProviderError.invalidCredential(.tokenID)) {
            try await fixture.providers.verify(.facebookLimitedLogin(authenticationToken: token, rawNonce: nil))
        }
    }

    @Test func tokenForAnotherFacebookAppIsRejected() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let token = try await fixture.idToken(.facebook, ["appId": "999"])
        await #expect(throws: ProviderError.invalidCredential(.audience)) {
            try await fixture.providers.verify(.facebookLimitedLogin(authenticationToken: token, rawNonce: nil))
        }
    }
}

/// A loopback URL where nothing listens any more.
func closedLoopbackURL() async throws -> URL {
    let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: Router())
    try server.start()
    let url = URL(string: "http://127.0.0.1:\(server.boundPort)/keys")!
    await server.shutdown()
    return url
}
