import TetherCore
import Foundation
import Testing
import TetherAPI
import TetherHTTP
import TetherProviders

@Suite("Credentials decoded from request JSON")
struct ProviderCredentialTests {
    @Test func everyShapeOfAPIMdDecodes() throws {
        #expect(try ProviderCredential(provider: "apple", credential: [
            "identityToken": "t", "rawNonce": "n", "fullName": ["givenName": "Ada", "familyName": nil],
        ]) == .apple(identityToken: "t", rawNonce: "n", fullName: PersonName(givenName: "Ada")))
        #expect(try ProviderCredential(provider: "facebook", credential: ["accessToken": "t"]) == .facebookAccessToken("t"))
        #expect(try ProviderCredential(provider: "facebook", credential: ["authenticationToken": "t", "rawNonce": "n"])
            == .facebookLimitedLogin(authenticationToken: "t", rawNonce: "n"))
        let sessionInfo = try ProviderCredential(provider: "facebook", credential: [
            "sessionInfoToken": "t",
            "profile": ["id": "42", "name": "Ada", "first_name": "Ada", "picture": ["data": ["url": "https://example.com/p.jpg"]]],
        ])
        guard case .facebookSessionInfo("t", let profile) = sessionInfo else { Issue.record("\(sessionInfo)"); return }
        #expect(profile.id == "42" && profile.firstName == "Ada" && profile.pictureURL?.host == "example.com")
        #expect(profile.raw["name"] == "Ada")
        #expect(try ProviderCredential(provider: "google", credential: ["idToken": "t"]) == .google(idToken: "t", rawNonce: nil))
        #expect(try ProviderCredential(provider: "password", credential: ["email": " ada@example.com ", "password": " pw "])
            == .password(email: "ada@example.com", password: " pw "))
    }

    static let malformed: [(provider: String, body: JSONValue, pointer: String)] = [
        ("apple", [:], "/credential/identityToken"),
        ("apple", ["identityToken": 42], "/credential/identityToken"),
        ("apple", ["identityToken": "t", "rawNonce": ""], "/credential/rawNonce"),
        ("apple", ["identityToken": "t", "fullName": "Ada"], "/credential/fullName"),
        ("google", ["idToken": "  "], "/credential/idToken"),
        ("facebook", ["accessToken": "a", "authenticationToken": "b"], "/credential"),
        ("facebook", ["rawNonce": "n"], "/credential"),
        ("facebook", ["sessionInfoToken": "t"], "/credential/profile"),
        ("facebook", ["sessionInfoToken": "t", "profile": ["name": "x"]], "/credential/profile/id"),
        ("password", ["email": "not-an-email", "password": "x"], "/credential/email"),
        ("password", ["email": "a@example.com"], "/credential/password"),
        ("google", "token", "/credential"),
    ]

    @Test(arguments: malformed)
    func malformedCredentialIsAnInvalidRequestPointingAtTheMember(provider: String, body: JSONValue, pointer: String) {
        let error = #expect(throws: ProviderError.invalidRequest("")) {
            try ProviderCredential(provider: provider, credential: body)
        }
        #expect(error?.pointer == pointer)
        #expect(error?.problem.status == 400)
        #expect(error?.problem.code == "invalid_request")
        #expect(error?.problem.extensions["pointer"] == .string(pointer))
    }

    @Test func unknownProviderIsUnsupported() {
        let error = #expect(throws: ProviderError.unsupportedProvider) {
            try ProviderCredential(provider: "myspace", credential: ["token": "t"])
        }
        #expect(error?.provider == "myspace")
    }

    @Test func tokenLongerThanTheLimitIsRefusedBeforeParsing() {
        let long = String(repeating: "a", count: ProviderCredential.maximumFieldLength + 1)
        #expect(throws: ProviderError.invalidRequest("")) {
            try ProviderCredential(provider: "google", credential: ["idToken": .string(long)])
        }
    }

    @Test func credentialsDescribeThemselvesWithoutSecrets() throws {
        let credentials: [ProviderCredential] = [
            .apple(identityToken: "secret-token", rawNonce: "secret-nonce", fullName: nil),
            .facebookAccessToken("secret-token"), .password(email: "ada@example.com", password: "secret-password"),
    ]
        for credential in credentials {
            #expect(!"\(credential)".contains("secret"))
        }
    }

    @Test func credentialDecodesFromJSONText() throws {
        let credential = try ProviderCredential(provider: "google", json: Array(#"{"idToken":"t","rawNonce":"n"}"#.utf8))
        #expect(credential == .google(idToken: "t", rawNonce: "n"))
        #expect(throws: ProviderError.invalidRequest("")) { try ProviderCredential(provider: "google", json: Array("{".utf8)) }
    }
}

@Suite("Provider errors as problem details")
struct ProviderErrorTests {
    @Test func eachErrorMapsToItsStatusAndStableCode() {
        let cases: [(ProviderError, Int, String)] = [
            (.invalidCredential(.audience), 401, "invalid_credential"), (.unsupportedProvider, 400, "unsupported_provider"),
            (.providerUnavailable, 503, "provider_unavailable"), (.invalidRequest("x"), 400, "invalid_request"),
    ]
        for (error, status, code) in cases {
            #expect(error.problem.status == status)
            #expect(error.problem.code == code)
        }
    }

    @Test func internalDetailsNeverReachTheClient() {
        let error = ProviderError.providerUnavailable.with(provider: "google")
            .with(detail: "JWKS endpoint http://10.0.0.7/keys answered 500")
        #expect(!(error.problem.detail ?? "").contains("10.0.0.7"))
        #expect(error.problem.extensions["retryable"] == true)
        #expect(error.problem.extensions["provider"] == "google")
        #expect("\(error)".contains("10.0.0.7"), "logs keep the detail")
    }

    @Test func equalityIgnoresDetailAndProvider() {
        #expect(ProviderError.invalidCredential(.expired).with(detail: "a") == ProviderError.invalidCredential(.expired).with(provider: "apple"))
        #expect(ProviderError.invalidCredential(.expired) != ProviderError.invalidCredential(.issuer))
    }
}
