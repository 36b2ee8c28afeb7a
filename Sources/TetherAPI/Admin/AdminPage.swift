import TetherHTTP

/// The support web page at `GET /admin`: sign in with an admin key, find a user, see their
/// card and timeline, and act on them behind a confirmation, all over the `/v1/admin` API.
///
/// The page is three same-origin documents (the markup, `/admin/app.css` and `/admin/app.js`)
/// so that its Content-Security-Policy can refuse every inline script and style and every
/// other origin. Trusted Types make every HTML sink (`innerHTML` and the like) throw: what the
/// API answers reaches the page only as text. The documents hold no data and need no key;
/// the key a person types stays in that tab's `sessionStorage` and travels only in the
/// `Authorization` header of the page's own API calls, never in a cookie or a URL.
public struct AdminPage: Sendable {
    /// The policy every document of the page is served with.
    public static let contentSecurityPolicy = [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    ].joined(separator: "; ")

    /// One document of the page, answered the same way to everyone.
    struct Document: Sendable {
        var path: String
        var contentType: String
        var text: String

        /// The answer, with the headers that keep it out of frames, caches and other sites' hands.
        var response: HTTPResponse {
            AdminPage.page(status: 200, contentType: contentType, text: text, policy: AdminPage.contentSecurityPolicy)
        }
    }

    /// A document of a page for people (this one, or the `/actions` pages), with `policy` and the
    /// headers that keep it out of frames, caches and other sites' hands.
    static func page(status: Int, contentType: String, text: String, policy: String) -> HTTPResponse {
        HTTPResponse(
            status: status,
            headers: [
                "Content-Type": contentType,
                "Content-Security-Policy": policy,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-store",
                "X-Frame-Options": "DENY",
                "Cross-Origin-Opener-Policy": "same-origin",
                "Cross-Origin-Resource-Policy": "same-origin",
            ],
            body: Array(text.utf8))
    }

    /// The markup, the style sheet and the script.
    static let documents = [
        Document(path: "/admin", contentType: "text/html; charset=utf-8", text: markup),
        Document(path: "/admin/app.css", contentType: "text/css; charset=utf-8", text: styleSheet),
        Document(path: "/admin/app.js", contentType: "text/javascript; charset=utf-8", text: script),
    ]

    public init() {}

    /// Adds `GET /admin`, `/admin/app.css` and `/admin/app.js` to `router`.
    public func register(on router: inout Router) {
        for document in Self.documents {
            let response = document.response
            router.get(document.path) { _ in response }
        }
    }
}
