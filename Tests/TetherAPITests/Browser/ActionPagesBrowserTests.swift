import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherTesting

/// The pages people reach from mails, in Debian's headless Chromium against a real service.
@Suite("The /actions pages in a real browser", .serialized)
struct ActionPagesBrowserTests {
    private func withPage(_ body: (TetherService, DevIdPServer, HTTPTestClient, BrowserPage) async throws -> Void) async throws {
        let database = try await TestDatabase.make()
        try await withDevService(databaseURL: database.url) { service, idp, client in
            let browser = try HeadlessBrowser.launch(width: 1024, height: 768)
            do {
                let page = try await browser.newPage()
                try await page.watchForTrouble(width: 1024, height: 768)
                try await body(service, idp, client, page)
            } catch {
                await browser.close()
                throw error
            }
            await browser.close()
        }
    }

    private func heading(_ page: BrowserPage) async throws -> String? {
        try await page.evaluate("document.querySelector('h1')?.textContent").string
    }

    @Test(.timeLimit(.minutes(2)))
    func aPersonResetsTheirPasswordWithTheFormAndSignsInWithIt() async throws {
        try await withPage { service, idp, client, page in
            #expect(try await client.post("/v1/sign-up", json: ["email": "ada@example.com", "password": "first password"]).status == 201)
            #expect(try await client.post("/v1/password-reset", json: ["email": "ada@example.com"]).status == 202)
            await service.emailFlows.finishSending()
            let mail = try #require(idp.devIdP.mailOutbox.mails(to: "ada@example.com").last)
            #expect(mail.link.hasPrefix("http://127.0.0.1:\(service.server.boundPort)/actions/reset-password?code="))

            try await page.navigate(mail.link)
            #expect(try await heading(page) == "Choose a new password")
            #expect(try await page.evaluate("document.body.textContent.includes('8 to 128 characters')") == .bool(true), "the policy is shown")
            // The browser's own checks hold a short password back; two different ones reach the server, which says so.
            try await page.type("a new password", into: "#newPassword")
            try await page.type("another password", into: "#confirmPassword")
            try await page.click("button[type=submit]")
            try await page.waitUntil("document.querySelector('.error')?.textContent.includes('not the same')", "the mismatch")
            let signIn = { (password: String) in
                try await client.post("/v1/sign-in", json: Credential(provider: "password", credential: ["email": "ada@example.com", "password": .string(password)])).status
            }
            #expect(try await signIn("first password") == 200, "nothing changed")

            try await page.type("a new password", into: "#newPassword")
            try await page.type("a new password", into: "#confirmPassword")
            try await page.click("button[type=submit]")
            try await page.waitUntil("document.querySelector('h1')?.textContent === 'Password changed'", "the reset")
            #expect(try await signIn("a new password") == 200)
            #expect(try await signIn("first password") == 401)

            // The same link again: refused in words, nothing changed.
            try await page.navigate(mail.link)
            try await page.type("a third password", into: "#newPassword")
            try await page.type("a third password", into: "#confirmPassword")
            try await page.click("button[type=submit]")
            try await page.waitUntil("document.querySelector('h1')?.textContent === 'This link cannot be used'", "the refusal")
            #expect(try await page.evaluate("document.querySelector('.error').textContent").string?.contains("already used") == true)
            #expect(try await signIn("a new password") == 200)
            #expect(try await page.trouble() == [])
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aPersonConfirmsTheirAddressWithOneClick() async throws {
        try await withPage { _, idp, client, page in
            let signUp = try await client.post("/v1/sign-up", json: ["email": "bob@example.com", "password": "first password"])
            let token = try #require(try JSONSerialization.jsonObject(with: Data(signUp.body)) as? [String: Any])
                .flatMap { ($0["session"] as? [String: Any])?["accessToken"] as? String }
            let bearer: KeyValuePairs<String, String> = ["Authorization": "Bearer \(token ?? "")"]
            #expect(try await client.post("/v1/users/me/email-verification", headers: bearer, body: []).status == 202)
            let mail = try #require(idp.devIdP.mailOutbox.mails(to: "bob@example.com").last)
            try await page.navigate(mail.link)
            #expect(try await heading(page) == "Confirm your email address")
            #expect(try await client.get("/v1/users/me", headers: bearer).bodyText.contains(#""emailVerified":false"#), "opening the link changes nothing")
            try await page.click("button[type=submit]")
            try await page.waitUntil("document.querySelector('h1')?.textContent === 'Address confirmed'", "the confirmation")
            #expect(try await client.get("/v1/users/me", headers: bearer).bodyText.contains(#""emailVerified":true"#))
            #expect(try await page.trouble() == [])
        }
    }
}
