import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherTesting

/// The built `tether` executable, run as an operator would run it.
@Suite("tether history and tether admin-keys")
struct SupportCommandLineTests {
    typealias Run = TetherCommandLine.Run

    static func tether(_ arguments: [String], databaseURL: String?, standardOutput: String? = nil) async throws -> Run {
        try await TetherCommandLine.run(arguments, databaseURL: databaseURL, standardOutput: standardOutput)
    }

    /// A failure is one line on standard error, `tether: …`.
    private func expectOneLineFailure(_ run: Run, status: Int32, mentioning text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(run.status == status, "\(run.stderr)", sourceLocation: sourceLocation)
        #expect(run.stderr.hasPrefix("tether: ") && run.stderr.hasSuffix("\n"), "\(run.stderr)", sourceLocation: sourceLocation)
        #expect(run.stderr.dropLast().contains("\n") == false, "one line: \(run.stderr)", sourceLocation: sourceLocation)
        #expect(run.stderr.contains(text), "\(run.stderr)", sourceLocation: sourceLocation)
    }

    @Test func adminKeysCreateListAndRevoke() async throws {
        try await SupportHarness.run { harness in
            let url = harness.database.url
            let created = try await Self.tether(["admin-keys", "create", "--role", "support", "--name", "ops desk"], databaseURL: url)
            #expect(created.status == 0, "\(created.stderr)")
            #expect(created.stderr.isEmpty)
            let secret = try #require(created.lines.last)
            #expect(secret.hasPrefix("tadm_") && secret.count == 48 && AdminKeyStore.secretFormat.isWellFormed(secret))
            let keys = AdminKeyStore(database: harness.owner)
            let key = try #require(try await keys.authenticate(secret))
            #expect(key.role == .support && key.name == "ops desk")
            #expect(created.stdout.contains(key.id.uuidString.lowercased()))
            #expect(try await harness.adminGet("/v1/admin/users?q=nobody", key: secret).status == 200)

            let listed = try await Self.tether(["admin-keys", "list"], databaseURL: url)
            #expect(listed.status == 0)
            #expect(listed.lines.first?.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
                    == "ID ROLE NAME CREATED LAST USED REVOKED")
            let row = try #require(listed.lines.dropFirst().first)
            #expect(row.hasPrefix(key.id.uuidString.lowercased()) && row.contains("support") && row.contains("ops desk") && row.hasSuffix(" -"))
            #expect(!row.contains("never"), "the search above used it")
            #expect(!listed.stdout.contains(secret))
            let json = try JSONDecoder().decode(JSONValue.self, from: Data(try await Self.tether(["admin-keys", "list", "--json"], databaseURL: url).stdout.utf8))
            #expect(json.elements.first?["role"]?.string == "support")
            #expect(json.elements.first?["revokedAt"] == .null)
            #expect(json.elements.first?["lastUsedAt"]?.string != nil)

            let revoked = try await Self.tether(["admin-keys", "revoke", key.id.uuidString], databaseURL: url)
            #expect(revoked.status == 0)
            #expect(revoked.stdout.hasPrefix("revoked admin key \(key.id.uuidString.lowercased())"))
            #expect(try await keys.authenticate(secret) == nil)
            #expect(try await harness.adminGet("/v1/admin/users?q=nobody", key: secret).status == 401)
            let again = try await Self.tether(["admin-keys", "revoke", key.id.uuidString], databaseURL: url)
            #expect(again.status == 0 && again.stdout.contains("was already revoked at"))

            let stream = try await harness.events(inStream: .adminKey(key.id))
            #expect(stream.map(\.type) == ["AdminKeyCreated", "AdminUsersSearched", "AdminKeyRevoked"])
            #expect(stream.first?.metadata.actor == .operator("support-test") && stream.first?.metadata.surface == "cli")
            #expect(!String(decoding: stream[0].data, as: UTF8.self).contains(secret), "only the hash is recorded")
            let stored: String = try await harness.owner.query("SELECT key_hash FROM admin_keys WHERE id = \(key.id)")[0].decode("key_hash")
            #expect(stored == AdminKeyStore.secretFormat.hash(secret))

            expectOneLineFailure(try await Self.tether(["admin-keys", "revoke", UUID().uuidString], databaseURL: url), status: 1, mentioning: "no admin key")
            expectOneLineFailure(try await Self.tether(["admin-keys", "revoke", "ops"], databaseURL: url), status: 2, mentioning: "not an admin key id")
            expectOneLineFailure(try await Self.tether(["admin-keys", "create", "--role", "root"], databaseURL: url), status: 2, mentioning: "--role")
            // An option of another action is a usage error, not ignored in silence.
            expectOneLineFailure(
                try await Self.tether(["admin-keys", "revoke", UUID().uuidString, "--role", "admin"], databaseURL: url), status: 2,
                mentioning: "--role does not apply to tether admin-keys revoke")
            expectOneLineFailure(
                try await Self.tether(["admin-keys", "list", "--name", "ops"], databaseURL: url), status: 2, mentioning: "--name does not apply")
            expectOneLineFailure(try await Self.tether(["admin-keys", "create"], databaseURL: url), status: 2, mentioning: "--role")
            expectOneLineFailure(try await Self.tether(["admin-keys"], databaseURL: url), status: 2, mentioning: "create, list or revoke")
            expectOneLineFailure(try await Self.tether(["admin-keys", "rotate"], databaseURL: url), status: 2, mentioning: "rotate")
            expectOneLineFailure(try await Self.tether(["admin-keys", "list"], databaseURL: nil), status: 1, mentioning: "TETHER_DATABASE_URL")
            let longName = String(repeating: "n", count: 101)
            // A bad name is a usage mistake, found before the database is asked anything.
            expectOneLineFailure(try await Self.tether(["admin-keys", "create", "--role", "admin", "--name", longName], databaseURL: nil), status: 2, mentioning: "--name")
            #expect(try await keys.list().count == 1, "failed commands made no key")
        }
    }

    /// A key shown once that never reached its reader (standard output on a full disk) is a failure: exit 1 and
    /// one line, so the operator knows to revoke it and make another, not a silent success.
    @Test func anAnswerThatCannotBeWrittenIsAFailure() async throws {
        try await SupportHarness.run { harness in
            let url = harness.database.url
            let lost = try await Self.tether(
                ["admin-keys", "create", "--role", "support", "--name", "lost"], databaseURL: url, standardOutput: "/dev/full")
            #expect(lost.status == 1)
            #expect(lost.stderr.contains("could not write to standard output (No space left on device)"), "\(lost.stderr)")
            // Nobody saw the key, so it does not stay live.
            #expect(lost.stderr.contains("was revoked, since nobody saw its secret"), "\(lost.stderr)")
            let live: Int = try await harness.owner.query("SELECT count(*)::int AS n FROM admin_keys WHERE revoked_at IS NULL")[0].decode("n")
            #expect(live == 0)
            let written = try await Self.tether(["admin-keys", "create", "--role", "support", "--name", "kept"], databaseURL: url)
            #expect(written.status == 0, "\(written.stderr)")
        }
    }

    /// Small ways a call goes wrong, each a clear refusal: an option given twice (one would silently win), a key
    /// name with a terminal's escape in it, no command at all, stopping a cluster that is not there.
    @Test func ambiguousOrEmptyCallsAreRefusedClearly() async throws {
        try await SupportHarness.run { harness in
            let url = harness.database.url
            let twice = try await Self.tether(["admin-keys", "create", "--role", "admin", "--role", "support"], databaseURL: url)
            expectOneLineFailure(twice, status: 2, mentioning: "--role is given more than once")
            for name in ["tab\there\u{1B}[31mred", "admin\u{202E}troppus"] {
                let escaped = try await Self.tether(["admin-keys", "create", "--role", "support", "--name", name], databaseURL: url)
                #expect(escaped.status != 0 && escaped.stderr.contains("control or formatting characters"), "\(escaped.stderr)")
            }
            let keys: Int = try await harness.owner.query("SELECT count(*)::int AS n FROM admin_keys")[0].decode("n")
            #expect(keys == 0, "neither made a key")
            let helpOfHelp = try await Self.tether(["help", "--help"], databaseURL: nil)
            #expect(helpOfHelp.status == 0 && helpOfHelp.stdout.contains("Usage"), "\(helpOfHelp.stderr)")
            let bare = try await Self.tether([], databaseURL: nil)
            #expect(bare.status == 2 && bare.stdout.isEmpty && bare.stderr.contains("Usage"), "\(bare.stdout)")
            // A verification that cannot run is not drift: a scheduled check tells the two apart by the status.
            let unreachable = "postgresql://postgres@127.0.0.1:1/tether"
            expectOneLineFailure(
                try await Self.tether(["replay", "--verify"], databaseURL: unreachable), status: 3, mentioning: "could not be verified")
            #expect(try await Self.tether(["replay"], databaseURL: unreachable).status == 1)
            // A database with no schema: every command that reads it says to migrate (keys check printed the SQL error).
            let empty = try await TestDatabase.make(migrated: false)
            for call in [["keys", "check"], ["admin-keys", "list"]] {
                expectOneLineFailure(try await Self.tether(call, databaseURL: empty.url), status: 1, mentioning: "run tether migrate")
            }
            let nothing = try await Self.tether(["postgres", "stop", "--data", "/nonexistent/tether-pg"], databaseURL: nil)
            expectOneLineFailure(nothing, status: 1, mentioning: "no PostgreSQL cluster at /nonexistent/tether-pg")
            expectOneLineFailure(
                try await Self.tether(["postgres", "stop", "--data", "/nonexistent/tether-pg", "--port", "5"], databaseURL: nil), status: 2,
                mentioning: "--port does not apply")
            expectOneLineFailure(try await Self.tether(["postgres", "start", "--data="], databaseURL: nil), status: 2, mentioning: "needs --data DIR")
            // A stray word is a mistake, not something to ignore: `migrate status` is not `migrate --status`. (`serve`
            // and `dev` refuse theirs the same way; a test of theirs would serve until killed if that broke.)
            for (call, word) in [(["migrate", "status"], "status"), (["replay", "all"], "all")] {
                expectOneLineFailure(try await Self.tether(call, databaseURL: url), status: 2, mentioning: "unexpected argument \(word)")
            }
            expectOneLineFailure(try await Self.tether(["webhooks", "list", "all"], databaseURL: url), status: 2, mentioning: "takes no arguments")
            // keys checks its action and options before the database: an option of the other action is refused, not
            // ignored, and an unknown action is a usage error even where no database is set.
            expectOneLineFailure(try await Self.tether(["keys", "check", "--new", "x"], databaseURL: url), status: 2, mentioning: "--new does not apply")
            expectOneLineFailure(try await Self.tether(["keys", "bogus"], databaseURL: nil), status: 2, mentioning: "takes check, or rotate-master")
            // tether dev's identity provider names its own address: a port the kernel would pick is refused before anything starts.
            // (Spawned with a watchdog: a dev that started instead would serve until killed.)
            let dev = try TetherCommandLine.spawn(["dev", "--no-seeds"], databaseURL: url, environment: ["TETHER_LISTEN": "127.0.0.1:0"])
            let watchdog = Task {
                try await Task.sleep(for: .seconds(20))
                dev.send(SIGKILL)
            }
            let anyPort = try await dev.wait()
            watchdog.cancel()
            expectOneLineFailure(anyPort, status: 1, mentioning: "tether dev needs a fixed port")
        }
    }

    @Test func historyPrintsTheTimelineAsATableOrJSON() async throws {
        try await SupportHarness.run { harness in
            let url = harness.database.url
            let ada = try await harness.signUp("ada@example.com")
            try await harness.linkFacebook(ada.accessToken, facebookUserID: "10001", email: "ada@fb.example")
            let admin = try await harness.adminKey(.admin)
            #expect(try await harness.adminPost("/v1/admin/users/\(ada.id.uuidString.lowercased())/revoke-sessions", key: admin.secret).status == 200)

            let byEmail = try await Self.tether(["history", "ADA@example.com"], databaseURL: url)
            #expect(byEmail.status == 0, "\(byEmail.stderr)")
            #expect(byEmail.stderr.isEmpty)
            let lines = byEmail.lines
            #expect(lines.first?.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
                    == "TIME EVENT SURFACE ACTOR CLIENT IP SUMMARY")
            #expect(lines.count == 1 + 9 + 1)
            #expect(lines[6].contains("IdentityLinked") && lines[6].contains(" self ") && lines[6].hasSuffix("linked facebook 10001: email ada@fb.example (unverified)"))
            #expect(lines[7].contains("ProviderTokenStored") && lines[7].hasSuffix("facebook access_token kept (to revoke and check the grant)"))
            #expect(lines[8].contains("SessionsRevoked") && lines[8].contains("admin:"))
            #expect(lines[9].hasSuffix("asked to revoke-sessions"))
            #expect(lines.last == "9 events of user \(ada.id.uuidString.lowercased())")

            #expect(try await Self.tether(["history", "facebook:10001"], databaseURL: url).stdout == byEmail.stdout)
            #expect(try await Self.tether(["history", ada.id.uuidString], databaseURL: url).stdout == byEmail.stdout)
            let recent = try await Self.tether(["history", "password:ada@example.com", "--since", "1h"], databaseURL: url)
            #expect(recent.stdout == byEmail.stdout)
            let future = try await Self.tether(["history", ada.id.uuidString, "--since", "2999-01-01"], databaseURL: url)
            #expect(future.status == 0 && future.lines.last == "0 events of user \(ada.id.uuidString.lowercased())")

            let json = try await Self.tether(["history", "ada@example.com", "--json"], databaseURL: url)
            #expect(json.status == 0)
            let page = try JSONDecoder().decode(JSONValue.self, from: Data(json.stdout.utf8))
            #expect(page["userId"]?.string == ada.id.uuidString.lowercased())
            #expect(page["events"]?.elements.count == 9)
            #expect(page["events"]?.elements.first?["summary"]?.string == "registered: email ada@example.com (unverified), name Ada")
            #expect(page["nextAfter"] == .null)

            expectOneLineFailure(try await Self.tether(["history", "nobody@example.com"], databaseURL: url), status: 1, mentioning: "no user has the email nobody@example.com")
            expectOneLineFailure(try await Self.tether(["history", UUID().uuidString], databaseURL: url), status: 1, mentioning: "no user")
            expectOneLineFailure(try await Self.tether(["history", "ada"], databaseURL: url), status: 2, mentioning: "PROVIDER:UID")
            expectOneLineFailure(try await Self.tether(["history"], databaseURL: url), status: 2, mentioning: "one USER")
            expectOneLineFailure(try await Self.tether(["history", "ada@example.com", "--since", "yesterday"], databaseURL: url), status: 2, mentioning: "--since")
            expectOneLineFailure(try await Self.tether(["history", "ada@example.com", "--format", "csv"], databaseURL: url), status: 2, mentioning: "--format")
            expectOneLineFailure(try await Self.tether(["history", "ada@example.com"], databaseURL: nil), status: 1, mentioning: "TETHER_DATABASE_URL")
        }
    }

    @Test(arguments: ["history", "admin-keys"])
    func everySupportCommandExplainsItself(_ command: String) async throws {
        let help = try await Self.tether([command, "--help"], databaseURL: nil)
        #expect(help.status == 0)
        #expect(help.stdout.hasPrefix("Usage: tether \(command)"))
        #expect(try await Self.tether(["--help"], databaseURL: nil).stdout.contains("  \(command) "))
    }
}
