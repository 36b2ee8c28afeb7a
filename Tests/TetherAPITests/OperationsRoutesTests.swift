import Foundation
import Testing
import TetherAPI
import TetherHTTP
import TetherPostgres
import TetherTesting

@Suite("Operations routes over HTTP")
struct OperationsRoutesTests {
    @Test func readyzIsOKOnAMigratedDatabase() async throws {
        let database = try await TestDatabase.make()
        try await withService(databaseURL: database.url) { client in
            let health = try await client.get("/healthz")
            #expect(health.status == 200)
            let ready = try await client.get("/readyz")
            #expect(ready.status == 200, "\(ready.bodyText)")
            #expect(try ready.decodeJSON([String: String].self)["migrations"] == "current")
            let jwks = try await client.get("/.well-known/jwks.json")
            #expect(jwks.status == 200)
            let keys = try #require(try JSONSerialization.jsonObject(with: Data(jwks.body)) as? [String: Any])["keys"] as? [[String: Any]]
            #expect(keys?.first?["kty"] as? String == "EC")
            #expect(keys?.first?["d"] == nil, "only public keys are published")
        }
    }

    @Test func readyzIs503WhileMigrationsArePending() async throws {
        _ = try await TestDatabase.make() // the cluster-wide service role exists once any database is migrated
        let database = try await TestDatabase.make(migrated: false)
        try await withService(databaseURL: database.url) { client in
            let ready = try await client.get("/readyz")
            #expect(ready.status == 503)
            #expect(ready.headers["content-type"] == "application/problem+json")
            #expect(ready.headers["retry-after"] != nil)
            #expect(ready.bodyText.contains("pending migrations: 001_event_log.sql"))
            #expect(try await client.get("/healthz").status == 200)
            // A command meanwhile is a 503 the client may retry, not a server failure.
            let signUp = try await client.post("/v1/sign-up", json: ["email": "early@example.com", "password": "a long password"])
            #expect(signUp.status == 503 && signUp.headers["retry-after"] != nil, "\(signUp.status) \(signUp.bodyText)")
        }
    }

    @Test func readyzIs503WhenTheDatabaseIsUnreachable() async throws {
        let port = try LocalPostgresServer.freeLoopbackPort()
        try await withService(databaseURL: "postgresql://postgres@127.0.0.1:\(port)/none") { client in
            let ready = try await client.get("/readyz")
            #expect(ready.status == 503)
            #expect(ready.bodyText.contains("database unreachable"))
            // Anyone may ask: the answer names neither the database's address nor its user (libpq's words do).
            #expect(!ready.bodyText.contains("127.0.0.1") && !ready.bodyText.contains("postgres"), "\(ready.bodyText)")
        }
    }
}

@Suite("Configuration")
struct TetherConfigurationTests {
    @Test func defaultsMatchTheContract() throws {
        let configuration = try TetherConfiguration(values: [:])
        #expect(configuration.listen == .init(host: "127.0.0.1", port: 8080))
        #expect(configuration.emailPolicy == .oneAccountPerEmail)
        #expect(configuration.logLevel == .info)
        #expect(configuration.databaseURL == nil)
        #expect(configuration.maxConnections == 1000 && configuration.maxConnectionsPerAddress == 64)
        #expect(configuration.idleTimeout == 60 && configuration.providerRevalidateInterval == 86_400)
        #expect(configuration.headerTimeout == 10 && configuration.bodyTimeout == 30)
        #expect(configuration.stateCacheMegabytes == 256)
        #expect(try TetherConfiguration(values: ["TETHER_STATE_CACHE_MB": "32"]).stateCacheMegabytes == 32)
        // Behind a proxy every connection has the proxy's address: no per-address cap unless one is given.
        #expect(try TetherConfiguration(values: ["TETHER_TRUSTED_PROXIES": "10.0.0.1"]).maxConnectionsPerAddress == 0)
        #expect(try TetherConfiguration(values: ["TETHER_TRUSTED_PROXIES": "10.0.0.1", "TETHER_MAX_CONNECTIONS_PER_ADDRESS": "500"])
            .maxConnectionsPerAddress == 500)
    }

    @Test(arguments: [
        ("TETHER_LISTEN", "8080"),
        ("TETHER_LISTEN", "127.0.0.1:99999"),
        // Hosts the server could not listen on: `tether dev` crashed on the first two (a URL it built from them).
        ("TETHER_LISTEN", "127.0.0.1^:18420"),
        ("TETHER_LISTEN", "127.<x>:18420"),
        ("TETHER_LISTEN", "127.0.0.1@evil.example:18420"),
        ("TETHER_LISTEN", "999.1.1.1:18420"),
        ("TETHER_LISTEN", "example.com:8080"),
        ("TETHER_EMAIL_POLICY", "one-per-email"),
        ("TETHER_LOG_LEVEL", "verbose"),
        ("TETHER_SMS_WEBHOOK_URL", "ftp://example.com/sms"),
        ("TETHER_DATABASE_URL", "mysql://localhost/db"),
        ("TETHER_APPLE_CLIENT_ID", "com.example.app"),
        ("TETHER_TRUSTED_PROXIES", "10.0.0.1, proxy.internal"),
        ("TETHER_SIGN_IN_FAILURE_LIMIT", "0"),
        ("TETHER_MAX_CONNECTIONS", "0"),
        ("TETHER_MAX_CONNECTIONS_PER_ADDRESS", "many"),
        ("TETHER_IDLE_TIMEOUT", "forever"),
        ("TETHER_HEADER_TIMEOUT", "0s"),
        ("TETHER_BODY_TIMEOUT", "10"),
        ("TETHER_PROVIDER_REVALIDATE_INTERVAL", "0s"),
        ("TETHER_STATE_CACHE_MB", "0"),
        ("TETHER_STATE_CACHE_MB", "256MB"),
    ])
    func anUnusableSettingNamesItsVariable(variable: String, value: String) {
        #expect {
            try TetherConfiguration(values: [variable: value])
        } throws: { error in
            (error as? TetherConfiguration.Invalid)?.variable == variable
        }
    }

    @Test func listenAddressesParse() {
        #expect(TetherConfiguration.ListenAddress(parsing: "[::1]:8443") == .init(host: "::1", port: 8443))
        #expect(TetherConfiguration.ListenAddress(parsing: ":9000") == .init(host: "0.0.0.0", port: 9000))
        #expect(TetherConfiguration.ListenAddress(parsing: "127.0.0.1:0")?.isLoopback == true)
        #expect(TetherConfiguration.ListenAddress(parsing: "0.0.0.0:80")?.isLoopback == false)
        #expect(TetherConfiguration.ListenAddress(parsing: "localhost:80")?.isLoopback == true)
        #expect(TetherConfiguration.ListenAddress(parsing: "[fe80::1]:80") == .init(host: "fe80::1", port: 80))
    }

    @Test func theEnvironmentOverridesTheConfigFile() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tether-config-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(#"{"TETHER_LISTEN": "127.0.0.1:9001", "TETHER_APPLE_CLIENT_IDS": ["com.a", "com.b"], "TETHER_LOG_LEVEL": "warn"}"#.utf8)
            .write(to: file)
        let configuration = try TetherConfiguration.load(environment: ["TETHER_LOG_LEVEL": "debug", "HOME": "/root"], configFile: file.path)
        #expect(configuration.listen.port == 9001)
        #expect(configuration.logLevel == .debug)
        #expect(configuration.values["TETHER_APPLE_CLIENT_IDS"] == "com.a,com.b")
        #expect(throws: TetherConfiguration.Invalid.self) {
            try TetherConfiguration.load(environment: [:], configFile: "/nonexistent/tether.json")
        }
        // An empty variable overrides the file too, and counts as not set (a secret injected empty must not fall back).
        #expect(try TetherConfiguration.load(environment: ["TETHER_LISTEN": ""], configFile: file.path).listen.port == 8080)
    }

    /// A config file is read one way or refused: a member twice (one would silently win), a name that is no setting,
    /// `true` for a number, a trailing comma.
    @Test func aConfigFileThatCouldBeReadTwoWaysIsRefused() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tether-config-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        for text in [
            #"{"TETHER_LISTEN": "127.0.0.1:9001", "TETHER_LISTEN": "127.0.0.1:9002"}"#, #"{"tether_log_level": "bogus"}"#,
            #"{"TETHER_SIGN_IN_FAILURE_LIMIT": true}"#, #"{"TETHER_LISTEN": "127.0.0.1:9001",}"#, #"{"TETHER_APPLE_CLIENT_IDS": ["a", 1]}"#,
            // The environment's TETHER_TEST_* pass unread (the suites set them); a file's were ignored silently.
            #"{"TETHER_TEST_ANYTHING": "x"}"#,
        ] {
            try Data(text.utf8).write(to: file)
            #expect(throws: TetherConfiguration.Invalid.self, "\(text)") { try TetherConfiguration.load(environment: [:], configFile: file.path) }
        }
        // The refusal says what is wrong in the parser's words, not in the words of Swift's error types.
        try Data(#"{"TETHER_LISTEN": "127.0.0.1:1", "TETHER_LISTEN": "127.0.0.1:2"}"#.utf8).write(to: file)
        do {
            _ = try TetherConfiguration.load(environment: [:], configFile: file.path)
            Issue.record("a member named twice was taken")
        } catch let invalid as TetherConfiguration.Invalid {
            let text = String(describing: invalid)
            let named = text.contains(#""TETHER_LISTEN" given twice"#)
            #expect(named && !text.contains("DecodingError"), "\(text)")
        }
        try Data(#"{"TETHER_SIGN_IN_FAILURE_LIMIT": 12, "TETHER_WEBHOOK_ALLOW_HTTP": true}"#.utf8).write(to: file)
        let loaded = try TetherConfiguration.load(environment: [:], configFile: file.path)
        #expect(loaded.signInFailureLimit == 12 && loaded.webhookAllowsHTTP, "a number and an on/off switch as JSON has them")
    }
}
