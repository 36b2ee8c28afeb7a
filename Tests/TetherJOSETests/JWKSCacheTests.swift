import Foundation
import Testing
import TetherCrypto
import TetherJOSE

@Suite("JWKS cache against a local HTTP server")
final class JWKSCacheTests {
    let server: TestHTTPServer
    let clock = ManualClock()
    let first = try! JWK(material: .privateKey(TestKeys.ec), keyID: "key-1", algorithm: .es256)
    let second = try! JWK(material: .privateKey(PrivateKey.generate(.ecP256)), keyID: "key-2", algorithm: .es256)

    init() throws {
        server = try TestHTTPServer()
    }

    deinit {
        server.stop()
    }

    func publish(_ keys: [JWK], headers: [String: String] = [:]) throws {
        let body = try JWKSet(keys: keys.compactMap(\.publicJWK)).publicJSONObject().jsonBytes
        server.respond(with: .init(headers: headers, body: body))
    }

    func makeCache(maximumResponseBytes: Int = 256 * 1024) throws -> JWKSCache {
        try JWKSCache(configuration: .init(url: server.url, maximumResponseBytes: maximumResponseBytes), clock: clock)
    }

    func token(_ key: JWK, kid: String? = nil) throws -> String {
        let signer = try JWTSigner(key: JWK(material: key.material, keyID: kid ?? key.keyID, algorithm: .es256))
        return try signer.sign(claims: ["sub": "alice", "exp": .number(clock.now().timeIntervalSince1970 + 3600)])
    }

    var verifier: JWTVerifier { JWTVerifier(configuration: .init(allowedAlgorithms: [.es256]), clock: clock) }

    @Test func keyRotationIsPickedUpOnceTheCooldownHasPassed() async throws {
        try publish([first])
        let cache = try makeCache()
        #expect(try await verifier.verify(token(first), keys: cache).key.keyID == "key-1")
        try publish([second])
        clock.advance(by: 31)
        #expect(try await verifier.verify(token(second), keys: cache).key.keyID == "key-2")
        #expect(server.requestCount == 2)
        // The rotated-out key is gone from the set, so its tokens now fail.
        await #expect(throws: JOSEError.unknownKey) { try await verifier.verify(token(first), keys: cache) }
    }

    @Test func tokensWithMadeUpKidsCauseAtMostOneRefetchPerCooldown() async throws {
        try publish([first])
        let cache = try makeCache()
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
        #expect(server.requestCount == 1, "within the cooldown of the first fetch nothing is refetched")
        clock.advance(by: 31)
        #expect(try await flood() == 100)
        #expect(server.requestCount == 2)
        clock.advance(by: 10)
        #expect(try await flood() == 100)
        #expect(server.requestCount == 2)
        clock.advance(by: 25)
        #expect(try await flood() == 100)
        #expect(server.requestCount == 3)
    }

    @Test func failingEndpointKeepsServingTheLastGoodKeys() async throws {
        try publish([first])
        let cache = try makeCache()
        _ = try await cache.keySet()
        for failure in [TestHTTPServer.Response(status: 500, body: Array("oops".utf8)),
                        TestHTTPServer.Response(body: Array("not json".utf8)),
                        TestHTTPServer.Response(body: Array(#"{"keys":[]}"#.utf8))] {
            server.respond(with: failure)
            clock.advance(by: 601)
            #expect(try await verifier.verify(token(first), keys: cache).key.keyID == "key-1")
            #expect(await cache.lastFetchError != nil)
        }
        #expect(server.requestCount == 4)
        try publish([first])
        clock.advance(by: 31)
        _ = try await cache.keySet()
        #expect(await cache.lastFetchError == nil)
    }

    @Test func concurrentCallersShareASingleFetch() async throws {
        try publish([first])
        server.respond(with: .init(body: try JWKSet(keys: [first.publicJWK!]).publicJSONObject().jsonBytes, delay: 0.3))
        let cache = try makeCache()
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 { group.addTask { try await cache.keySet().keys.count } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(counts == Array(repeating: 1, count: 20))
        #expect(server.requestCount == 1)
    }

    @Test func cacheControlMaxAgeSetsTheTimeToLive() async throws {
        try publish([first], headers: ["Cache-Control": "public, max-age=120, must-revalidate"])
        let cache = try makeCache()
        _ = try await cache.keySet()
        clock.advance(by: 100)
        _ = try await cache.keySet()
        #expect(server.requestCount == 1)
        clock.advance(by: 21)
        _ = try await cache.keySet()
        #expect(server.requestCount == 2)
    }

    @Test func setWithoutMaxAgeStaysFreshForTenMinutes() async throws {
        try publish([first])
        let cache = try makeCache()
        _ = try await cache.keySet()
        clock.advance(by: 599)
        _ = try await cache.keySet()
        #expect(server.requestCount == 1)
        clock.advance(by: 2)
        _ = try await cache.keySet()
        #expect(server.requestCount == 2)
    }

    @Test func oversizedResponseIsRefused() async throws {
        let padding = String(repeating: " ", count: 4096)
        server.respond(with: .init(body: Array(#"{"keys":[]\#(padding)}"#.utf8)))
        let cache = try makeCache(maximumResponseBytes: 1024)
        await #expect(throws: JOSEError.unavailable) { try await cache.keySet() }
        #expect(await cache.lastFetchError as? HTTPClientError == .responseTooLarge)
    }

    @Test func unreachableEndpointWithoutCachedKeysIsUnavailable() async throws {
        server.stop()
        let cache = try makeCache()
        await #expect(throws: JOSEError.unavailable) { try await cache.keySet() }
        await #expect(throws: JOSEError.unavailable) { try await verifier.verify(token(first), keys: cache) }
    }

    @Test func plainHTTPIsRefusedExceptOnLoopback() throws {
        #expect(throws: JOSEError.unavailable) {
            try JWKSCache(configuration: .init(url: URL(string: "http://idp.example/jwks")!))
        }
        _ = try JWKSCache(configuration: .init(url: URL(string: "https://idp.example/jwks")!))
    }
}
