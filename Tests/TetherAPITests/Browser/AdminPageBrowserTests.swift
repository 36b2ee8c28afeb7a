import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherTesting

/// The support page in a real browser: Debian's headless Chromium against a real service with the seeds loaded.
/// Debian's `chromium` package is required: `make test` installs it, and without it these tests fail naming it.
@Suite("Support page in a real browser", .serialized)
struct AdminPageBrowserTests {
    /// The checkout's root: `seeds/` are read from it and screenshots go to its `.tether/`.
    private static let checkout = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A service with the seeds loaded, a headless browser, and a way to make admin keys.
    private struct Scenario {
        let base: String
        let page: BrowserPage
        /// A client of the service, for what the test sets up through the API.
        let client: HTTPTestClient
        let owner: PostgresClient
        let seeded: [String: UUID]

        func key(_ role: AdminRole) async throws -> String {
            try await AdminKeyStore(database: owner).create(
                role: role, name: "browser test", metadata: EventMetadata(actor: .operator("tester"), surface: "cli")).secret
        }

        /// Loads `/admin`, signs in with `key` through the form, and searches for `query` (waiting for results if `expectingResults`).
        func signInAndSearch(key: String, _ query: String, expectingResults: Bool = true) async throws {
            try await page.navigate(base + "/admin")
            try await page.waitUntil("!document.getElementById('sign-in-view').hidden", "the sign-in form")
            try await page.type(key, into: "#key")
            try await page.pressEnter()
            try await page.waitUntil("!document.getElementById('desk').hidden", "the desk after signing in")
            try await page.type(query, into: "#query")
            try await page.pressEnter()
            guard expectingResults else { return }
            try await page.waitUntil("document.querySelectorAll('#result-list .result').length > 0", "search results for \(query)")
        }

        /// Opens the search result for `userId` and waits until its card and timeline are shown.
        func open(_ userId: UUID) async throws {
            let id = userId.uuidString.lowercased()
            try await page.click("#result-list .result[data-user-id='\(id)']")
            try await page.waitUntil(
                "document.querySelector('#user .user-id')?.textContent === '\(id)' && document.querySelectorAll('#events tbody tr').length > 0",
                "the card and timeline of \(id)")
        }

        /// The text of every element matching `selector`.
        func texts(_ selector: String) async throws -> [String] {
            try await page.evaluate("Array.from(document.querySelectorAll(\(BrowserPage.literal(selector))), (node) => node.textContent)")
                .elements.compactMap(\.string)
        }

        /// CSP violations, uncaught exceptions, console errors and dialogs the page has produced.
        func trouble() async throws -> [String] { try await page.trouble() }
    }

    private func withScenario(_ body: (Scenario) async throws -> Void) async throws {
        let database = try await TestDatabase.make()
        let owner = database.client(asServiceRole: false, maxConnections: 2)
        defer { owner.shutdown() }
        try await withDevService(databaseURL: database.url) { service, idp, client in
            let outcomes = try await SeedLoader(service: service, devIdP: idp.devIdP)
                .load(directory: Self.checkout.appendingPathComponent("seeds"))
            let browser = try HeadlessBrowser.launch(width: 1366, height: 860)
            do {
                let page = try await browser.newPage()
                try await page.watchForTrouble(width: 1366, height: 860)
                let seeded = Dictionary(uniqueKeysWithValues: outcomes.map { ($0.seed, $0.userId) })
                try await body(Scenario(
                    base: "http://127.0.0.1:\(service.server.boundPort)", page: page, client: client, owner: owner, seeded: seeded))
            } catch {
                await browser.close()
                throw error
            }
            await browser.close()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aSupportKeySignsInFindsASeededUserAndSeesTheirTimeline() async throws {
        try await withScenario { scenario in
            let page = scenario.page
            let ada = try #require(scenario.seeded["ada"])
            let key = try await scenario.key(.support)
            try await scenario.signInAndSearch(key: key, "ada@example.com")
            #expect(try await scenario.texts("#result-list .result strong") == ["Ada Lovelace"])
            try await scenario.open(ada)

            // The card: who she is, her Apple identity, the session still open.
            #expect(try await scenario.texts("#user-name") == ["Ada Lovelace"])
            #expect(try await scenario.texts("#user-status") == ["Active"])
            #expect(try await scenario.texts("#user .uid").contains("000101.ada0a0a0a0a0a0a0a0a0a0a0a0a0a0a0.0101"))
            #expect(try await scenario.texts("#user h3").contains("Active sessions (1)"))

            // The timeline: her story from the seeds, in order, then this very look at her.
            let types = try await scenario.texts("#events tbody tr .event-type")
            #expect(Array(types.prefix(8)) == [
                "UserRegistered", "IdentityLinked", "SignedIn", "SessionStarted", "SessionRefreshed", "SessionEnded",
                "SignedIn", "SessionStarted",
            ])
            #expect(types.contains("AdminUserViewed"), "the support request that showed the card is in the history")
            #expect(try await scenario.texts("#events tbody tr td:nth-child(3)").contains("registered: email ada@example.com (verified), name Ada Lovelace"))

            try await saveScreenshot(page)

            // The filter: without sessions, no session event is listed and the sign-ins stay.
            try await page.click("#filters input[value='session']")
            try await page.waitUntil("document.querySelectorAll('#events tbody tr.k-session').length === 0", "sessions filtered out")
            let filtered = try await scenario.texts("#events tbody tr .event-type")
            #expect(!filtered.contains { $0.hasPrefix("Session") })
            #expect(filtered.filter { $0 == "SignedIn" }.count == 2)
            try await page.click("#filters input[value='session']")
            try await page.waitUntil("document.querySelectorAll('#events tbody tr.k-session').length > 0", "sessions shown again")
            #expect(try await scenario.texts("#events tbody tr .event-type").count == types.count)

            #expect(try await page.evaluate("sessionStorage.getItem('tether.adminKey')") == .string(key))
            #expect(try await page.evaluate("document.cookie") == .string(""), "the key is never a cookie")
            #expect(try await page.evaluate("location.href") == .string(scenario.base + "/admin"), "nor part of the URL")

            // A support key may look but not act: the refusal leaves the actions disabled, with the reason.
            try await page.click("#actions button[data-action='disable']")
            try await page.type("browser test", into: "#reason")
            try await page.click("#confirm button.danger")
            try await page.waitUntil("document.getElementById('read-only-note') !== null", "the support key's refusal")
            #expect(try await page.evaluate("Array.from(document.querySelectorAll('#actions button')).every((b) => b.disabled)") == .bool(true))
            #expect(try await scenario.texts("#status").first?.contains("support role") == true)
            let disabled: Bool = try await scenario.owner.query("SELECT disabled FROM users WHERE id = \(ada)")[0].decode("disabled")
            #expect(!disabled, "the refused action changed nothing")

            #expect(try await scenario.trouble() == [], "no CSP violation, exception, console error or dialog")
            // The recorder does see a violation: an inline style is refused.
            try await page.evaluate("document.head.append(Object.assign(document.createElement('style'), { textContent: 'body { color: red }' }))")
            try await page.waitUntil("window.__violations.length > 0", "the inline style's violation report")
        }
    }

    /// Saves what a laptop screen shows, scrolled to the top, as `.tether/admin-page.png` for people to look at.
    private func saveScreenshot(_ page: BrowserPage) async throws {
        try await page.evaluate("window.scrollTo(0, 0)")
        let screenshot = try await page.screenshot()
        #expect(screenshot.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG")
        let directory = Self.checkout.appendingPathComponent(".tether")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try screenshot.write(to: directory.appendingPathComponent("admin-page.png"))
    }

    @Test(.timeLimit(.minutes(2)))
    func anAdminKeySeesAFailingWebhookAndASupportKeyDoesNot() async throws {
        try await withScenario { scenario in
            let store = WebhookStore(database: scenario.owner, policy: WebhookTargetPolicy(allowsHTTP: true, allowedHosts: ["127.0.0.1"]))
            let (made, _) = try await store.create(url: "http://127.0.0.1:9/hooks/backend", eventTypes: ["user.*"])
            try await scenario.owner.query("""
                UPDATE webhook_subscriptions SET status = 'failing', status_reason = 'deliveries failed for longer than the retry period'
                WHERE id = \(made.id)
                """)
            try await scenario.signInAndSearch(key: try await scenario.key(.admin), "ada@example.com")
            try await scenario.page.waitUntil("document.querySelector('#webhook-list .webhook.failing') !== null", "the failing webhook")
            let line = try #require(try await scenario.texts("#webhook-list .webhook").first)
            #expect(line.contains("failing") && line.contains("http://127.0.0.1:9/hooks/backend") && line.contains("retry period"))
            #expect(try await scenario.trouble() == [])

            try await scenario.page.click("#sign-out")
            try await scenario.signInAndSearch(key: try await scenario.key(.support), "ada@example.com")
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await scenario.page.evaluate("document.getElementById('webhooks').hidden") == .bool(true), "support keys see no webhooks")
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func anAdminKeyDisablesAUserBehindAConfirmationAndMarkupInANameStaysText() async throws {
        try await withScenario { scenario in
            let page = scenario.page
            let hostileName = "<img src=x onerror=alert(1)>"
            let signUp = try await scenario.client.post(
                "/v1/sign-up", json: ["email": "mallory@example.com", "password": "correct horse battery", "displayName": hostileName])
            #expect(signUp.status == 201)
            let malloryID = try #require(try signUp.json["user"]?["id"]?.string)
            let mallory = try #require(UUID(uuidString: malloryID))

            try await scenario.signInAndSearch(key: try await scenario.key(.admin), "mallory")
            #expect(try await scenario.texts("#result-list .result strong") == [hostileName])
            try await scenario.open(mallory)
            #expect(try await scenario.texts("#user-name") == [hostileName])
            #expect(try await page.evaluate("document.querySelectorAll('img').length") == .int(0), "the name made no element")

            // A session that ended while its confirmation was open: the page says so and draws the card again.
            let again = try await scenario.client.post(
                "/v1/sign-in", json: ["provider": JSONValue.string("password"),
                                      "credential": ["email": "mallory@example.com", "password": "correct horse battery"]])
            #expect(again.status == 200)
            try await scenario.open(mallory)
            let sessions: [UUID] = try await scenario.owner.query(
                "SELECT id FROM sessions WHERE user_id = \(mallory) ORDER BY started_at, id").map { try $0.decode("id") }
            let (sessionId, gone) = (sessions[0], sessions[1])
            try await page.click("#user button[data-action='end-session'][data-target='\(gone.uuidString.lowercased())']")
            try await page.waitUntil("document.getElementById('confirm') !== null", "the confirmation")
            let admin = try await scenario.key(.admin)
            let meanwhile = try await scenario.client.delete(
                "/v1/admin/users/\(mallory.uuidString.lowercased())/sessions/\(gone.uuidString.lowercased())",
                headers: ["Authorization": "Bearer \(admin)"])
            #expect(meanwhile.status == 200)
            try await page.type("lost phone, ticket 40", into: "#reason")
            try await page.click("#confirm button.danger")
            try await page.waitUntil("document.getElementById('confirm') === null", "the confirmation closed")
            try await page.waitUntil("document.querySelectorAll('#user button[data-action=\\'end-session\\']').length === 1", "the card drawn again")
            #expect(try await scenario.texts("#status").first?.contains("no live session") == true)
            #expect(try await page.evaluate("Array.from(document.querySelectorAll('#user button[data-action]')).every((b) => b.matches(':enabled'))") == .bool(true))

            // One session ends from its own button, behind the same confirmation and reason; so does one identity,
            // the last one too.
            func confirmItemAction(_ action: String, on target: String, asking question: String, reason: String) async throws {
                try await page.click("#user button[data-action='\(action)'][data-target='\(target)']")
                try await page.waitUntil("document.getElementById('confirm') !== null", "the confirmation of \(action)")
                #expect(try await scenario.texts("#confirm strong") == [question])
                try await page.type(reason, into: "#reason")
                try await page.click("#confirm button.danger")
                try await page.waitUntil("document.querySelectorAll('#user button[data-action=\\'\(action)\\']').length === 0", "no \(action) left")
            }
            let id = sessionId.uuidString.lowercased()
            try await confirmItemAction(
                "end-session", on: id, asking: "End session \(id.prefix(8)) of \(hostileName)?", reason: "phone reported lost, ticket 41")
            let ended: String? = try await scenario.owner.query("SELECT end_reason FROM sessions WHERE id = \(sessionId)")[0].decode("end_reason")
            #expect(ended == "ended_by_admin")

            try await confirmItemAction(
                "unlink", on: "password", asking: "Unlink password from \(hostileName)?", reason: "asked to close the password, ticket 43")
            let identities: Int = try await scenario.owner.query("SELECT count(*)::int AS n FROM identities WHERE user_id = \(mallory)")[0].decode("n")
            #expect(identities == 0)

            // Disable asks first: cancelling sends nothing.
            try await page.click("#actions button[data-action='disable']")
            try await page.waitUntil("document.getElementById('confirm') !== null", "the confirmation")
            #expect(try await scenario.texts("#confirm strong") == ["Disable \(hostileName)?"])
            try await page.click("#confirm button:not(.danger)")
            #expect(try await page.evaluate("document.getElementById('confirm') === null") == .bool(true))

            // Confirming without a reason is refused on the page; with one, the user is disabled.
            try await page.click("#actions button[data-action='disable']")
            try await page.click("#confirm button.danger")
            #expect(try await scenario.texts("#status").first?.contains("reason") == true)
            try await page.type("account takeover reported, ticket 42", into: "#reason")
            try await page.click("#confirm button.danger")
            try await page.waitUntil("document.getElementById('user-status')?.textContent === 'Disabled'", "the disabled badge")
            try await page.waitUntil(
                "Array.from(document.querySelectorAll('#events tbody tr')).some((row) => row.dataset.type === 'UserDisabled')",
                "UserDisabled in the timeline")
            #expect(try await scenario.texts("#events tbody tr td:nth-child(3)").contains("user disabled: account takeover reported, ticket 42"))
            #expect(try await scenario.texts("#actions button[data-action]") == ["Enable…", "Revoke all sessions…"])
            let disabled: Bool = try await scenario.owner.query("SELECT disabled FROM users WHERE id = \(mallory)")[0].decode("disabled")
            #expect(disabled)

            // Signing out forgets the key.
            try await page.click("#sign-out")
            #expect(try await page.evaluate("sessionStorage.length") == .int(0))
            #expect(try await page.evaluate("document.getElementById('sign-in-view').hidden") == .bool(false))

            // A key of the wrong shape is refused on the page; one the server does not know, at the first search.
            try await page.type("not-a-key", into: "#key")
            try await page.pressEnter()
            #expect(try await scenario.texts("#status").first?.contains("not an admin key") == true)
            #expect(try await page.evaluate("sessionStorage.length") == .int(0))
            try await scenario.signInAndSearch(key: AdminKeyStore.secretFormat.generate(), "mallory", expectingResults: false)
            try await page.waitUntil("!document.getElementById('sign-in-view').hidden", "the sign-in form again")
            #expect(try await scenario.texts("#status").first?.contains("refused this key") == true)
            #expect(try await page.evaluate("sessionStorage.length") == .int(0))
            #expect(try await scenario.trouble() == [], "no CSP violation, exception, console error or dialog")
        }
    }
}

