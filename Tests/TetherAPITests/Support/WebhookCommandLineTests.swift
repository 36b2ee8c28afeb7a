import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherPostgres

@Suite("tether webhooks")
struct WebhookCommandLineTests {
    private func tether(_ arguments: [String], _ url: String) async throws -> TetherCommandLine.Run {
        try await TetherCommandLine.run(arguments, databaseURL: url)
    }

    @Test func createListRotateDisableEnableReplayAndDelete() async throws {
        try await SupportHarness.run { harness in
            let url = harness.database.url
            let created = try await tether(["webhooks", "create", "--url", "https://93.184.215.14/hook", "--events", "user.*,identity.linked"], url)
            #expect(created.status == 0, "\(created.stderr)")
            let secret = try #require(created.lines.last)
            #expect(secret.hasPrefix("whsec_") && WebhookSignature.isSecret(secret))
            let id = try #require(created.lines.first?.split(separator: " ").dropFirst(2).first.map(String.init))
            #expect(UUID(uuidString: id) != nil)

            let listed = try await tether(["webhooks", "list"], url)
            #expect(listed.lines.first?.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
                    == "ID STATUS EVENTS CURSOR ATTEMPTS URL")
            #expect(listed.stdout.contains(id) && listed.stdout.contains("user.*,identity.linked") && listed.stdout.contains("active"))
            #expect(!listed.stdout.contains(secret))

            let rotated = try await tether(["webhooks", "rotate-secret", id], url)
            #expect(rotated.status == 0)
            #expect(rotated.lines.last != secret && rotated.lines.last?.hasPrefix("whsec_") == true)
            #expect(try await tether(["webhooks", "disable", id], url).stdout.contains("disabled"))
            // A replay of a disabled subscription moves its cursor and leaves it disabled: an operator's disable (or a
            // receiver's 410) is not undone by it, and nothing, personal data included, goes out until it is enabled.
            let whileDisabled = try await tether(["webhooks", "replay", id, "--from", "start"], url)
            #expect(whileDisabled.status == 0 && whileDisabled.stdout.contains("once enabled"), "\(whileDisabled.stdout)\(whileDisabled.stderr)")
            #expect(try await tether(["webhooks", "list"], url).stdout.contains("disabled"))
            #expect(try await tether(["webhooks", "enable", id], url).stdout.contains("active"))
            let replayed = try await tether(["webhooks", "replay", id, "--from", "start"], url)
            #expect(replayed.stdout.contains("delivers again from 0"), "\(replayed.stdout)\(replayed.stderr)")
            let json = try JSONDecoder().decode(JSONValue.self, from: Data(try await tether(["webhooks", "list", "--json"], url).stdout.utf8))
            guard case .array(let subscriptions) = json, case .object(let first)? = subscriptions.first else {
                throw HarnessError("list --json is not an array of objects")
            }
            #expect(first["cursor"] == .string("0"))
            #expect(first["previousSecretUntil"] != .null)

            let refused = try await tether(["webhooks", "create", "--url", "https://10.0.0.1/hook"], url)
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("private or local address"))
            let plain = try await tether(["webhooks", "create", "--url", "http://93.184.215.14/hook"], url)
            #expect(plain.stderr.contains("https"))
            // An argument that is no id is named as such (not "needs one subscription id"), and changes nothing.
            let notAnId = try await tether(["webhooks", "rotate-secret", "nope"], url)
            #expect(notAnId.status == 2 && notAnId.stderr.contains(#""nope" is not a subscription id"#), "\(notAnId.stderr)")
            // An option of another action was ignored in silence: `replay --events … --no-personal` redelivered every
            // event with personal data. Each is a usage error now, and changes nothing.
            for arguments in [["replay", id, "--from", "start", "--events", "user.created"], ["replay", id, "--from", "start", "--no-personal"],
                              ["enable", id, "--from", "start"], ["delete", id, "--url", "https://93.184.215.14/x"], ["list", "--events", "x"]] {
                let stray = try await tether(["webhooks"] + arguments, url)
                #expect(stray.status == 2 && stray.stderr.contains("does not apply to tether webhooks \(arguments[0])"), "\(arguments): \(stray.stderr)")
            }
            #expect(try await tether(["webhooks", "list"], url).stdout.contains("active"), "still there, still enabled")
            // A call's mistakes are usage errors before the database is opened: even an unreachable one.
            let unreachable = "postgresql://tether@127.0.0.1:1/none"
            for arguments in [["disable", "not-an-id"], ["create"], ["replay", id]] {
                #expect(try await tether(["webhooks"] + arguments, unreachable).status == 2, "\(arguments)")
            }
            #expect(try await tether(["webhooks", "delete", id], url).status == 0)
            #expect(try await tether(["webhooks", "delete", id], url).status != 0)
            #expect(try await tether(["webhooks", "list"], url).stdout == "no webhook subscriptions\n")
        }
    }
}
