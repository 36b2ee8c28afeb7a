import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherPostgres
import TetherTesting

@Suite("The master key on a running service: dumps, checks, serve's refusal")
struct MasterKeyServiceTests {
    private func keyFile() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tether-master-\(UUID().uuidString).key").path
        _ = try MasterKey.create(at: path)
        return path
    }

    @Test func aDumpWithoutTheKeyFileHoldsNoUsableKeyAndTheLogStaysSealed() async throws {
        let path = try keyFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await DevService.run(settings: ["TETHER_MASTER_KEY_FILE": path]) { service in
            let signedUp = try await service.client.post(
                "/v1/sign-up", json: ["email": "dora@example.com", "password": "a long password", "displayName": "Dora Explorer"])
            #expect(signedUp.status == 201)
            let user = try signedUp.decodeJSON(SignedIn.self).user.id
            let stored: [UInt8] = try #require(try await service.admin.query(
                "SELECT key FROM personal_data_keys WHERE user_id = \(user)::uuid")[0].decode("key", as: [UInt8]?.self))
            #expect(MasterKeyRing.isWrapped(stored), "the key is stored wrapped")
            let key = try MasterKeyRing(current: try MasterKey(file: path)).unwrap(stored, context: PersonalDataVault.wrappingContext(UUID(uuidString: user)!))
            #expect(try await service.me(try signedUp.decodeJSON(SignedIn.self).session.accessToken).bodyText.contains("dora@example.com"),
                    "the service reads her data")

            let text = try service.dump()
            #expect(text.contains("personal_data_keys"))
            #expect(!text.contains(key.hexString), "the dump holds the wrapped key only")
            // What the log says is sealed, and its key wrapped; so are the read models (ReadModelSealTests, and below).
            let events = try await service.admin.query("SELECT count(*)::int AS n FROM events WHERE data::text LIKE '%Dora%'")[0].decode("n", as: Int.self)
            #expect(events == 0)
            await #expect(throws: (any Error).self, "without the master key the log's personal data cannot be opened") {
                _ = try await PostgresEventStore(client: service.admin).readUser(UUID(uuidString: user)!)
            }

            // The other stored secrets are wrapped too: the access-token signing key, a webhook's secret.
            let pem: String = try await service.admin.query("SELECT private_key_pem FROM signing_keys LIMIT 1")[0].decode("private_key_pem")
            #expect(pem.hasPrefix("tmk1:") && !pem.contains("PRIVATE KEY"))
            var ringed = service.database.configuration(asServiceRole: false, maxConnections: 1)
            ringed.masterKeys = MasterKeyRing(current: try MasterKey(file: path))
            let owner = PostgresClient(configuration: ringed)
            defer { owner.shutdown() }
            let (hook, secret) = try await WebhookStore(database: owner, policy: WebhookTargetPolicy(allowsHTTP: false, allowedHosts: []))
                .create(url: "https://93.184.215.14/hook", eventTypes: ["*"])
            let storedSecret: String = try await service.admin.query("SELECT secret FROM webhook_subscriptions")[0].decode("secret")
            #expect(storedSecret.hasPrefix("tmk1:") && !storedSecret.contains(secret.dropFirst(6)))

            let check = try await TetherCommandLine.run(["keys", "check"], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": path])
            #expect(check.status == 0, "\(check.stderr)")
            // Her key, the read models' seal, the access-token signing key and the webhook's secret.
            #expect(check.stdout.hasPrefix("4 wrapped by the current master key"), "\(check.stdout)")
            let other = try keyFile()
            defer { try? FileManager.default.removeItem(atPath: other) }
            let unknown = try await TetherCommandLine.run(["keys", "check"], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": other])
            #expect(unknown.status != 0)
            #expect(unknown.stderr.contains("master key this configuration does not have"))
            let noFile = try await TetherCommandLine.run(["keys", "check"], databaseURL: service.database.url)
            #expect(noFile.status != 0 && noFile.stderr.contains("TETHER_MASTER_KEY_FILE is not set"), "\(noFile.stderr)")
            // A verification that cannot open the keys says why in words, without the machine code meant for logs.
            let verify = try await TetherCommandLine.run(["replay", "--verify"], databaseURL: service.database.url)
            #expect(verify.status == 3 && verify.stderr.contains("set TETHER_MASTER_KEY_FILE"), "\(verify.stderr)")
            #expect(!verify.stderr.contains("invalid_input"), "\(verify.stderr)")
            // With the wrong key file nothing goes on: no command wraps a new secret with it, no server starts.
            let refused = try await TetherCommandLine.run(
                ["webhooks", "create", "--url", "https://93.184.215.14/other"], databaseURL: service.database.url,
                environment: ["TETHER_MASTER_KEY_FILE": other])
            #expect(refused.status == 1 && refused.stderr.contains("wrapped by a master key this configuration lacks"), "\(refused.stderr)")
            #expect(try await service.admin.query("SELECT count(*)::int AS n FROM webhook_subscriptions")[0].decode("n", as: Int.self) == 1)
            // Nor with none: the webhook's secret was stored in clear beside the wrapped ones.
            let unset = try await TetherCommandLine.run(["webhooks", "create", "--url", "https://93.184.215.14/other"], databaseURL: service.database.url)
            #expect(unset.status == 1 && unset.stderr.contains("TETHER_MASTER_KEY_FILE is not set"), "\(unset.stderr)")
            #expect(try await service.admin.query("SELECT count(*)::int AS n FROM webhook_subscriptions")[0].decode("n", as: Int.self) == 1)
            // A disable without the key was made, then failed opening the secret it answers: it is refused before it.
            let hookId: String = try await service.admin.query("SELECT id::text AS id FROM webhook_subscriptions")[0].decode("id")
            let disabled = try await TetherCommandLine.run(["webhooks", "disable", hookId], databaseURL: service.database.url)
            #expect(disabled.status == 1 && disabled.stderr.contains("nothing was changed"), "\(disabled.stderr)")
            #expect(try await service.admin.query("SELECT status FROM webhook_subscriptions")[0].decode("status", as: String.self) == "active")
            let mistyped = try await TetherCommandLine.run(["webhooks", "frobnicate"], databaseURL: service.database.url)
            #expect(mistyped.status == 2 && !mistyped.stderr.contains("TETHER_MASTER_KEY_FILE"), "a usage error: \(mistyped.stderr)")
            // A command that stores no secret needs no key: an admin key is kept as a hash.
            let adminKey = try await TetherCommandLine.run(["admin-keys", "create", "--role", "support"], databaseURL: service.database.url)
            #expect(adminKey.status == 0, "\(adminKey.stderr)")
            let replayed = try await TetherCommandLine.run(["replay"], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": other])
            #expect(replayed.status == 1 && replayed.stderr.contains("master key") && !replayed.stderr.contains("invalid_input"), "\(replayed.stderr)")
            let server = try TetherCommandLine.spawn(
                ["serve"], databaseURL: service.database.url,
                environment: ["TETHER_MASTER_KEY_FILE": other, "TETHER_LISTEN": "127.0.0.1:\(try LocalPostgresServer.freeLoopbackPort())"])
            let watchdog = Task {
                try await Task.sleep(for: .seconds(20))
                server.send(SIGKILL)
            }
            let served = try await server.wait()
            watchdog.cancel()
            #expect(served.status == 1, "serve started with a key that opens none of the stored keys: \(served.stderr)")
            #expect(served.stderr.contains("wrapped by a master key this configuration lacks"))
            // A server that started while its database did not answer skipped that check: it is never ready with
            // that key (the server started here in process, without serve's check, stands for it).
            let unchecked = try await RunningService.start(databaseURL: service.database.url, values: ["TETHER_MASTER_KEY_FILE": other], devIdP: false)
            let readiness = try await unchecked.client.get("/readyz")
            await unchecked.stop()
            #expect(readiness.status == 503 && readiness.bodyText.contains("wrapped by a master key this configuration lacks"), "\(readiness.bodyText)")
            #expect(try await service.client.get("/readyz").status == 200, "the right key is ready")
            let rotated = try await TetherCommandLine.run(
                ["keys", "rotate-master", "--new", other], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": path])
            #expect(rotated.status == 0, "\(rotated.stderr)")
            #expect(rotated.stdout.hasPrefix("re-wrapped 4 keys"), "as many as keys check counts: \(rotated.stdout)")
            #expect(rotated.stdout.contains("keep the old key file until every server runs with"), "\(rotated.stdout)")
            let afterRotation = try await TetherCommandLine.run(["keys", "check"], databaseURL: service.database.url, environment: ["TETHER_MASTER_KEY_FILE": other])
            #expect(afterRotation.stdout.hasPrefix("4 wrapped by the current master key"), "\(afterRotation.stdout)")
            var rotatedConfiguration = ringed
            rotatedConfiguration.masterKeys = MasterKeyRing(current: try MasterKey(file: other))
            let rotatedOwner = PostgresClient(configuration: rotatedConfiguration)
            defer { rotatedOwner.shutdown() }
            let reread = try await WebhookStore(database: rotatedOwner, policy: WebhookTargetPolicy(allowsHTTP: false, allowedHosts: [])).subscription(hook.id)
            #expect(reread?.signingSecrets(at: Date()) == [secret], "the webhook secret was re-wrapped with the new key")
        }
    }

    /// A rebuild a migration asked for needs the master key: run without it, `migrate` failed with the key's message
    /// alone, and `migrate --status` then said all was current while servers answered 503. The failure now says that
    /// the migrations stand and what to run, and `--status` fails while a rebuild waits.
    @Test func aRebuildThatWaitsForTheMasterKeyIsNamedByMigrateAndItsStatus() async throws {
        let path = try keyFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await DevService.run(settings: ["TETHER_MASTER_KEY_FILE": path]) { service in
            #expect(try await service.client.post("/v1/sign-up", json: ["email": "rebuild@example.com", "password": "a long password"]).status == 201)
            let url = service.database.url
            #expect(try await TetherCommandLine.run(["migrate", "--status"], databaseURL: url).status == 0)
            try await service.admin.query("INSERT INTO read_model_rebuilds (projection, reason) VALUES ('accounts', 'a test asks for it')")

            let status = try await TetherCommandLine.run(["migrate", "--status"], databaseURL: url)
            #expect(status.status == 1 && status.stderr.contains("wait for the rebuild"), "\(status.stdout)\(status.stderr)")
            let withoutKey = try await TetherCommandLine.run(["migrate"], databaseURL: url)
            #expect(withoutKey.status != 0)
            #expect(withoutKey.stderr.contains("the migrations are applied, but the read-model rebuild") && withoutKey.stderr.contains("TETHER_MASTER_KEY_FILE"),
                    "\(withoutKey.stderr)")
            let withKey = try await TetherCommandLine.run(["migrate"], databaseURL: url, environment: ["TETHER_MASTER_KEY_FILE": path])
            #expect(withKey.status == 0 && withKey.stdout.contains("rebuilt accounts"), "\(withKey.stdout)\(withKey.stderr)")
            #expect(try await TetherCommandLine.run(["migrate", "--status"], databaseURL: url).status == 0)
        }
    }

    @Test func aDumpWithoutTheKeyFileReadsNoEmailNameOrProviderIdInTheReadModels() async throws {
        let path = try keyFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await DevService.run(settings: ["TETHER_MASTER_KEY_FILE": path]) { service in
            let signedUp = try await service.client.post(
                "/v1/sign-up", json: ["email": "Dora@Example.com", "password": "a long password", "displayName": "Dora Explorer"])
            #expect(signedUp.status == 201)
            let dora = try signedUp.decodeJSON(SignedIn.self)
            let linked = try await service.link(
                try await service.facebook("fb-dora-4242", email: "dora.fb@example.net"), to: dora.session.accessToken)
            #expect(linked.status == 200, "\(linked.bodyText)")
            try await service.verifyEmail("Dora@Example.com", accessToken: dora.session.accessToken)
            let enrol = try await service.client.post(
                "/v1/users/me/mfa/totp", headers: ["Authorization": "Bearer \(dora.session.accessToken)"], json: ["displayName": "Dora Pixel"])
            #expect(enrol.status == 201)
            _ = try await service.signedIn(try await service.apple("apple-dora-77", email: "dora.relay@privaterelay.appleid.com"))

            // The service reads them back as they were given.
            let me = try await service.me(dora.session.accessToken).bodyText
            for shown in ["Dora@Example.com", "Dora Explorer", "fb-dora-4242", "dora.fb@example.net"] {
                #expect(me.contains(shown), "\(shown) in \(me)")
            }
            // Every personal column holds sealed text, and a dump names none of it.
            let columns = [
                ("users", ["email", "email_normalized", "display_name", "photo_url", "custom_claims"]),
                ("identities", ["provider_uid", "email", "display_name", "photo_url", "password_hash"]),
                ("mfa_factors", ["display_name", "phone_hint"]),
            ]
            var sealed = 0
            for (table, names) in columns {
                for name in names {
                    for row in try await service.admin.query("SELECT \(unsafeSQL: name)::text AS v FROM \(unsafeSQL: table) WHERE \(unsafeSQL: name) IS NOT NULL") {
                        let value: String = try row.decode("v")
                        #expect(value.hasPrefix("rm1:"), "\(table).\(name) holds \(value)")
                        sealed += 1
                    }
                }
            }
            #expect(sealed >= 14, "emails, names, uids and the password hash of both users, and the factor's name")
            let dump = try service.dump().lowercased()
            for secret in ["dora@example.com", "dora explorer", "fb-dora-4242", "dora.fb@example.net", "dora pixel", "apple-dora-77",
                           "dora.relay@privaterelay.appleid.com", "$scrypt", "\"dora"] {
                #expect(!dump.contains(secret), "the dump names \(secret)")
            }
        }
    }

    @Test func serveRefusesToStartWithoutAMasterKey() async throws {
        let database = try await TestDatabase.make()
        let run = try await TetherCommandLine.run(["serve"], databaseURL: database.url)
        #expect(run.status != 0)
        #expect(run.stderr.contains("TETHER_MASTER_KEY_FILE"))
        #expect(run.stderr.dropLast().contains("\n") == false, "one line")
    }
}
