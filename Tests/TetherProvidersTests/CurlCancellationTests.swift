import Foundation
import Synchronization
import Testing
import TetherJOSE
import TetherProviders
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Cancelling a task whose request is in flight while the peer drops the connection. With `URLSession`, which
/// outbound requests used before libcurl directly, this race deadlocked the cancelling thread
/// (swift-corelibs-foundation #5412): a server stopping cancelled a delivery to a receiver gone away, and its
/// stop hung for good. It stays as the check that a cancelled transfer always ends.
@Suite("Outbound transfers are cancelled without hanging")
struct CurlCancellationTests {
    /// A loopback listener that accepts each connection and closes it at once, until `stop()`.
    private final class DroppingListener: Sendable {
        private let listener: LoopbackSocket
        var port: Int { listener.port }
        private let stopped = StopFlag()

        init() throws {
            let listening = try LoopbackSocket()
            listener = listening
            Thread.detachNewThread { [stopped] in
                while !stopped.isSet {
                    let connection = accept(listening.descriptor, nil, nil)
                    if connection >= 0 { close(connection) } else { return }
                }
            }
        }

        func stop() {
            stopped.set()
            listener.close()
        }
    }

    /// A flag the accepting thread reads (a class, so the thread can hold it).
    private final class StopFlag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .relaxed) }
        func set() { value.store(true, ordering: .relaxed) }
    }

    @Test(arguments: ["GET", "POST"])
    func cancellingTransfersAsThePeerDropsThemNeverHangs(method: String) async throws {
        let listener = try DroppingListener()
        defer { listener.stop() }
        // What the webhook deliverer, the provider-call outbox and key-set fetches use.
        let client = CurlProviderHTTPClient()
        let url = URL(string: "http://127.0.0.1:\(listener.port)/")!
        var hung = 0
        for round in 0..<300 {
            let transfer = Task {
                if method == "POST" {
                    _ = try? await client.post(url: url, headers: ["X-Round": "\(round)"], body: Array("{}".utf8), timeout: 5, maxBytes: 1024)
                } else {
                    _ = try? await client.get(url: url, headers: [:], timeout: 5, maxBytes: 1024)
                }
            }
            // Cancel at about the moment the refusal arrives: 0 to 1.5 ms after the start.
            if round % 3 > 0 { try await Task.sleep(for: .microseconds(500 * (round % 4))) }
            // The cancel itself runs on a dispatch thread: a deadlock there must not take the test with it.
            let finished = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let once = Mutex(false)
                let resume: @Sendable (Bool) -> Void = { value in
                    if once.withLock({ done in defer { done = true }; return !done }) { continuation.resume(returning: value) }
                }
                DispatchQueue.global().async {
                    transfer.cancel()
                    Task { await transfer.value; resume(true) }
                }
                DispatchQueue.global().asyncAfter(deadline: .now() + 5) { resume(false) }
            }
            if !finished { hung += 1; break }
        }
        #expect(hung == 0, "a cancelled transfer did not end within 5 s")
    }
}
