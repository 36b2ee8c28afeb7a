import Foundation
import Synchronization
import TetherHTTP
import TetherTesting

/// A loopback webhook (SMS or mail) that can be switched off: while down it answers 503 and keeps nothing.
final class WebhookReceiver: Sendable {
    /// A request it took: its body and headers.
    struct Received: Sendable {
        var body: [UInt8]
        var headers: HTTPHeaders

        /// The body's members, for the senders' flat JSON objects of strings.
        func members() throws -> [String: String] {
            guard let members = try JSONSerialization.jsonObject(with: Data(body)) as? [String: String] else {
                throw HarnessError("the webhook body is not an object of strings")
            }
            return members
        }
    }

    private final class State: Sendable {
        let mutex = Mutex<(isUp: Bool, received: [Received], answer: Int, delay: Duration)>((true, [], 204, .zero))
    }
    private let state = State()
    private let server: HTTPServer
    let url: URL

    init() throws {
        let state = self.state
        var router = Router()
        router.post("/hook") { request in
            let delay = state.mutex.withLock { $0.delay }
            if delay > .zero { try await Task.sleep(for: delay) }
            let (isUp, answer) = state.mutex.withLock { current in
                if current.isUp { current.received.append(Received(body: request.body, headers: request.headers)) }
                return (current.isUp, current.answer)
            }
            return HTTPResponse(status: isUp ? answer : 503)
        }
        server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: router)
        try server.start()
        url = URL(string: "http://127.0.0.1:\(server.boundPort)/hook")!
    }

    var isUp: Bool {
        get { state.mutex.withLock { $0.isUp } }
        set { state.mutex.withLock { $0.isUp = newValue } }
    }

    /// The status it answers while up (204 unless told otherwise).
    var answer: Int {
        get { state.mutex.withLock { $0.answer } }
        set { state.mutex.withLock { $0.answer = newValue } }
    }

    /// How long it takes before answering.
    var delay: Duration {
        get { state.mutex.withLock { $0.delay } }
        set { state.mutex.withLock { $0.delay = newValue } }
    }

    /// Every request taken, oldest first.
    var received: [Received] { state.mutex.withLock { $0.received } }

    /// The six digits of the last text message received.
    func lastCode() throws -> String {
        guard let text = try received.last?.members()["body"], let range = text.range(of: #"\d{6}"#, options: .regularExpression) else {
            throw HarnessError("the receiver has no message with a code")
        }
        return String(text[range])
    }

    func stop() async {
        await server.shutdown()
    }
}
