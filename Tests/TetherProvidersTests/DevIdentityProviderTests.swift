import Foundation
import Synchronization
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherProviders

@Suite("The dev identity provider")
struct DevIdentityProviderTests {
    private func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("tether-dev-idp-\(UUID().uuidString)")
    }

    private func keyIDs(_ devIdP: DevIdentityProvider) async throws -> [String] {
        let router = devIdP.routes(baseURL: URL(string: "http://127.0.0.1:8080/dev-idp")!)
        var kids: [String] = []
        for path in ["/apple/auth/keys", "/facebook/jwks", "/google/certs"] {
            let response = try await router.respond(to: HTTPRequest(method: "GET", target: path))
            let set = try JSONDecoder().decode([String: [[String: String]]].self, from: Data(response.body))
            kids += set["keys"]!.map { $0["kid"]! }
            #expect(set["keys"]!.allSatisfy { $0["d"] == nil && $0["alg"] == "RS256" }, "only public RS256 keys are published")
        }
        return kids
    }

    @Test func keysAreMadeOnFirstStartKeptPrivatelyAndReusedAfterARestart() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try await keyIDs(DevIdentityProvider(keyDirectory: directory))
        for provider in ["apple", "facebook", "google"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("\(provider).pem").path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        }
        #expect(try await keyIDs(DevIdentityProvider(keyDirectory: directory)) == first)
        #expect(Set(first).count == 3)
    }

    /// Two `tether dev`s of one checkout starting at once (`make test` runs schemathesis beside the soak): each
    /// makes its keys, the first written stays, and the other uses it instead of failing or keeping its own.
    @Test func devIdentityProvidersStartingAtOnceOnOneDirectoryShareTheFirstKeysWritten() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // On threads of their own, all started before any has made its first key (a key takes tens of milliseconds):
        // tasks would share the two threads of the concurrency pool with the other tests.
        let made = Mutex<[Result<DevIdentityProvider, any Error>]>([])
        let group = DispatchGroup()
        for _ in 0..<6 {
            group.enter()
            Thread {
                defer { group.leave() }
                let devIdP = Result { try DevIdentityProvider(keyDirectory: directory) }
                made.withLock { $0.append(devIdP) }
            }.start()
        }
        await withCheckedContinuation { continuation in group.notify(queue: .global()) { continuation.resume() } }
        var started: [[String]] = []
        for devIdP in made.withLock({ $0 }) { started.append(try await keyIDs(try devIdP.get())) }
        #expect(started.count == 6)
        #expect(Set(started).count == 1, "every instance signs with the keys on disk: \(started)")
        #expect(try await keyIDs(DevIdentityProvider(keyDirectory: directory)) == started[0])
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(left == ["apple.pem", "facebook.pem", "google.pem"], "no temporary file is left")
    }

    @Test func aRotatedKeyReplacesTheOneOnDiskForTheNextStart() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let devIdP = try DevIdentityProvider(keyDirectory: directory)
        let rotated = try await devIdP.routes(baseURL: URL(string: "http://127.0.0.1/dev-idp")!)
            .respond(to: HTTPRequest(method: "POST", target: "/google/rotate-key"))
        let kid = try JSONDecoder().decode([String: String].self, from: Data(rotated.body))["kid"]!
        let restarted = try await keyIDs(DevIdentityProvider(keyDirectory: directory))
        #expect(restarted.contains(kid))
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("google.pem").path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).count == 3, "no temporary file is left")
    }

    @Test func withoutADirectoryEveryInstanceHasFreshKeys() async throws {
        let first = try await keyIDs(DevIdentityProvider(keyDirectory: nil))
        let second = try await keyIDs(DevIdentityProvider(keyDirectory: nil))
        #expect(Set(first).isDisjoint(with: second))
    }

    @Test func rotationKeepsThePreviousKeyPublished() async throws {
        let devIdP = try DevIdentityProvider(keyDirectory: nil)
        let router = devIdP.routes(baseURL: URL(string: "http://127.0.0.1/dev-idp")!)
        let before = try await keyIDs(devIdP)
        let rotated = try await router.respond(to: HTTPRequest(method: "POST", target: "/google/rotate-key"))
        let kid = try JSONDecoder().decode([String: String].self, from: Data(rotated.body))["kid"]!
        let after = try await keyIDs(devIdP)
        #expect(after.contains(kid))
        #expect(Set(before).isSubset(of: Set(after)))
    }

    @Test func smsOutboxShowsSentMessagesByNumberAndCanBeEmptied() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let number = "+1555\(Int.random(in: 1_000_000...9_999_999))"
        try await fixture.devIdP.smsOutbox.send(SMSMessage(phoneNumber: number, body: "Your Tether code is 123456", code: "123456"))
        let response = try await fixture.get("/sms?phoneNumber=%2B\(number.dropFirst())")
        #expect(response.status == 200)
        struct Outbox: Decodable { struct Message: Decodable { var phoneNumber: String; var code: String?; var body: String }
            var messages: [Message] }
        let outbox = try response.decodeJSON(Outbox.self)
        #expect(outbox.messages.map(\.phoneNumber) == [number])
        #expect(outbox.messages.first?.code == "123456")
    }

    @Test func outboxKeepsOnlyTheMostRecentMessages() async throws {
        let outbox = DevSMSOutbox(capacity: 2)
        for code in ["1", "2", "3"] { try await outbox.send(SMSMessage(phoneNumber: "+1", body: code, code: code)) }
        #expect(outbox.messages().map(\.code) == ["2", "3"])
        outbox.removeAll()
        #expect(outbox.messages().isEmpty)
    }

    @Test func discoveryDocumentTellsANewcomerWhereEverythingIs() async throws {
        let devIdP = try DevIdentityProvider(keyDirectory: nil)
        let base = URL(string: "http://127.0.0.1:8080/dev-idp")!
        let response = try await devIdP.routes(baseURL: base).respond(to: HTTPRequest(method: "GET", target: "/"))
        let document = try JSONDecoder().decode([String: JSONValue].self, from: Data(response.body))
        #expect(document["apple"] == [
            "issuer": "https://appleid.apple.com", "audience": .string(DevIdentityProvider.appleClientID),
            "mint": "POST http://127.0.0.1:8080/dev-idp/apple/token", "jwksUrl": "http://127.0.0.1:8080/dev-idp/apple/auth/keys",
        ])
        #expect(document["environment"] == .object(DevIdentityProvider.configuration(baseURL: base).mapValues(JSONValue.string)))
    }

    @Test func mintingWithAnEmptyBodyGivesAValidAppleToken() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let response = try await HTTPTestClient(port: fixture.server.boundPort).post("/dev-idp/apple/token", body: [])
        #expect(response.status == 200)
        let token = try response.decodeJSON([String: String].self)["identityToken"]!
        let identity = try await fixture.providers.verify(.apple(identityToken: token, rawNonce: nil, fullName: nil))
        #expect(!identity.uid.isEmpty)
    }

    @Test func mintRequestOfTheWrongShapeIsAnInvalidRequest() async throws {
        let fixture = try await DevIdPFixture.shared.get()
        let response = try await fixture.post("/google/token", ["forge": "gently"])
        #expect(response.status == 400)
        let missingUser = try await fixture.post("/facebook/access-token", [:])
        #expect(missingUser.status == 400)
        #expect(missingUser.bodyText.contains("userId"))
    }
}

import TetherTesting
