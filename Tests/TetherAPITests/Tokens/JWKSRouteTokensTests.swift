import Foundation
import Testing
import TetherAPI
import TetherHTTP
import TetherJOSE
import TetherTesting

@Suite("GET /.well-known/jwks.json over HTTP")
struct JWKSRouteTokensTests {
    /// Serves the JWKS route of `keys` on a free loopback port for the duration of `body`.
    private func withServer(keys: SigningKeyStore, _ body: (HTTPTestClient) async throws -> Void) async throws {
        var router = Router()
        registerJWKSRoute(on: &router, keys: keys)
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: router)
        try server.start()
        let client = HTTPTestClient(port: server.boundPort)
        do {
            try await body(client)
        } catch {
            await client.close()
            await server.shutdown()
            throw error
        }
        await client.close()
        await server.shutdown()
    }

    @Test func publishesTheSigningKeyWithoutPrivateMembersAndCacheableForFiveMinutes() async throws {
        let db = try await TokensDatabase.make()
        let keys = SigningKeyStore(client: db.client)
        let signing = try await keys.currentSigningKey()
        try await withServer(keys: keys) { client in
            let response = try await client.get("/.well-known/jwks.json")
            #expect(response.status == 200)
            #expect(response.headers["Cache-Control"] == "public, max-age=300")
            #expect(response.headers["Content-Type"] == "application/json")
            let document = try JOSEObject(parsing: response.body)
            let entries = try #require(document["keys"]?.arrayValue)
            #expect(entries.count == 1)
            let entry = try #require(entries.first?.objectValue)
            #expect(entry["kid"] == .string(signing.keyID))
            #expect(entry["kty"] == "EC")
            #expect(entry["crv"] == "P-256")
            #expect(entry["alg"] == "ES256")
            #expect(entry["use"] == "sig")
            #expect(entry["d"] == nil)
            // A verifier elsewhere can use the published set as it is.
            let set = try JWKSet(parsing: response.body, allowsSymmetricKeys: false)
            let token = try await AccessTokenIssuer(keys: keys).issue(userId: UUID(), sessionId: UUID(), authTime: Date(), amr: ["pwd"])
            let verifier = JWTVerifier(configuration: .init(allowedAlgorithms: [.es256], issuer: "tether", typeRequirement: .oneOf(["at+jwt"])))
            #expect(try verifier.verify(token.token, keys: set).claims.issuer == "tether")
        }
        try await db.close()
    }

    @Test func publishesTheSuccessorBeforeItSignsAndThePredecessorUntilItsTokensExpire() async throws {
        let db = try await TokensDatabase.make()
        let clock = ManualClock()
        let keys = SigningKeyStore(client: db.client, clock: clock)
        let first = try await keys.currentSigningKey()
        try await withServer(keys: keys) { client in
            func publishedIDs() async throws -> Set<String> {
                let response = try await client.get("/.well-known/jwks.json")
                #expect(response.status == 200)
                return Set(try JWKSet(parsing: response.body).keys.compactMap(\.keyID))
            }
            #expect(try await publishedIDs() == [first.keyID])
            clock.advance(by: keys.configuration.rotationInterval)
            let both = try await publishedIDs()
            #expect(both.count == 2 && both.contains(first.keyID))
            #expect(try await keys.currentSigningKey().keyID == first.keyID)
            clock.advance(by: keys.configuration.prepublicationInterval + keys.configuration.retention)
            let successor = try await keys.currentSigningKey().keyID
            #expect(successor != first.keyID)
            #expect(try await publishedIDs() == [successor])
        }
        try await db.close()
    }
}
