import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``HTTPClient`` on `URLSession` (libcurl on Linux): uncached, cookieless, no redirects, size-capped.
///
/// Every client shares one session, so connections (and their TLS sessions) are kept alive and
/// reused: a Facebook sign-in's two Graph calls, a webhook's deliveries and a key-set refetch do not
/// each pay a TCP and TLS handshake, nor the set-up of a session and its libcurl multi handle.
public struct URLSessionHTTPClient: HTTPClient {
    /// Creates the client; it sends on the process's shared session.
    public init() {}

    /// GETs `url`; a body beyond `maxBytes` cancels the transfer instead of buffering it.
    public func get(url: URL, timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return try await send(request, timeout: timeout, maxBytes: maxBytes)
    }

    /// Sends `request` on the shared session, following no redirect; a body beyond `maxBytes`
    /// cancels the transfer instead of buffering it, and so does `timeout` seconds without an answer
    /// (kept here: URLSession's own timer on this toolchain truncates to whole seconds, `Int(timeout) * 1000`).
    ///
    /// Cancelling the calling task cancels the transfer, from a dispatch thread. Swift runs a
    /// cancellation handler while it holds the task's status lock, and `URLSessionTask.cancel()`
    /// waits for the session's work queue; a network thread handling a socket failure holds that
    /// queue and waits for the status lock to resume the task. Called straight from the handler,
    /// the two threads deadlock (swift-corelibs-foundation #5412, fixed after this toolchain), and
    /// with them the stop of the server that cancelled a webhook delivery.
    public func send(_ request: URLRequest, timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        var request = request
        request.timeoutInterval = max(1, timeout.rounded(.up))  // URLSession's backstop; the deadline below is exact
        let shared = SharedSession.instance
        let collector = ResponseCollector(maximumBytes: maxBytes)
        let task = shared.session.dataTask(with: request)
        shared.delegate.register(collector, for: task)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let deadline = DispatchWorkItem { [weak collector] in
                    collector?.cancel(because: HTTPClientError.transport.with(detail: "no answer within \(timeout) s"))
                }
                collector.start(task, deadline: deadline, continuation: continuation)
                DispatchQueue.global().asyncAfter(deadline: .now() + max(0, timeout), execute: deadline)
            }
        } onCancel: {
            DispatchQueue.global().async { collector.cancel(because: nil) }
        }
    }
}

/// The one `URLSession` of the process, and the delegate that hands each task's callbacks to its collector.
private final class SharedSession: Sendable {
    static let instance = SharedSession()

    /// Kept-alive connections a host may have at once; libcurl queues further transfers to it. URLSession's
    /// default of 6 would cap a provider 100 ms away at about 60 calls a second.
    static let connectionsPerHost = 64

    let session: URLSession
    let delegate = SessionDelegate()

    private init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        // One session serves every caller: nothing one answer sets may ride along on another request.
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCredentialStorage = nil
        configuration.httpMaximumConnectionsPerHost = Self.connectionsPerHost
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }
}

/// Routes the shared session's callbacks to the collector of each task, by task identifier.
///
/// `@unchecked Sendable` invariant: `collectors` is read and written only while `lock` is held.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var collectors: [Int: ResponseCollector] = [:]

    /// Called before the task is resumed, so no callback of the task can miss its collector.
    func register(_ collector: ResponseCollector, for task: URLSessionTask) {
        lock.withLock { collectors[task.taskIdentifier] = collector }
    }

    private func collector(for task: URLSessionTask, removing: Bool = false) -> ResponseCollector? {
        lock.withLock { removing ? collectors.removeValue(forKey: task.taskIdentifier) : collectors[task.taskIdentifier] }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        guard let collector = collector(for: dataTask) else { return completionHandler(.cancel) }
        completionHandler(collector.accept(response) ? .allow : .cancel)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        if collector(for: dataTask)?.append(data) == false { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        // A key-set or provider URL is configuration; following a redirect would let the server point us anywhere.
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        collector(for: task, removing: true)?.complete(response: task.response as? HTTPURLResponse, error: error)
    }
}

/// Gathers one response and resumes the waiting task once.
///
/// `@unchecked Sendable` invariant: every stored property is read and written
/// only while `lock` is held; the continuation is taken out under the lock
/// before it is resumed, so it is resumed exactly once.
private final class ResponseCollector: @unchecked Sendable {
    private let lock = NSLock()
    private let maximumBytes: Int
    private var body: [UInt8] = []
    private var failure: HTTPClientError?
    private var task: URLSessionDataTask?
    /// Cancels the transfer when its time is up; itself cancelled once the answer is in.
    private var deadline: DispatchWorkItem?
    /// Set once the waiting task is resumed: nothing is cancelled after that.
    private var isComplete = false
    /// Set by ``cancel(because:)``: a transfer cancelled before it started is cancelled as it starts.
    private var isCancelled = false
    private var continuation: CheckedContinuation<HTTPClientResponse, any Error>?

    init(maximumBytes: Int) {
        self.maximumBytes = maximumBytes
    }

    func start(_ task: URLSessionDataTask, deadline: DispatchWorkItem, continuation: CheckedContinuation<HTTPClientResponse, any Error>) {
        let isCancelled = lock.withLock {
            self.task = task
            self.deadline = deadline
            self.continuation = continuation
            return self.isCancelled
        }
        task.resume()
        if isCancelled { task.cancel() }
    }

    /// Cancels the transfer, recording `reason` as its failure unless it failed already or is over;
    /// never from a task's cancellation handler itself (see ``URLSessionHTTPClient/send(_:timeout:maxBytes:)``).
    func cancel(because reason: HTTPClientError?) {
        lock.withLock { () -> URLSessionDataTask? in
            guard !isComplete else { return nil }
            isCancelled = true
            if failure == nil { failure = reason }
            return task
        }?.cancel()
    }

    /// Whether the transfer goes on once the response head is in: not when its announced length is too large.
    func accept(_ response: URLResponse) -> Bool {
        guard response.expectedContentLength > Int64(maximumBytes) else { return true }
        lock.withLock { failure = HTTPClientError.responseTooLarge.with(detail: "Content-Length \(response.expectedContentLength)") }
        return false
    }

    /// Appends a piece of the body; false once the body is too large, and the transfer must stop.
    func append(_ data: Data) -> Bool {
        lock.withLock {
            body.append(contentsOf: data)
            guard body.count > maximumBytes else { return true }
            failure = HTTPClientError.responseTooLarge.with(detail: "more than \(maximumBytes) bytes")
            return false
        }
    }

    func complete(response: HTTPURLResponse?, error: (any Error)?) {
        let (continuation, outcome) = lock.withLock { () -> (CheckedContinuation<HTTPClientResponse, any Error>?, Result<HTTPClientResponse, any Error>) in
            let continuation = self.continuation
            self.continuation = nil
            isComplete = true
            deadline?.cancel()
            deadline = nil
            task = nil
            if let failure { return (continuation, .failure(failure)) }
            if let error { return (continuation, .failure(HTTPClientError.transport.with(detail: error.localizedDescription))) }
            guard let response else { return (continuation, .failure(HTTPClientError.transport.with(detail: "no HTTP response"))) }
            var headers: [String: String] = [:]
            for (name, value) in response.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            return (continuation, .success(HTTPClientResponse(status: response.statusCode, headers: headers, body: body)))
        }
        continuation?.resume(with: outcome)
    }
}
