import Foundation
import TetherCore
import TetherHTTP
import TetherProviders

/// The pages people reach from Tether's mails: `/actions/reset-password`, `/actions/verify-email`
/// (a verification or an email change) and `/actions/undo-email-change`.
///
/// Plain server-rendered HTML and one same-origin style sheet; no script and no outside asset. They
/// are served with the support page's Content-Security-Policy, except that their forms may post to
/// the page itself (`form-action 'self'`). Opening a link changes nothing: a mail scanner that
/// fetches it spends no code. The change happens when the person submits the page's form, which
/// carries the code back; the code is the form's only secret, so no other site can forge one.
/// Links may name the code `code` (Tether's), `oobCode` (Firebase's) or `token` (Parse's).
public struct ActionPages: Sendable {
    let flows: EmailFlows

    /// The support page's policy, with forms allowed to post to the page that shows them.
    public static let contentSecurityPolicy = AdminPage.contentSecurityPolicy
        .replacingOccurrences(of: "form-action 'none'", with: "form-action 'self'")

    public init(flows: EmailFlows) {
        self.flows = flows
    }

    public func register(on router: inout Router) {
        let style = AdminPage.page(status: 200, contentType: "text/css; charset=utf-8", text: Self.styleSheet, policy: Self.contentSecurityPolicy)
        router.get("/actions/app.css") { _ in style }
        router.get("/actions/reset-password") { request in
            guard let code = Self.code(in: request.query) else { return Self.incompleteLink }
            return resetForm(code: code, error: nil, status: 200)
        }
        router.post("/actions/reset-password") { request in
            let form = Self.form(request)
            guard let code = Self.code(in: form) else { return Self.incompleteLink }
            let password = form["newPassword"] ?? ""
            guard password == form["confirmPassword"] else {
                return resetForm(code: code, error: "The two passwords are not the same.", status: 400)
            }
            do {
                let account = try await flows.resetPassword(code: code, newPassword: password, context: Self.context(request))
                return Self.done("Password changed", [
                    "The password of \(account.email ?? "your account") is changed, and every session was signed out.",
                    "Sign in with the new password.",
                ])
            } catch let error as ProviderError {
                return resetForm(code: code, error: error.detail, status: 400) // the password's policy: the code is unspent
            } catch {
                return Self.refused(error)
            }
        }
        registerConfirmation(
            on: &router, path: "/actions/verify-email", purposes: [.verifyEmail, .changeEmail], title: "Confirm your email address",
            lines: ["Confirm that this address is yours."], button: "Confirm my address", doneTitle: "Address confirmed"
        ) { account in ["Your account uses \(account.email ?? "this address"), and it is verified."] }
        registerConfirmation(
            on: &router, path: "/actions/undo-email-change", purposes: [.undoEmailChange], title: "Undo the email change",
            lines: ["Your account's email address was changed. If you did not ask for that, put this address back:",
                    "every session will be signed out."],
            button: "Put my address back", doneTitle: "Address restored"
        ) { account in
            ["Your account uses \(account.email ?? "its old address") again, and every session was signed out.",
             "If someone else changed it, also reset your password."]
        }
    }

    /// A page whose one button uses the link's code for `purposes`: opening it shows the button, posting uses the code.
    private func registerConfirmation(
        on router: inout Router, path: String, purposes: Set<EmailCodePurpose>, title: String, lines: [String], button: String,
        doneTitle: String, done: @escaping @Sendable (UserAccount) -> [String]
    ) {
        router.get(path) { request in
            guard let code = Self.code(in: request.query) else { return Self.incompleteLink }
            return Self.confirmForm(path: path, title: title, code: code, lines: lines, button: button)
        }
        router.post(path) { request in
            guard let code = Self.code(in: Self.form(request)) else { return Self.incompleteLink }
            do {
                let account = try await flows.confirm(
                    code: code, purposes: purposes, EmailFlows.Request(context: Self.context(request), host: request.headers["host"]))
                return Self.done(doneTitle, done(account))
            } catch {
                return Self.refused(error)
            }
        }
    }

    // MARK: Pages

    private func resetForm(code: String, error: String?, status: Int) -> HTTPResponse {
        let policy = flows.commands.passwords.policy
        let fields = """
            <label for="newPassword">New password</label>
            <input id="newPassword" name="newPassword" type="password" autocomplete="new-password" required minlength="\(policy.minimumLength)" maxlength="\(policy.maximumLength)">
            <label for="confirmPassword">The same again</label>
            <input id="confirmPassword" name="confirmPassword" type="password" autocomplete="new-password" required minlength="\(policy.minimumLength)" maxlength="\(policy.maximumLength)">
            """
        return Self.page(status: status, title: "Choose a new password", body: """
            <p>Use \(policy.minimumLength) to \(policy.maximumLength) characters; any characters count, spaces too. A long phrase is easier to remember than a short jumble.</p>
            \(error.map { "<p class=\"error\" role=\"alert\">\(Self.escape($0))</p>" } ?? "")
            <form method="post" action="/actions/reset-password">
            <input type="hidden" name="code" value="\(Self.escape(code))">
            \(fields)
            <button type="submit">Change my password</button>
            </form>
            """)
    }

    private static func confirmForm(path: String, title: String, code: String, lines: [String], button: String) -> HTTPResponse {
        page(status: 200, title: title, body: """
            \(lines.map { "<p>\(escape($0))</p>" }.joined())
            <form method="post" action="\(path)">
            <input type="hidden" name="code" value="\(escape(code))">
            <button type="submit">\(escape(button))</button>
            </form>
            """)
    }

    private static func done(_ title: String, _ lines: [String]) -> HTTPResponse {
        page(status: 200, title: title, body: lines.map { "<p class=\"done\">\(escape($0))</p>" }.joined())
    }

    /// A refused code or request, in words a person can act on; the status is the API's.
    private static func refused(_ error: any Error) -> HTTPResponse {
        let problem = Problem(converting: error) ?? .internal
        let advice = problem.status == 401 || problem.status == 400
            ? "Ask for a new link and use the newest mail." : "Nothing was changed; try again in a moment."
        return page(status: problem.status, title: "This link cannot be used", body: """
            <p class="error" role="alert">\(escape(problem.detail ?? problem.title))</p><p>\(escape(advice))</p>
            """)
    }

    private static var incompleteLink: HTTPResponse {
        page(status: 400, title: "This link is incomplete", body: "<p class=\"error\" role=\"alert\">The link has no code. Copy the whole link from the mail.</p>")
    }

    private static func page(status: Int, title: String, body: String) -> HTTPResponse {
        AdminPage.page(status: status, contentType: "text/html; charset=utf-8", text: """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">
            <title>\(escape(title))</title>
            <link rel="stylesheet" href="/actions/app.css">
            </head>
            <body>
            <main>
            <h1>\(escape(title))</h1>
            \(body)
            </main>
            </body>
            </html>
            """, policy: contentSecurityPolicy)
    }

    static let styleSheet = """
        body { font: 16px/1.5 system-ui, sans-serif; margin: 0; background: #f4f4f2; color: #1c1c1c; }
        main { max-width: 26rem; margin: 3rem auto; padding: 1.5rem 2rem; background: #fff; border-radius: 8px; box-shadow: 0 1px 3px #0002; }
        h1 { font-size: 1.4rem; margin-top: 0; }
        label { display: block; margin-top: 1rem; font-weight: 600; }
        input[type=password] { width: 100%; box-sizing: border-box; padding: .5rem; font-size: 1rem; }
        button { margin-top: 1.25rem; padding: .6rem 1.2rem; font-size: 1rem; border: 0; border-radius: 4px; background: #1f5fbf; color: #fff; }
        .error { color: #a4161a; }
        .done { color: #1d6b2c; }
        """

    // MARK: Pieces

    /// The code a link or a form carries: `code`, `oobCode` (Firebase's links) or `token` (Parse's).
    static func code(in fields: [String: String]) -> String? {
        (fields["code"] ?? fields["oobCode"] ?? fields["token"]).flatMap { $0.isEmpty ? nil : $0 }
    }

    static func form(_ request: HTTPRequest) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in HTTPRequest.formFields(String(decoding: request.body, as: UTF8.self)) where fields[name] == nil {
            fields[name] = value
        }
        return fields
    }

    static func context(_ request: HTTPRequest) -> CommandContext {
        CommandContext(metadata: EventMetadata(
            actor: .anonymous, clientIP: request.remoteAddress, userAgent: request.headers["user-agent"], surface: "actions"))
    }

    /// Text as HTML character data or a quoted attribute value.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
