import Foundation
import Synchronization
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherProviders
import TetherTesting

/// A loopback webhook that answers each POST with the next status of a script (the last one repeats).
final class SMSWebhookReceiver: Sendable {
    struct Delivery: Sendable {
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    struct Answer: Sendable {
        var status: Int
        var retryAfter: String? = nil
        var delay: Duration = .zero
    }

    /// The script and what arrived, shared with the route handler.
    private final class Record: Sendable {
        let state: Mutex<(answers: [Answer], deliveries: [Delivery])>

        init(_ answers: [Answer]) {
            state = Mutex((answers: answers, deliveries: []))
        }

        /// Keeps `delivery` and takes the answer for it.
        func receive(_ delivery: Delivery) -> Answer {
            state.withLock { state in
                state.deliveries.append(delivery)
                return state.answers.count > 1 ? state.answers.removeFirst() : state.answers[0]
            }
        }
    }

    let server: HTTPServer
    private let record: Record

    init(_ answers: [Answer]) throws {
        let record = Record(answers)
        var router = Router()
        router.post("/sms") { request in
            let answer = record.receive(Delivery(headers: request.headers, body: request.body))
            if answer.delay > .zero { try await Task.sleep(for: answer.delay) }
            var headers: HTTPHeaders = [:]
            if let retryAfter = answer.retryAfter { headers["Retry-After"] = retryAfter }
            return HTTPResponse(status: answer.status, headers: headers, body: Array("{}".utf8))
        }
        self.record = record
        server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: router)
        try server.start()
    }

    convenience init(statuses: Int...) throws {
        try self.init(statuses.map { Answer(status: $0) })
    }

    var url: URL { URL(string: "http://127.0.0.1:\(server.boundPort)/sms")! }

    var deliveries: [Delivery] { record.state.withLock { $0.deliveries } }
}

@Suite("SMS webhook sender against a loopback receiver")
struct WebhookSMSSenderTests {
    static let secret = "whsec-0123456789abcdef"
    let message = SMSMessage(phoneNumber: "+15555550100", body: "Your Tether code is 123456", code: "123456")

    private func sender(_ url: URL, timeout: TimeInterval = 20, maxAttempts: Int = 3) -> WebhookSMSSender {
        var configuration = WebhookSMSSender.Configuration(url: url, secret: Self.secret)
        configuration.timeout = timeout
        configuration.maxAttempts = maxAttempts
        return WebhookSMSSender(configuration: configuration)
    }

    /// Runs `body` with a receiver answering `answers`, and shuts it down after.
    private func withReceiver(_ answers: [SMSWebhookReceiver.Answer], _ body: (SMSWebhookReceiver) async throws -> Void) async throws {
        let receiver = try SMSWebhookReceiver(answers)
        do {
            try await body(receiver)
        } catch {
            await receiver.server.shutdown()
            throw error
        }
        await receiver.server.shutdown()
    }

    private func withReceiver(statuses: Int..., body: (SMSWebhookReceiver) async throws -> Void) async throws {
        try await withReceiver(statuses.map { SMSWebhookReceiver.Answer(status: $0) }, body)
    }

    /// Sends `message`, expecting the delivery error; answers it and the seconds the attempts took.
    private func failingSend(_ sender: WebhookSMSSender) async -> (error: WebhookDeliveryError?, seconds: Double) {
        let start = ContinuousClock.now
        do {
            try await sender.send(message)
            return (nil, 0)
        } catch {
            let elapsed = ContinuousClock.now - start
            return (error as? WebhookDeliveryError, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
    }

    @Test func aMessageIsPostedAsJSONWithASignatureTheSecretVerifies() async throws {
        try await withReceiver(statuses: 200) { receiver in
            try await sender(receiver.url).send(message)
            let delivery = try #require(receiver.deliveries.first)
            #expect(receiver.deliveries.count == 1)
            #expect(delivery.headers["Content-Type"] == "application/json")
            #expect(try JSONDecoder().decode([String: String].self, from: Data(delivery.body))
                == ["to": "+15555550100", "body": "Your Tether code is 123456"])
            #expect(delivery.headers["Idempotency-Key"]?.isEmpty == false)

            let header = try #require(delivery.headers["X-Tether-Signature"])
            let parts = Dictionary(uniqueKeysWithValues: header.split(separator: ",").map { part in
                let pair = part.split(separator: "=", maxSplits: 1)
                return (String(pair[0]), String(pair.count == 2 ? pair[1] : ""))
            })
            let timestamp = try #require(parts["t"].flatMap(Int.init))
            #expect(abs(Double(timestamp) - Date().timeIntervalSince1970) < 30)
            // What a receiver does: HMAC-SHA256 over "<t>." + the raw body, compared to v1.
            let signed = Array("\(timestamp).".utf8) + delivery.body
            let expected = HMAC.authenticationCode(for: signed, key: Array(Self.secret.utf8), digest: .sha256)
                .map { String(format: "%02x", $0) }.joined()
            #expect(parts["v1"] == expected)
            let forged = HMAC.authenticationCode(for: signed, key: Array("another-secret-of-16".utf8), digest: .sha256)
                .map { String(format: "%02x", $0) }.joined()
            #expect(parts["v1"] != forged)
        }
    }

    @Test func aServerErrorIsRetriedAndTheNextAttemptDelivers() async throws {
        try await withReceiver(statuses: 500, 200) { receiver in
            try await sender(receiver.url).send(message)
            let deliveries = receiver.deliveries
            #expect(deliveries.count == 2)
            #expect(deliveries[0].body == deliveries[1].body)
            #expect(deliveries[0].headers["Idempotency-Key"] == deliveries[1].headers["Idempotency-Key"],
                    "a retry carries the same key, so the receiver can drop a duplicate")
        }
    }

    @Test func aReceiverThatAlwaysFailsIsTriedThreeTimesThenSMSUnavailable() async throws {
        try await withReceiver(statuses: 500) { receiver in
            let (error, seconds) = await failingSend(sender(receiver.url))
            #expect(error == .receiverFailed)
            #expect(error?.problem.status == 503)
            #expect(error?.problem.code == "sms_unavailable")
            #expect(error?.problem.headers["Retry-After"] == String(WebhookDeliveryError.defaultRetryAfterSeconds))
            #expect(receiver.deliveries.count == 3)
            #expect(seconds >= 0.6, "backoff waits 0.2 s, then 0.4 s")
            #expect(seconds < 10)
        }
    }

    @Test func aReceiverThatIsDownIsAnsweredAs503SMSUnavailable() async throws {
        // A port that was just bound and released: nothing listens there.
        let closed = try SMSWebhookReceiver(statuses: 200)
        let url = closed.url
        await closed.server.shutdown()
        let sender = sender(url)
        let (error, seconds) = await failingSend(sender)
        #expect(error == .unreachable)
        #expect(seconds < 10)

        // Through the HTTP server, as a route that sends a code would answer.
        var router = Router()
        router.post("/send") { _ in
            try await sender.send(message)
            return .noContent()
        }
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: router)
        try server.start()
        let client = HTTPTestClient(port: server.boundPort)
        let response = try await client.post("/send", json: [String: String]())
        await client.close()
        await server.shutdown()
        #expect(response.status == 503)
        #expect(response.headers["Retry-After"] == String(WebhookDeliveryError.defaultRetryAfterSeconds))
        #expect(try response.decodeJSON([String: JSONValue].self)["code"] == "sms_unavailable")
    }

    @Test func aSlowReceiverTimesOutOnEveryAttempt() async throws {
        // A second per attempt is time enough for a loaded machine to deliver the request; the receiver waits longer.
        try await withReceiver([.init(status: 200, delay: .seconds(4))]) { receiver in
            let (error, seconds) = await failingSend(sender(receiver.url, timeout: 1, maxAttempts: 2))
            #expect(error == .unreachable)
            // The sender gave up on the second attempt before a loaded receiver may have logged it: wait a little.
            for _ in 0..<50 where receiver.deliveries.count < 2 { try await Task.sleep(for: .milliseconds(100)) }
            #expect(receiver.deliveries.count == 2)
            // Without the timeout both attempts would wait out the receiver (8 s and more); about 2.2 s is
            // expected, and the bound leaves room for a loaded CI machine.
            #expect(seconds < 7, "attempts are cut off, not waited out")
        }
    }

    @Test(arguments: [400, 401, 404, 422])
    func aClientErrorIsNotRetried(status: Int) async throws {
        try await withReceiver(statuses: status, 200) { receiver in
            let (error, _) = await failingSend(sender(receiver.url))
            #expect(error == .rejected)
            #expect(error?.problem.code == "sms_unavailable")
            #expect(receiver.deliveries.count == 1)
        }
    }

    @Test func aShortRetryAfterIsWaitedFor() async throws {
        try await withReceiver([.init(status: 429, retryAfter: "1"), .init(status: 200)]) { receiver in
            let start = ContinuousClock.now
            try await sender(receiver.url).send(message)
            #expect(receiver.deliveries.count == 2)
            #expect(ContinuousClock.now - start >= .seconds(1))
        }
    }

    @Test func aLongRetryAfterEndsTheAttemptsAndIsPassedOn() async throws {
        try await withReceiver([.init(status: 503, retryAfter: "120"), .init(status: 200)]) { receiver in
            let (error, _) = await failingSend(sender(receiver.url))
            #expect(error == .receiverFailed)
            #expect(error?.problem.headers["Retry-After"] == "120")
            #expect(receiver.deliveries.count == 1)
        }
    }
}
