import Foundation
import Testing
import TetherAPI
import TetherCrypto
import TetherProviders

@Suite("Provider configuration from TETHER_* variables")
struct ProvidersConfigurationTests {
    @Test func withoutVariablesEveryProviderIsDisabledAndPointsAtProduction() throws {
        let configuration = try ProvidersConfiguration.fromEnvironment([:])
        #expect(!configuration.apple.isEnabled && !configuration.facebook.isEnabled && !configuration.google.isEnabled)
        #expect(configuration.apple.jwksURL.absoluteString == "https://appleid.apple.com/auth/keys")
        #expect(configuration.apple.issuer == "https://appleid.apple.com")
        #expect(configuration.facebook.graphURL.absoluteString == "https://graph.facebook.com/v21.0")
        #expect(configuration.facebook.limitedLoginJWKSURL.absoluteString == "https://limited.facebook.com/.well-known/oauth/openid/jwks/")
        #expect(configuration.facebook.limitedLoginIssuer == "https://www.facebook.com")
        #expect(configuration.google.jwksURL.absoluteString == "https://www.googleapis.com/oauth2/v3/certs")
        #expect(configuration.google.issuer == "https://accounts.google.com")
        #expect(configuration.facebook.appSecret == nil)
    }

    @Test func appleClientSecretSettingsComeTogetherWithAP256Key() throws {
        #expect(try ProvidersConfiguration.fromEnvironment([:]).appleGrants == nil)
        #expect {
            try ProvidersConfiguration.fromEnvironment(["TETHER_APPLE_TEAM_ID": "ABCDE12345", "TETHER_APPLE_KEY_ID": "KEY123"])
        } throws: { ($0 as? ProvidersConfiguration.Invalid)?.variable == "TETHER_APPLE_PRIVATE_KEY_FILE" }
        let directory = FileManager.default.temporaryDirectory
        let rsa = directory.appendingPathComponent("tether-rsa-\(UUID().uuidString).p8").path
        let ec = directory.appendingPathComponent("tether-ec-\(UUID().uuidString).p8").path
        defer { [rsa, ec].forEach { try? FileManager.default.removeItem(atPath: $0) } }
        try PrivateKey.generate(.rsa).pemEncoded().write(toFile: rsa, atomically: true, encoding: .utf8)
        try PrivateKey.generate(.ecP256).pemEncoded().write(toFile: ec, atomically: true, encoding: .utf8)
        let given = ["TETHER_APPLE_TEAM_ID": "ABCDE12345", "TETHER_APPLE_KEY_ID": "KEY123"]
        #expect {
            try ProvidersConfiguration.fromEnvironment(given.merging(["TETHER_APPLE_PRIVATE_KEY_FILE": rsa]) { $1 })
        } throws: { ($0 as? ProvidersConfiguration.Invalid)?.variable == "TETHER_APPLE_PRIVATE_KEY_FILE" }
        #expect {
            try ProvidersConfiguration.fromEnvironment(given.merging([
                "TETHER_APPLE_PRIVATE_KEY_FILE": ec, "TETHER_APPLE_REVOKE_URL": "http://apple.example/auth/revoke",
            ]) { $1 })
        } throws: { ($0 as? ProvidersConfiguration.Invalid)?.variable == "TETHER_APPLE_REVOKE_URL" }
        let grants = try #require(try ProvidersConfiguration.fromEnvironment(given.merging(["TETHER_APPLE_PRIVATE_KEY_FILE": ec]) { $1 }).appleGrants)
        #expect(grants.teamID == "ABCDE12345" && grants.keyID == "KEY123")
        #expect(grants.tokenURL.absoluteString == "https://appleid.apple.com/auth/token")
        #expect(grants.revokeURL.absoluteString == "https://appleid.apple.com/auth/revoke")
    }

    @Test func listsAreCommaSeparatedAndTrimmed() throws {
        let configuration = try ProvidersConfiguration.fromEnvironment([
            "TETHER_APPLE_CLIENT_IDS": " com.example.app , com.example.web,",
            "TETHER_FACEBOOK_APP_IDS": "123", "TETHER_FACEBOOK_APP_SECRET": "s3cret",
            "TETHER_GOOGLE_CLIENT_IDS": "a.apps.googleusercontent.com",
        ])
        #expect(configuration.apple.clientIDs == ["com.example.app", "com.example.web"])
        #expect(configuration.facebook.appIDs == ["123"] && configuration.facebook.appSecret == "s3cret")
        #expect(configuration.google.clientIDs == ["a.apps.googleusercontent.com"])
    }

    @Test(arguments: [
        ("TETHER_APPLE_JWKS_URL", "appleid.apple.com/auth/keys", "TETHER_APPLE_JWKS_URL: not an http(s) URL"),
        ("TETHER_GOOGLE_JWKS_URL", "ftp://example.com/certs", "TETHER_GOOGLE_JWKS_URL: not an http(s) URL"),
        ("TETHER_FACEBOOK_GRAPH_URL", "http://graph.example.com/v21.0",
         "TETHER_FACEBOOK_GRAPH_URL: must be https (plain http only on loopback)"),
        ("TETHER_APPLE_CLIENT_IDS", " , ", "TETHER_APPLE_CLIENT_IDS: empty list; give comma-separated ids, or unset it to disable the provider"),
        ("TETHER_FACEBOOK_APP_SECRET", "  ", "TETHER_FACEBOOK_APP_SECRET: empty; unset it or give the secret"),
        ("TETHER_GOOGLE_ISSUER", "https://accounts google.com", "TETHER_GOOGLE_ISSUER: must not contain spaces"),
        // A port no request can reach: every sign-in would answer 503, with nothing naming the setting.
        ("TETHER_APPLE_JWKS_URL", "https://appleid.apple.com:99999/auth/keys", "TETHER_APPLE_JWKS_URL: the port must be from 1 to 65535"),
        ("TETHER_GOOGLE_JWKS_URL", "https://x.example:0/keys", "TETHER_GOOGLE_JWKS_URL: the port must be from 1 to 65535"),
        // Refused without the Apple key's variables too (they were read only with them).
        ("TETHER_APPLE_TOKEN_URL", "notaurl", "TETHER_APPLE_TOKEN_URL: not an http(s) URL"),
        ("TETHER_APPLE_REVOKE_URL", "notaurl", "TETHER_APPLE_REVOKE_URL: not an http(s) URL"),
    ])
    func unusableValueFailsWithOneLineNamingTheVariable(variable: String, value: String, message: String) {
        let error = #expect(throws: ProvidersConfiguration.Invalid.self) {
            try ProvidersConfiguration.fromEnvironment([variable: value])
        }
        #expect(error?.variable == variable)
        #expect(error?.description == message)
        #expect(error?.description.contains("\n") == false)
    }

    @Test func configurationBuiltInCodeWithAPlainHTTPKeySetIsRefusedNamingTheVariable() {
        var configuration = ProvidersConfiguration()
        configuration.google.clientIDs = ["client"]
        configuration.google.jwksURL = URL(string: "http://keys.example.com/certs")!
        let error = #expect(throws: ProvidersConfiguration.Invalid.self) {
            try IdentityProviders(configuration: configuration, nonceStore: UnreachableNonceStore())
        }
        #expect(error?.variable == "TETHER_GOOGLE_JWKS_URL")
    }

    @Test func plainHTTPIsRefusedOnOtherLoopbackAddressesLikeTheKeySetCacheDoes() {
        #expect(throws: ProvidersConfiguration.Invalid.self) {
            try ProvidersConfiguration.fromEnvironment(["TETHER_APPLE_JWKS_URL": "http://127.0.0.2/keys"])
        }
    }

    @Test func plainHTTPIsAcceptedOnLoopback() throws {
        let configuration = try ProvidersConfiguration.fromEnvironment(["TETHER_APPLE_JWKS_URL": "http://127.0.0.1:9999/keys"])
        #expect(configuration.apple.jwksURL.port == 9999)
    }

    @Test func devIdentityProviderConfigurationEnablesEveryProviderAndKeepsRealIssuers() throws {
        let base = URL(string: "http://127.0.0.1:8080/dev-idp/")!
        let variables = DevIdentityProvider.configuration(baseURL: base)
        let configuration = try ProvidersConfiguration.fromEnvironment(variables)
        #expect(configuration.apple.isEnabled && configuration.facebook.isEnabled && configuration.google.isEnabled)
        #expect(configuration.apple.jwksURL.absoluteString == "http://127.0.0.1:8080/dev-idp/apple/auth/keys")
        #expect(configuration.facebook.graphURL.absoluteString == "http://127.0.0.1:8080/dev-idp/facebook/graph")
        #expect(configuration.facebook.limitedLoginJWKSURL.absoluteString == "http://127.0.0.1:8080/dev-idp/facebook/jwks")
        #expect(configuration.google.jwksURL.absoluteString == "http://127.0.0.1:8080/dev-idp/google/certs")
        #expect(configuration.apple.issuer == ProvidersConfiguration().apple.issuer)
        #expect(variables.keys.allSatisfy { $0.hasPrefix("TETHER_") })
    }

    @Test(arguments: [
        ProviderCredential.apple(identityToken: "x", rawNonce: nil, fullName: nil), .facebookAccessToken("x"),
        .google(idToken: "x", rawNonce: nil), .password(email: "a@example.com", password: "x"),
    ])
    func credentialOfAnUnconfiguredProviderIsUnsupported(credential: ProviderCredential) async throws {
        let providers = try IdentityProviders(
            configuration: ProvidersConfiguration(), nonceStore: UnreachableNonceStore())
        // Anonymous users need no configuration: they are on unless TETHER_ANONYMOUS_USERS=off.
        #expect(providers.enabledProviders == [.anonymous])
        let error = await #expect(throws: ProviderError.unsupportedProvider) { try await providers.verify(credential) }
        #expect(error?.problem.status == 400)
        #expect(error?.provider == credential.provider.rawValue)
    }
}

extension ProvidersConfigurationTests {
    @Test func anonymousUsersAreOnUnlessTurnedOffAndAnOddValueIsRefused() async throws {
        let on = try IdentityProviders(configuration: ProvidersConfiguration.fromEnvironment([:]), nonceStore: UnreachableNonceStore())
        let identity = try await on.verify(.anonymous(id: nil))
        #expect(identity.provider == "anonymous")
        #expect(identity.uid.count == 36)
        #expect(try await on.verify(.anonymous(id: nil)).uid != identity.uid, "each anonymous sign-in without an id is a new user")
        await #expect(throws: ProviderError.self) { try await on.verify(.anonymous(id: "short")) }

        let off = try IdentityProviders(
            configuration: ProvidersConfiguration.fromEnvironment(["TETHER_ANONYMOUS_USERS": "off"]), nonceStore: UnreachableNonceStore())
        #expect(off.enabledProviders.isEmpty)
        await #expect(throws: ProviderError.unsupportedProvider) { try await off.verify(.anonymous(id: nil)) }
        #expect(throws: ProvidersConfiguration.Invalid.self) {
            try ProvidersConfiguration.fromEnvironment(["TETHER_ANONYMOUS_USERS": "maybe"])
        }
    }
}

import TetherCore

/// A nonce store for providers that must never reach it: every call is a test failure.
struct UnreachableNonceStore: NonceStore {
    func consume(_ nonce: UsedNonce, now: Date) async throws -> NonceConsumption {
        Issue.record("a disabled provider consumed a nonce")
        return .alreadyUsed
    }

    func release(_ nonce: UsedNonce) async throws {
        Issue.record("a disabled provider released a nonce")
    }
}
