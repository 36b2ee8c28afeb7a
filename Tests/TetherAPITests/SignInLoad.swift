import Foundation
import Synchronization
import TetherCore
import TetherTesting

/// Sign-ins of new Apple users (`/v1/sign-in`, 201 each) from `workers` clients at once, every outcome
/// recorded with its time, until ``stop()``: the load of the crash, restart and failover suites.
final class SignInLoad: Sendable {
    struct Outcome: Sendable {
        /// The answer's status; nil when no answer came (the server was gone).
        var status: Int?
        /// The new user's id, for a 201.
        var userId: String?
        var subject: String
        var retryAfter: String?
        var at: ContinuousClock.Instant
    }

    private let outcomes = Mutex<[Outcome]>([])
    private let stopping = Mutex(false)
    private let workers = Mutex<[Task<Void, Never>]>([])

    /// Starts `workers` loops against the server on `port`, minting tokens at the dev identity provider on `idpPort`.
    init(port: Int, idpPort: Int, workers count: Int, subjectPrefix: String) {
        let tasks = (0..<count).map { worker in
            Task { [self] in
                let client = HTTPTestClient(port: port, timeout: .seconds(30))
                let idp = HTTPTestClient(port: idpPort, timeout: .seconds(30))
                var index = 0
                while !stopping.withLock({ $0 }) {
                    index += 1
                    let subject = "\(subjectPrefix)-\(worker)-\(index)"
                    var outcome = Outcome(status: nil, userId: nil, subject: subject, retryAfter: nil, at: .now)
                    do {
                        let minted = try await idp.post("/dev-idp/apple/token", json: ["sub": subject])
                        let token = try minted.decodeJSON([String: String].self)["identityToken"] ?? ""
                        let answer = try await client.post(
                            "/v1/sign-in", json: ["provider": "apple", "credential": ["identityToken": .string(token)]] as JSONValue)
                        outcome.status = answer.status
                        outcome.userId = answer.status == 201 ? try? answer.decodeJSON(SignedIn.self).user.id : nil
                        outcome.retryAfter = answer.headers["Retry-After"]
                    } catch {
                        // No answer: the server is gone (the outcome stays without a status).
                    }
                    outcome.at = .now
                    record(outcome)
                    if outcome.status != 201 { try? await Task.sleep(for: .milliseconds(20)) }
                }
                await client.close()
                await idp.close()
            }
        }
        workers.withLock { $0 = tasks }
    }

    private func record(_ outcome: Outcome) { outcomes.withLock { $0.append(outcome) } }

    var all: [Outcome] { outcomes.withLock { $0 } }

    /// The ids of the users whose sign-in was acknowledged (201).
    var acknowledged: [String] { all.compactMap(\.userId) }

    /// Polls until `condition` holds over the outcomes so far, or `limit` has passed; says which.
    func wait(upTo limit: Duration, until condition: ([Outcome]) -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if condition(all) { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition(all)
    }

    /// Ends every loop after its request in flight, and waits for them.
    func stop() async {
        stopping.withLock { $0 = true }
        for task in workers.withLock({ $0 }) { await task.value }
    }
}
