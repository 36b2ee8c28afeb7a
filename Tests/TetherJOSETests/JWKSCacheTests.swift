import Foundation
import Testing
import TetherTesting
import TetherCrypto
import TetherJOSE

@Suite("JWKS cache against a local HTTP server")
struct JWKSCacheTests {
    let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
    let first = try! JWK(material: .privateKey(TestKeys.ec), keyID: "key-1", algorithm: .es256)
    let second = try! JWK(material: .privateKey(PrivateKey.generate(.ecP256)), keyID: "key-2", algorithm: .es256)

    func makeCache(_ url: URL, maximumResponseBytes: Int = 256 * 1024) throws -> JWKSCache {
        try JWKSCache(configuration: .init(url: url, maximumResponseBytes: maximumResponseBytes), clock: clock)
    }

    func token(_ key: JWK, kid: String? = nil) throws -> String {
        let signer = try JWTSigner(key: JWK(material: key.material, keyID: kid ?? key.keyID, algorithm: .es256))
        return try signer.sign(claims: ["sub": "alice", "exp": .number(clock.now().timeIntervalSince1970 + 3600)])
    }

    var verifier: JWTVerifier { JWTVerifier(configuration: .init(allowedAlgorithms: [.es256]), clock: clock) }

    @Test func keyRotationIsPickedUpOnceTheCooldownHasPassed() async throws {
        try await JWKSEndpoint.run { endpoint in
            try endpoint.publish([first])
            let cache = try makeCache(endpoint.url)
            #expect(try await verifier.verify(token(first), keys: cache).key.keyID == "key-1")
            try endpoint.publish([second])
            clock.advance(by: 31)
            #expect(try await verifier.verify(token(second), keys: cache).key.keyID == "key-2")
            #expect(endpoint.requestCount == 2)
            // The rotated-out key is gone from the set, so its tokens now fail.
            await #expect(throws: JOSEError.unknownKey) { try await verifier.verify(token(first), keys: cache) }
        }
    }

    @Test func tokensWithMadeUpKidsCauseAtMostOneRefetchPerCooldown() async throws {
        try await JWKSEndpoint.run { endpoint in
            try endpoint.publish([first])
            let cache = try makeCache(endpoint.url)
            _ = try await cache.keySet()
            let verifier = verifier
            func flood() async throws -> Int {
                let tokens = try (0..<100).map { _ in try token(first, kid: "made-up-\(UUID().uuidString)") }
                return await withTaskGroup(of: Bool.self) { group in
                    for token in tokens {
                        group.addTask { (try? await verifier.verify(token, keys: cache)) == nil }
                    }
                    return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
            }
            #expect(try await flood() == 100)
            #expect(endpoint.requestCount == 1, "within the cooldown of the first fetch nothing is refetched")
            clock.advance(by: 31)
            #expect(try await flood() == 100)
            #expect(endpoint.requestCount == 2)
            clock.advance(by: 10)
            #expect(try await flood() == 100)
            #expect(endpoint.requestCount == 2)
            clock.advance(by: 25)
            #expect(try await flood() == 100)
            #expect(endpoint.requestCount == 3)
        }
    }

    @Test func failingEndpointKeepsServingTheLastGoodKeys() async throws {
        try await JWKSEndpoint.run { endpoint in
            try endpoint.publish([first])
            let cache = try makeCache(endpoint.url)
            _ = try await cache.keySet()
            for failure in [JWKSEndpoint.Response(status: 500, body: Array("oops".utf8)),
                            JWKSEndpoint.Response(body: Array("not json".utf8)),
                            JWKSEndpoint.Response(body: Array(#"{"keys":[]}"#.utf8))] {
                endpoint.respond(with: failure)
                clock.advance(by: 601)
                #expect(try await verifier.verify(token(first), keys: cache).key.keyID == "key-1")
                #expect(await cache.lastFetchError != nil)
            }
            #expect(endpoint.requestCount == 4)
            try endpoint.publish([first])
            clock.advance(by: 31)
            _ = try await cache.keySet()
            #expect(await cache.lastFetchError == nil)
        }
    }

    @Test func anUnknownKidWhileTheRefetchFailsIsUnavailableNotAnUnknownKey() async throws {
        try await JWKSEndpoint.run { endpoint in
            try endpoint.publish([first])
            let cache = try makeCache(endpoint.url)
            _ = try await cache.keySet()
            // The provider rotates to key-2, but its key set cannot be fetched right now.
            endpoint.respond(with: JWKSEndpoint.Response(status: 503, body: Array("down".utf8)))
            clock.advance(by: 31)
            await #expect(throws: JOSEError.unavailable) { try await verifier.verify(token(second), keys: cache) }
            // Within the cooldown no refetch is tried, and the answer stays "cannot tell".
            await #expect(throws: JOSEError.unavailable) { try await verifier.verify(token(second), keys: cache) }
            #expect(try await verifier.verify(token(first), keys: cache).key.keyID == "key-1", "known keys still verify")
            // Back: the new key verifies, and a kid that really is unknown is unknown again.
            try endpoint.publish([first, second])
            clock.advance(by: 31)
            #expect(try await verifier.verify(token(second), keys: cache).key.keyID == "key-2")
            clock.advance(by: 31)
            await #expect(throws: JOSEError.unknownKey) { try await verifier.verify(token(first, kid: "no-such-key"), keys: cache) }
        }
    }

    @Test func concurrentCallersShareASingleFetch() async throws {
        try await JWKSEndpoint.run { endpoint in
            try endpoint.publish([first])
            endpoint.respond(with: .init(body: try JWKSet(keys: [first.publicJWK!]).publicJSONObject().jsonBytes,
                                         delay: .milliseconds(300)))
            let cache = try makeCache(endpoint.url)
            let counts = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 { group.addTask { try await cache.keySet().keys.count } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(counts == Array(repeating: 1, count: 20))
            #expect(endpoint.requestCount == 1)
        }
    }

    @Test("The set stays fresh for max-age (clamped to 30 s…1 day) or else ten minutes", arguments: [
        ("public, max-age=120, must-revalidate", 120.0), ("", 600), ("max-age=1", 30), ("max-age=999999999", 86_400),
        ("max-age=-5", 600), ("no-cache", 600),
    ])
    func keySetStaysFreshForItsTimeToLive(cacheControl: String, timeToLive: TimeInterval) async throws {
        try await JWKSEndpoint.run { endpoint in
            try endpoint.publish([first], headers: cacheControl.isEmpty ? [:] : ["Cache-Control": cacheControl])
            let cache = try makeCache(endpoint.url)
            _ = try await cache.keySet()
            clock.advance(by: timeToLive - 1)
            _ = try await cache.keySet()
            #expect(endpoint.requestCount == 1)
            clock.advance(by: 2)
            _ = try await cache.keySet()
            #expect(endpoint.requestCount == 2)
        }
    }

    @Test func oversizedResponseIsRefused() async throws {
        try await JWKSEndpoint.run { endpoint in
            let padding = String(repeating: " ", count: 4096)
            endpoint.respond(with: .init(body: Array(#"{"keys":[]\#(padding)}"#.utf8)))
            let cache = try makeCache(endpoint.url, maximumResponseBytes: 1024)
            await #expect(throws: JOSEError.unavailable) { try await cache.keySet() }
            #expect(await cache.lastFetchError as? HTTPClientError == .responseTooLarge)
        }
    }

    @Test func unreachableEndpointWithoutCachedKeysIsUnavailable() async throws {
        let cache = try makeCache(try await JWKSEndpoint.closedURL())
        await #expect(throws: JOSEError.unavailable) { try await cache.keySet() }
        await #expect(throws: JOSEError.unavailable) { try await verifier.verify(token(first), keys: cache) }
        #expect(await cache.lastFetchError as? HTTPClientError == .transport)
    }

    @Test func plainHTTPIsRefusedExceptOnLoopback() throws {
        #expect(throws: JOSEError.unavailable) {
            try JWKSCache(configuration: .init(url: URL(string: "http://idp.example/jwks")!))
        }
        _ = try JWKSCache(configuration: .init(url: URL(string: "https://idp.example/jwks")!))
    }
}
