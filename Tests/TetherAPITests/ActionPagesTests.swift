import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherHTTP
import TetherTesting

@Suite("/actions pages over HTTP: headers, escaping, forms")
struct ActionPagesTests {
    @Test func pagesCarryThePolicyEscapeWhatTheLinkSaysAndChangeNothingWhenOpened() async throws {
        try await DevService.run { service in
            let incomplete = try await service.client.get("/actions/reset-password")
            #expect(incomplete.status == 400)
            #expect(incomplete.bodyText.contains("Copy the whole link"))
            let hostile = try await service.client.get("/actions/verify-email?code=%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E")
            #expect(hostile.status == 200)
            #expect(!hostile.bodyText.contains("<script>"))
            #expect(hostile.bodyText.contains("&quot;&gt;&lt;script&gt;"))
            let policy = try #require(hostile.headers["content-security-policy"])
            #expect(policy.contains("default-src 'none'"))
            #expect(policy.contains("script-src 'self'"))
            #expect(policy.contains("form-action 'self'"))
            #expect(!policy.contains("unsafe"))
            #expect(hostile.headers["x-frame-options"] == "DENY")
            #expect(hostile.headers["cache-control"] == "no-store")
            #expect(try await service.client.get("/actions/app.css").headers["content-type"] == "text/css; charset=utf-8")
            let posted = try await service.client.post(
                "/actions/verify-email", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Array("code=nonsense".utf8))
            #expect(posted.status == 400)
            #expect(posted.bodyText.contains("This link cannot be used"))
            #expect(try await service.totalEvents() == 0)
        }
    }

    @Test func theUndoFormPutsTheOldAddressBack() async throws {
        try await DevService.run { service in
            let signUp = try await service.client.post("/v1/sign-up", json: ["email": "ada@example.com", "password": "first password"])
            let ada = try signUp.decodeJSON(SignedIn.self)
            let bearer: KeyValuePairs<String, String> = ["Authorization": "Bearer \(ada.session.accessToken)"]
            try await service.verifyEmail("ada@example.com", accessToken: ada.session.accessToken)
            #expect(try await service.client.post("/v1/users/me/email", headers: bearer, json: ["email": "mallory@example.com"]).status == 202)
            let change = try await service.lastMail(to: "mallory@example.com")
            let moved = try await service.client.post(
                "/actions/verify-email", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Array("code=\(change.code)".utf8))
            #expect(moved.status == 200)
            #expect(moved.bodyText.contains("mallory@example.com"))
            let notice = try await service.lastMail(to: "ada@example.com")
            let opened = try await service.client.get(String(notice.link.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" }))
            #expect(opened.status == 200)
            #expect(opened.bodyText.contains("Put my address back"))
            let undone = try await service.client.post(
                "/actions/undo-email-change", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Array("code=\(notice.code)".utf8))
            #expect(undone.status == 200)
            #expect(undone.bodyText.contains("ada@example.com again"))
            #expect(try await service.signIn(service.password("ada@example.com", "first password")).status == 200)
        }
    }
}
