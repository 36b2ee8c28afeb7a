import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``HTTPClient`` on `URLSession` (libcurl on Linux): ephemeral, uncached, no redirects, size-capped.
public struct URLSessionHTTPClient: HTTPClient {
    /// Creates the client; each request gets its own short-lived session.
    public init() {}

    /// GETs `url`; a body beyond `maxBytes` cancels the transfer instead of buffering it.
    public func get(url: URL, timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return try await send(request, timeout: timeout, maxBytes: maxBytes)
    }

    /// Sends `request` on a session of its own that follows no redirect; a body beyond `maxBytes`
    /// cancels the transfer instead of buffering it.
    ///
    /// Cancelling the calling task cancels the transfer, from a dispatch thread. Swift runs a
    /// cancellation handler while it holds the task's status lock, and `URLSessionTask.cancel()`
    /// waits for the session's work queue; a network thread handling a socket failure holds that
    /// queue and waits for the status lock to resume the task. Called straight from the handler,
    /// the two threads deadlock (swift-corelibs-foundation #5412, fixed after this toolchain), and
    /// with them the stop of the server that cancelled a webhook delivery.
    public func send(_ request: URLRequest, timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let collector = ResponseCollector(maximumBytes: maxBytes)
        let session = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: request)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                collector.start(task, continuation: continuation)
            }
        } onCancel: {
            DispatchQueue.global().async { collector.cancel() }
        }
    }
}

/// Gathers one response from `URLSession` delegate callbacks and resumes the waiting task once.
///
/// `@unchecked Sendable` invariant: every stored property is read and written
/// only while `lock` is held; the continuation is taken out under the lock
/// before it is resumed, so it is resumed exactly once.
private final class ResponseCollector: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private let maximumBytes: Int
    private var body: [UInt8] = []
    private var response: HTTPURLResponse?
    private var failure: HTTPClientError?
    private var task: URLSessionDataTask?
    /// Set by ``cancel()``: a transfer cancelled before it started is cancelled as it starts.
    private var isCancelled = false
    private var continuation: CheckedContinuation<HTTPClientResponse, any Error>?

    init(maximumBytes: Int) {
        self.maximumBytes = maximumBytes
    }

    func start(_ task: URLSessionDataTask, continuation: CheckedContinuation<HTTPClientResponse, any Error>) {
        let isCancelled = lock.withLock {
            self.task = task
            self.continuation = continuation
            return self.isCancelled
        }
        task.resume()
        if isCancelled { task.cancel() }
    }

    /// Cancels the transfer; never from a task's cancellation handler itself (see ``URLSessionHTTPClient/send(_:timeout:maxBytes:)``).
    func cancel() {
        lock.withLock {
            isCancelled = true
            return task
        }?.cancel()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        let isTooLarge = response.expectedContentLength > Int64(maximumBytes)
        lock.withLock {
            self.response = response as? HTTPURLResponse
            if isTooLarge { failure = HTTPClientError.responseTooLarge.with(detail: "Content-Length \(response.expectedContentLength)") }
        }
        completionHandler(isTooLarge ? .cancel : .allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let isTooLarge = lock.withLock {
            body.append(contentsOf: data)
            guard body.count > maximumBytes else { return false }
            failure = HTTPClientError.responseTooLarge.with(detail: "more than \(maximumBytes) bytes")
            return true
        }
        if isTooLarge { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        // A key-set URL is configuration; following a redirect would let the server point us anywhere.
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (continuation, outcome) = lock.withLock { () -> (CheckedContinuation<HTTPClientResponse, any Error>?, Result<HTTPClientResponse, any Error>) in
            let continuation = self.continuation
            self.continuation = nil
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
