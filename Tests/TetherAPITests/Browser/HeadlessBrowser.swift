import TetherCore
import Foundation
import Synchronization
import TetherHTTP

#if canImport(Glibc)
    import Glibc
#endif

/// A headless Chromium driven over the Chrome DevTools Protocol on a pipe (`--remote-debugging-pipe`).
///
/// Chromium reads commands on its descriptor 3 and writes answers and events on its
/// descriptor 4, each message one JSON object ended by a NUL byte; no debugging port is
/// opened, and this toolchain's `URLSessionWebSocketTask` (libcurl without WebSockets)
/// is not needed. The browser runs in a process group of its own, which `close()` ends
/// whole, with a throwaway profile. It may reach loopback only: names other than
/// 127.0.0.1 do not resolve, and anything else is sent to a proxy on a closed port.
final class HeadlessBrowser: Sendable {
    /// Debian's `chromium` package, if installed (the binary itself, not the shell wrapper).
    static let executable: String? = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    /// How long one protocol command may take.
    static let commandTimeout: Duration = .seconds(20)

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    private struct State {
        var nextID = 1
        var waiting: [Int: CheckedContinuation<JSONValue, any Error>] = [:]
        var events: [JSONValue] = []
        var closed: String?
    }

    private let pid: pid_t
    private let commands: Int32
    private let answers: Int32
    private let profile: URL
    private let state = Mutex(State())

    private init(pid: pid_t, commands: Int32, answers: Int32, profile: URL) {
        self.pid = pid
        self.commands = commands
        self.answers = answers
        self.profile = profile
    }

    /// Starts Chromium with a `width`×`height` window and begins reading what it says.
    static func launch(width: Int = 1366, height: Int = 860) throws -> HeadlessBrowser {
        guard let executable else { throw Failure("chromium is not installed (apt-get install chromium)") }
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("tether-chromium-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
        var arguments = [
            "--headless=new", "--remote-debugging-pipe", "--user-data-dir=\(profile.path)",
            "--window-size=\(width),\(height)", "--hide-scrollbars", "--force-device-scale-factor=1",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
            "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
            "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--no-pings",
            "--disable-breakpad", "--mute-audio", "--disable-dev-shm-usage",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--proxy-server=http://127.0.0.1:9",
        ]
        // Chromium's sandbox refuses to run as root; CI runs as root.
        if getuid() == 0 { arguments.append("--no-sandbox") }
        arguments.append("about:blank")

        // Two pipes, their child ends first moved above 10 so that placing them at 3 and 4 cannot clobber each other.
        var toBrowser: [Int32] = [0, 0]
        var fromBrowser: [Int32] = [0, 0]
        guard pipe(&toBrowser) == 0, pipe(&fromBrowser) == 0 else { throw Failure("pipe failed: errno \(errno)") }
        let childReads = fcntl(toBrowser[0], F_DUPFD, 10)
        let childWrites = fcntl(fromBrowser[1], F_DUPFD, 10)
        Glibc.close(toBrowser[0])
        Glibc.close(fromBrowser[1])
        _ = fcntl(toBrowser[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fromBrowser[0], F_SETFD, FD_CLOEXEC)
        defer {
            Glibc.close(childReads)
            Glibc.close(childWrites)
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Keep the tests' sockets (the service's listener among them) out of the browser.
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for descriptor in open.compactMap({ Int32($0) })
        where descriptor > 2 && descriptor != childReads && descriptor != childWrites && fcntl(descriptor, F_GETFD) >= 0 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
        posix_spawn_file_actions_adddup2(&actions, childReads, 3)
        posix_spawn_file_actions_adddup2(&actions, childWrites, 4)
        posix_spawn_file_actions_addclose(&actions, childReads)
        posix_spawn_file_actions_addclose(&actions, childWrites)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard spawned == 0 else {
            Glibc.close(toBrowser[1])
            Glibc.close(fromBrowser[0])
            throw Failure("cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        let browser = HeadlessBrowser(pid: pid, commands: toBrowser[1], answers: fromBrowser[0], profile: profile)
        let reader = Thread { browser.readMessages() }
        reader.name = "chromium-devtools"
        reader.start()
        return browser
    }

    // MARK: The protocol

    /// Sends a command (to a page when `session` is given) and waits for its answer's `result`.
    @discardableResult
    func send(_ method: String, _ parameters: [String: JSONValue] = [:], session: String? = nil) async throws -> JSONValue {
        let answer = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSONValue, any Error>) in
            let id: Int? = state.withLock { state in
                if let closed = state.closed {
                    continuation.resume(throwing: Failure("the browser is gone (\(closed)); \(method) was not sent"))
                    return nil
                }
                let id = state.nextID
                state.nextID += 1
                state.waiting[id] = continuation
                return id
            }
            guard let id else { return }
            var message: [String: JSONValue] = ["id": .int(id), "method": .string(method), "params": .object(parameters)]
            if let session { message["sessionId"] = .string(session) }
            do {
                var bytes = Array(try JSONEncoder().encode(JSONValue.object(message)))
                bytes.append(0)
                try write(bytes)
            } catch {
                resume(id, with: .failure(error))
                return
            }
            Task {
                try? await Task.sleep(for: Self.commandTimeout)
                resume(id, with: .failure(Failure("\(method) had no answer in \(Self.commandTimeout)")))
            }
        }
        if let error = answer["error"] {
            throw Failure("\(method) failed: \(error)")
        }
        return answer["result"] ?? .object([:])
    }

    /// Every event received so far (`{"method", "params", "sessionId"?}`), in order.
    var events: [JSONValue] {
        state.withLock { $0.events }
    }

    /// Opens a new tab and attaches to it.
    func newPage() async throws -> BrowserPage {
        let target = try await send("Target.createTarget", ["url": "about:blank"])
        guard let targetID = target["targetId"]?.string else { throw Failure("Target.createTarget answered \(target)") }
        let attached = try await send("Target.attachToTarget", ["targetId": .string(targetID), "flatten": true])
        guard let session = attached["sessionId"]?.string else { throw Failure("Target.attachToTarget answered \(attached)") }
        return BrowserPage(browser: self, session: session)
    }

    /// Asks the browser to quit, then ends its whole process group and removes its profile.
    func close() async {
        _ = try? await send("Browser.close")
        for _ in 0..<50 where !hasExited() {
            try? await Task.sleep(for: .milliseconds(100))
        }
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, WNOHANG)
        Glibc.close(commands)
        try? FileManager.default.removeItem(at: profile)
    }

    private func hasExited() -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == pid
    }

    // MARK: Plumbing

    private func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(commands, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw Failure("writing to the browser failed: errno \(errno)")
            }
            offset += written
        }
    }

    private func resume(_ id: Int, with result: Result<JSONValue, any Error>) {
        let continuation = state.withLock { $0.waiting.removeValue(forKey: id) }
        continuation?.resume(with: result)
    }

    /// Runs on its own thread until the browser closes its end: splits messages at NUL and dispatches them.
    private func readMessages() {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(answers, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            pending.append(contentsOf: buffer[0..<count])
            while let end = pending.firstIndex(of: 0) {
                let message = try? JSONDecoder().decode(JSONValue.self, from: Data(pending[..<end]))
                pending.removeSubrange(...end)
                guard let message else { continue }
                if let id = message["id"]?.int {
                    resume(id, with: .success(message))
                } else {
                    state.withLock { $0.events.append(message) }
                }
            }
        }
        Glibc.close(answers)
        let waiting = state.withLock { state in
            state.closed = "its pipe closed"
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for continuation in waiting {
            continuation.resume(throwing: Failure("the browser closed its pipe"))
        }
    }
}

/// One tab of a ``HeadlessBrowser``: navigation, script evaluation, typing, clicking and screenshots.
struct BrowserPage: Sendable {
    let browser: HeadlessBrowser
    let session: String

    /// Sends a command to this tab.
    @discardableResult
    func send(_ method: String, _ parameters: [String: JSONValue] = [:]) async throws -> JSONValue {
        try await browser.send(method, parameters, session: session)
    }

    /// This tab's events so far.
    var events: [JSONValue] {
        browser.events.filter { $0["sessionId"]?.string == session }
    }

    /// The value of a JavaScript expression (promises awaited); throws with the exception's text when it throws.
    @discardableResult
    func evaluate(_ expression: String) async throws -> JSONValue {
        let result = try await send("Runtime.evaluate", [
            "expression": .string(expression), "returnByValue": true, "awaitPromise": true,
        ])
        if let exception = result["exceptionDetails"] {
            throw HeadlessBrowser.Failure("\(expression) threw: \(exception["exception"]?["description"] ?? exception)")
        }
        return result["result"]?["value"] ?? .null
    }

    /// Waits until `expression` is true, polling; throws with `what` after `timeout`.
    func waitUntil(_ expression: String, _ what: String, timeout: Duration = .seconds(20)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await evaluate("Boolean(\(expression))") == .bool(true) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw HeadlessBrowser.Failure("timed out waiting for \(what)")
    }

    /// Loads `url` and waits for the document and its scripts.
    func navigate(_ url: String) async throws {
        try await send("Page.navigate", ["url": .string(url)])
        try await waitUntil("location.href === \(Self.literal(url)) && document.readyState === 'complete'", "\(url) to load")
    }

    /// Focuses the element `selector` and types `text` into it, as a keyboard would.
    func type(_ text: String, into selector: String) async throws {
        try await evaluate("document.querySelector(\(Self.literal(selector))).focus()")
        try await send("Input.insertText", ["text": .string(text)])
    }

    /// Presses Enter in the focused element (submits its form).
    func pressEnter() async throws {
        for type in ["keyDown", "keyUp"] {
            try await send("Input.dispatchKeyEvent", [
                "type": .string(type), "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r",
            ])
        }
    }

    /// Clicks the middle of the first element matching `selector` with the mouse.
    func click(_ selector: String) async throws {
        let box = try await evaluate("""
            (() => { const node = document.querySelector(\(Self.literal(selector)));
              if (!node) return null;
              node.scrollIntoView({ block: 'center' });
              const r = node.getBoundingClientRect();
              return { x: r.left + r.width / 2, y: r.top + r.height / 2 }; })()
            """)
        guard let x = box["x"]?.number, let y = box["y"]?.number else {
            throw HeadlessBrowser.Failure("nothing to click at \(selector)")
        }
        for type in ["mousePressed", "mouseReleased"] {
            try await send("Input.dispatchMouseEvent", [
                "type": .string(type), "x": .double(x), "y": .double(y), "button": "left", "clickCount": 1,
            ])
        }
    }

    /// A PNG of the viewport.
    func screenshot() async throws -> Data {
        let shot = try await send("Page.captureScreenshot", ["format": "png"])
        guard let base64 = shot["data"]?.string, let data = Data(base64Encoded: base64) else {
            throw HeadlessBrowser.Failure("Page.captureScreenshot answered no image")
        }
        return data
    }

    /// `text` as a JavaScript string literal.
    static func literal(_ text: String) -> String {
        String(decoding: try! JSONEncoder().encode(text), as: UTF8.self)
    }
}

extension JSONValue {
    /// The number inside, integer or not.
    var number: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }
}

extension BrowserPage {
    /// Records every Content-Security-Policy violation the page reports, before any of its own script runs.
    static let violationRecorder = """
        window.__violations = [];
        document.addEventListener('securitypolicyviolation', (event) =>
          window.__violations.push(event.effectiveDirective + ' ' + event.blockedURI));
        """

    /// Turns on the events ``trouble()`` reads, sets the viewport, and records CSP violations on every document.
    func watchForTrouble(width: Int, height: Int) async throws {
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] { try await send(domain) }
        try await send("Emulation.setDeviceMetricsOverride", [
            "width": .int(width), "height": .int(height), "deviceScaleFactor": 1, "mobile": false,
        ])
        try await send("Page.addScriptToEvaluateOnNewDocument", ["source": .string(Self.violationRecorder)])
    }

    /// CSP violations, uncaught exceptions, console errors and dialogs the page has produced.
    ///
    /// Network log entries are left out: an API refusal (a support key's 403) is logged
    /// there, and what the page does with refusals is what the tests check.
    func trouble() async throws -> [String] {
        var found = try await evaluate("window.__violations").elements.compactMap(\.string).map { "CSP: \($0)" }
        for event in events {
            switch event["method"]?.string {
            case "Runtime.exceptionThrown":
                found.append("exception: \(event["params"]?["exceptionDetails"]?["exception"]?["description"] ?? event)")
            case "Runtime.consoleAPICalled" where event["params"]?["type"]?.string == "error":
                found.append("console.error: \(event["params"]?["args"] ?? event)")
            case "Log.entryAdded" where event["params"]?["entry"]?["level"]?.string == "error"
                && event["params"]?["entry"]?["source"]?.string != "network":
                found.append("log: \(event["params"]?["entry"]?["text"] ?? event)")
            case "Page.javascriptDialogOpening":
                found.append("dialog: \(event["params"]?["message"] ?? event)")
            default:
                break
            }
        }
        return found
    }
}
