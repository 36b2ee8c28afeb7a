import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres
import TetherTesting

@Suite("Export: everything held about one person")
struct UserExportTests {
    @Test func anAdminExportsEveryEventWithoutSecretsAndAnErasedUserWithoutPersonalData() async throws {
        try await DevService.run { service in
            let keys = AdminKeyStore(database: service.admin)
            let admin = try await keys.create(role: .admin, name: "export", metadata: EventMetadata(actor: .operator("t"), surface: "cli")).secret
            let support = try await keys.create(role: .support, name: "look", metadata: EventMetadata(actor: .operator("t"), surface: "cli")).secret
            let ada = try await service.client.post("/v1/sign-up", json: ["email": "ada@example.com", "password": "a long password"])
                .decodeJSON(SignedIn.self)
            let bearer: KeyValuePairs<String, String> = ["Authorization": "Bearer \(ada.session.accessToken)"]
            _ = try await service.client.post("/v1/users/me/email-verification", headers: bearer, body: [])
            _ = try await service.client.post("/v1/email-verification/confirm", json: ["code": try await service.lastMail(to: "ada@example.com").code])
            _ = try await service.link(try await service.apple("apple-ada", email: "ada@example.com"), to: ada.session.accessToken)
            _ = try await service.client.get("/v1/admin/users/\(ada.user.id)", headers: ["Authorization": "Bearer \(support)"])

            #expect(try await service.client.get("/v1/admin/users/\(ada.user.id)/export", headers: ["Authorization": "Bearer \(support)"]).status == 403)
            let exported = try await service.client.get("/v1/admin/users/\(ada.user.id)/export", headers: ["Authorization": "Bearer \(admin)"])
            #expect(exported.status == 200)
            #expect(exported.headers["content-disposition"]?.contains("tether-user-\(ada.user.id).json") == true)
            guard case .object(let document) = try exported.decodeJSON(JSONValue.self), case .array(let events)? = document["events"],
                  case .object(let profile)? = document["profile"], case .object(let user)? = profile["user"] else {
                throw HarnessError("the export is not a document: \(exported.bodyText)")
            }
            #expect(document["erased"] == .bool(false))
            #expect(user["email"] == .string("ada@example.com"))
            let inLog: Int = try await service.admin.query("SELECT count(*)::int AS n FROM events WHERE user_id = \(ada.user.id)::uuid")[0].decode("n")
            #expect(events.count == inLog - 1, "every event about her before this export's own record")
            let types = events.compactMap { if case .object(let event) = $0, case .string(let type)? = event["type"] { type } else { nil } }
            #expect(types.contains("EmailCodeIssued") && types.contains("IdentityLinked") && types.contains("AdminUserViewed"))
            #expect(types.last == "AdminActionRequested", "the support key's refused export is recorded; this export's own record comes after it")
            for secret in ["passwordHash", "codeHash", "refreshTokenHash", "scrypt"] {
                #expect(!exported.bodyText.contains(secret), "\(secret) is not exported")
            }
            #expect(exported.bodyText.contains("apple-ada"), "decrypted payloads: the Apple uid")
            // Ids in payloads are written as the API writes them, in lowercase.
            let registered = events.first { if case .object(let event) = $0 { event["type"] == .string("UserRegistered") } else { false } }
            guard case .object(let first)? = registered, case .object(let data)? = first["data"] else { throw HarnessError("no UserRegistered") }
            #expect(data["userId"] == .string(ada.user.id), "\(data)")
            #expect(!exported.bodyText.contains(ada.user.id.uppercased()), "no id in uppercase")

            _ = try await service.client.send(
                "DELETE", "/v1/admin/users/\(ada.user.id)", fields: [("Authorization", "Bearer \(admin)"), ("Content-Type", "application/json")],
                body: Array(#"{"reason": "asked to be forgotten"}"#.utf8))
            let after = try await service.client.get("/v1/admin/users/\(ada.user.id)/export", headers: ["Authorization": "Bearer \(admin)"])
            #expect(after.status == 200)
            guard case .object(let erased) = try after.decodeJSON(JSONValue.self) else { throw HarnessError("no document") }
            #expect(erased["erased"] == .bool(true))
            #expect(erased["profile"] == .null)
            #expect(!after.bodyText.contains("ada@example.com") && !after.bodyText.contains("apple-ada"), "nothing personal is left")
            #expect(after.bodyText.contains("UserErased"))
            let unknown = UUID().uuidString.lowercased()
            for _ in 0..<2 {
                // The record of the first 404 names the id; the second ask is a 404 all the same.
                let nobody = try await service.client.get("/v1/admin/users/\(unknown)/export", headers: ["Authorization": "Bearer \(admin)"])
                #expect(nobody.status == 404, Comment(rawValue: nobody.bodyText))
            }
            let history = try await service.client.get("/v1/admin/users/\(unknown)/history", headers: ["Authorization": "Bearer \(admin)"])
            #expect(history.status == 404, Comment(rawValue: history.bodyText))
            for command in ["export", "history"] {
                let cli = try await TetherCommandLine.run([command, unknown], databaseURL: service.database.url)
                #expect(cli.status == 1 && cli.stderr.contains("no user has"), "\(command): \(cli.stdout) \(cli.stderr)")
            }

            let cli = try await TetherCommandLine.run(["export", ada.user.id], databaseURL: service.database.url)
            #expect(cli.status == 0, "\(cli.stderr)")
            #expect(try JSONDecoder().decode(JSONValue.self, from: Data(cli.stdout.utf8)) != .null)
            #expect(try await service.eventCount("UserDataExported", userId: ada.user.id) == 1, "the operator's export is in her history")
        }
    }
}
