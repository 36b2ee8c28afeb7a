import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherJOSE
import TetherTesting

/// The feed's events against `schema/events/<type>.json`, one file per public type.
@Suite("Public event schema files")
struct PublicEventSchemaTests {
    private static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("schema/events")

    /// The top-level and `data` members a type's schema allows, and those it requires.
    private struct Shape {
        var members: Set<String>
        var required: Set<String>
        var dataMembers: Set<String>
        var dataRequired: Set<String>
    }

    private func shape(_ type: String) throws -> Shape {
        let value = try JSONValue(parsing: Array(try Data(contentsOf: Self.directory.appendingPathComponent("\(type).json"))))
        guard case .object(let schema) = value, case .object(let properties)? = schema["properties"],
              case .object(let data)? = properties["data"], case .object(let dataProperties)? = data["properties"] else {
            throw HarnessError("schema/events/\(type).json has no properties.data.properties")
        }
        func strings(_ value: JSONValue?) -> Set<String> {
            guard case .array(let items)? = value else { return [] }
            return Set(items.compactMap { if case .string(let text) = $0 { text } else { nil } })
        }
        return Shape(members: Set(properties.keys), required: strings(schema["required"]), dataMembers: Set(dataProperties.keys),
                     dataRequired: strings(data["required"]))
    }

    @Test func everyPublicTypeHasItsFileAndNoFileIsLeftOver() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).filter { $0.hasSuffix(".json") }
        #expect(Set(files.map { String($0.dropLast(5)) }) == Set(PublicEvent.types))
        for type in PublicEvent.types {
            #expect(EventFeed.internalTypes(for: [type])?.isEmpty == false, "\(type) has an internal event behind it")
        }
    }

    @Test func theEventsOfTheFeedMatchTheirSchemas() async throws {
        try await DevService.run { service in
            let key = try await AdminKeyStore(database: service.admin).create(
                role: .admin, name: "schema", metadata: EventMetadata(actor: .operator("tester"), surface: "cli")).secret
            let auth = ["Authorization": "Bearer \(key)"]
            let ada = try await service.client.post("/v1/sign-up", json: ["email": "ada@example.com", "password": "a long password"])
                .decodeJSON(SignedIn.self)
            let bearer: KeyValuePairs<String, String> = ["Authorization": "Bearer \(ada.session.accessToken)"]
            _ = try await service.client.post("/v1/users/me/email-verification", headers: bearer, body: [])
            _ = try await service.client.post("/v1/email-verification/confirm", json: ["code": try await service.lastMail(to: "ada@example.com").code])
            _ = try await service.client.post("/v1/users/me/email", headers: bearer, json: ["email": "ada@new.example"])
            _ = try await service.client.post("/v1/email-verification/confirm", json: ["code": try await service.lastMail(to: "ada@new.example").code])
            // The change ended every session: Ada signs in again under her new address.
            let again = try await service.signedIn(service.password("ada@new.example", "a long password"))
            let signedIn: KeyValuePairs<String, String> = ["Authorization": "Bearer \(again.session.accessToken)"]
            _ = try await service.link(try await service.apple("apple-ada", email: "ada@new.example"), to: again.session.accessToken)
            _ = try await service.client.send("DELETE", "/v1/users/me/identities/apple", fields: Array(signedIn.map { ($0.key, $0.value) }), body: [])
            _ = try await service.client.post("/v1/sign-out", headers: signedIn, body: [])
            for action in ["disable", "enable", "revoke-sessions"] {
                _ = try await service.client.send(
                    "POST", "/v1/admin/users/\(ada.user.id)/\(action)", fields: [("Authorization", "Bearer \(key)"), ("Content-Type", "application/json")],
                    body: Array(#"{"reason": "schema test"}"#.utf8))
            }
            _ = try await service.client.send(
                "DELETE", "/v1/admin/users/\(ada.user.id)", fields: [("Authorization", "Bearer \(key)"), ("Content-Type", "application/json")],
                body: Array(#"{"reason": "schema test"}"#.utf8))
            let page = try await service.client.get("/v1/admin/events?limit=500", headers: KeyValuePairs(dictionaryLiteral: auth.first!))
            guard case .object(let body) = try page.decodeJSON(JSONValue.self), case .array(let events)? = body["events"] else {
                throw HarnessError("the feed answered \(page.bodyText)")
            }
            var seen: Set<String> = []
            for case .object(let event) in events {
                guard case .string(let type)? = event["type"], case .object(let data)? = event["data"] else {
                    Issue.record("an event without type or data: \(event)")
                    continue
                }
                seen.insert(type)
                let shape = try shape(type)
                #expect(Set(event.keys) == shape.members, "\(type): \(event.keys.sorted())")
                #expect(shape.required.isSubset(of: event.keys), "\(type)")
                #expect(Set(data.keys).isSubset(of: shape.dataMembers), "\(type) data: \(data.keys.sorted()) against \(shape.dataMembers.sorted())")
                #expect(shape.dataRequired.isSubset(of: data.keys), "\(type) data lacks \(shape.dataRequired.subtracting(data.keys).sorted())")
            }
            #expect(seen.isSuperset(of: [
                "user.created", "identity.linked", "identity.unlinked", "password.changed", "session.started", "session.ended",
                "sessions.revoked", "email.verified", "user.updated", "user.disabled", "user.enabled", "user.erased",
            ]), "\(seen.sorted())")
        }
    }
}
