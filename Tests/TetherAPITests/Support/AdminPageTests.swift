import Foundation
import Testing
import TetherAPI
import TetherHTTP
import TetherTesting

@Suite("Support page documents over HTTP")
struct AdminPageTests {
    private static let documents = [
        ("/admin", "text/html; charset=utf-8"),
        ("/admin/app.css", "text/css; charset=utf-8"),
        ("/admin/app.js", "text/javascript; charset=utf-8"),
    ]

    @Test func everyDocumentIsServedWithoutAKeyUnderAStrictPolicy() async throws {
        try await SupportHarness.run { harness in
            let eventsBefore = try await harness.owner.query("SELECT count(*) AS n FROM events")[0].decode("n", as: Int.self)
            for (path, contentType) in Self.documents {
                let response = try await harness.client.get(path)
                #expect(response.status == 200, "\(path)")
                #expect(response.headers["Content-Type"] == contentType, "\(path)")
                let policy = try #require(response.headers["Content-Security-Policy"], "\(path)")
                #expect(policy == AdminPage.contentSecurityPolicy)
                for directive in ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
                                  "frame-ancestors 'none'", "form-action 'none'", "base-uri 'none'", "require-trusted-types-for 'script'"] {
                    #expect(policy.contains(directive), "\(path): \(directive)")
                }
                #expect(!policy.contains("unsafe"), "\(path)")
                #expect(response.headers["X-Content-Type-Options"] == "nosniff", "\(path)")
                #expect(response.headers["Referrer-Policy"] == "no-referrer", "\(path)")
                #expect(response.headers["Cache-Control"] == "no-store", "\(path)")
                #expect(response.headers["Set-Cookie"] == nil, "\(path)")
                #expect(!response.bodyText.isEmpty, "\(path)")
            }
            let eventsAfter = try await harness.owner.query("SELECT count(*) AS n FROM events")[0].decode("n", as: Int.self)
            #expect(eventsAfter == eventsBefore, "loading the page holds no data and records nothing")
            #expect(try await harness.client.get("/admin/other.js").status == 404)
        }
    }

    @Test func theMarkupLoadsOnlyItsOwnScriptAndStyleSheetAndHasNothingInline() async throws {
        try await SupportHarness.run { harness in
            let html = try await harness.client.get("/admin").bodyText
            let scripts = Self.matches(#"<script\b[^>]*>"#, in: html)
            #expect(scripts == [#"<script src="/admin/app.js" defer>"#])
            #expect(Self.matches(#"<script\b[^>]*>\s*[^<\s]"#, in: html).isEmpty, "no inline script")
            #expect(Self.matches(#"<style\b"#, in: html).isEmpty, "no style element")
            #expect(Self.matches(#"\sstyle\s*="#, in: html).isEmpty, "no style attribute")
            #expect(Self.matches(#"\son[a-z]+\s*="#, in: html).isEmpty, "no inline event handler")
            let references = Self.matches(#"\s(?:src|href)="[^"]*""#, in: html)
            #expect(references.count == 3)
            for reference in references {
                let target = reference.split(separator: "\"")[1]
                #expect(target.hasPrefix("/admin/") || target == "data:,", "\(reference) stays on this origin")
            }
        }
    }

    @Test func theScriptPutsDataOnThePageAsTextAndKeepsTheKeyInTheTab() async throws {
        try await SupportHarness.run { harness in
            let script = try await harness.client.get("/admin/app.js").bodyText
            for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "DOMParser"] {
                #expect(!script.contains(sink), "\(sink) would parse data as HTML or code")
            }
            for store in ["localStorage", "document.cookie", "indexedDB"] {
                #expect(!script.contains(store), "the key must not outlive the tab: \(store)")
            }
            #expect(script.contains("sessionStorage.setItem(KEY_ITEM, key)"))
            #expect(script.contains("credentials: \"omit\""), "no cookie goes with the API calls")
            // The only URLs the script builds are the API's, and the key is never one of their parts.
            #expect(Self.matches(#"api\("[^"]*"#, in: script).allSatisfy { $0.hasPrefix("api(\"/v1/admin/users") || $0 == "api(\"/v1/admin/webhooks" })
            #expect(!script.contains("?key=") && !script.contains("&key="))
        }
    }

    private static func matches(_ pattern: String, in text: String) -> [String] {
        let expression = try! NSRegularExpression(pattern: pattern, options: [.caseInsensitive])
        return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).map {
            String(text[Range($0.range, in: text)!])
        }
    }
}
