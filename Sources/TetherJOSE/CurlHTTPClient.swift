import CCurl
import Foundation
import Synchronization
import TetherCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``HTTPClient`` on libcurl's easy interface: uncached, cookieless, no redirects, size-capped, http and https only.
///
/// Not `URLSession`: on this toolchain (swift-corelibs-foundation of Swift 6.3) every `URLSession` task checks its
/// URL's host with `CFURLSessionCurlHostIsEqual`, which releases the parsed URL with `curl_free` instead of
/// `curl_url_cleanup` and so leaks its parts, about 50 bytes a request in heaptrack. A webhook receiver taking
/// sixty deliveries a second grew tether's heap by megabytes an hour, and pinned the heap's pages with it.
///
/// Each request runs blocking on a dispatch thread, on an easy handle taken from a pool of idle ones. Every handle
/// shares one connection cache (with the DNS and TLS session caches), so a Facebook sign-in's two Graph calls, a
/// webhook's deliveries and a key-set refetch do not each pay a TCP and TLS handshake, whichever handle they get.
public struct CurlHTTPClient: HTTPClient {
    /// Creates the client; it sends on the process's pool of handles.
    public init() {}

    /// GETs `url`; a body beyond `maxBytes` cancels the transfer instead of buffering it.
    public func get(url: URL, timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return try await send(request, timeout: timeout, maxBytes: maxBytes)
    }

    /// Sends `request` (its URL, method, header fields and body; nothing else of it is read), following no redirect.
    /// A body beyond `maxBytes` stops the transfer instead of being buffered, and so does `timeout` seconds without
    /// the whole answer. Cancelling the calling task stops the transfer within about a second (libcurl asks whether
    /// to go on at least once a second while it waits).
    public func send(_ request: URLRequest, timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        let transfer = try CurlTransfer(request: request, timeout: timeout, maxBytes: maxBytes)
        return try await withTaskCancellationHandler {
            try await BlockingWork.run { try transfer.perform() }
        } onCancel: {
            transfer.cancel()
        }
    }
}

/// One request and what came back of it.
///
/// `@unchecked Sendable` invariant: everything but `isCancelled` is touched only by the thread running ``perform()``
/// (libcurl calls the callbacks on it); `isCancelled` is atomic.
private final class CurlTransfer: @unchecked Sendable {
    private let url: String
    /// The host as Foundation reads the URL.
    private let host: String
    private let method: String
    private let headerLines: [String]
    private let body: [UInt8]?
    private let timeout: TimeInterval
    private let maximumBytes: Int
    private let isCancelled = Atomic<Bool>(false)

    private var received: [UInt8] = []
    private var headers: [String: String] = [:]
    private var tooLarge: String?

    init(request: URLRequest, timeout: TimeInterval, maxBytes: Int) throws {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HTTPClientError.transport.with(detail: "only http and https URLs are fetched")
        }
        guard let host = url.host, !host.isEmpty else { throw HTTPClientError.transport.with(detail: "the URL names no host") }
        var lines: [String] = []
        for (name, value) in request.allHTTPHeaderFields ?? [:] {
            // A field is one line: a line break in it would start another field, or the body.
            guard !(name + value).contains(where: { $0 == "\r" || $0 == "\n" }) else {
                throw HTTPClientError.transport.with(detail: "a header field holds a line break")
            }
            lines.append("\(name): \(value)")
        }
        // libcurl would ask a large POST to wait for `100 Continue`: providers and receivers answer without it.
        lines.append("Expect:")
        self.url = url.absoluteString
        self.host = host
        self.method = (request.httpMethod ?? "GET").uppercased()
        self.headerLines = lines
        self.body = request.httpBody.map(Array.init)
        self.timeout = timeout
        self.maximumBytes = maxBytes
    }

    func cancel() {
        isCancelled.store(true, ordering: .relaxed)
    }

    /// Runs the transfer on this thread; answers the response, or throws ``HTTPClientError``.
    func perform() throws -> HTTPClientResponse {
        guard !isCancelled.load(ordering: .relaxed) else { throw HTTPClientError.transport.with(detail: "cancelled") }
        // libcurl sends to the URL as it parses it: that must name the host Foundation read (the checks made of
        // `URL.host` hold), and the transfer then uses exactly that parse.
        guard let parsed = curl_url() else { throw HTTPClientError.transport.with(detail: "out of memory") }
        defer { curl_url_cleanup(parsed) }
        var parsedHost: UnsafeMutablePointer<CChar>?
        guard curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK,
              curl_url_get(parsed, CURLUPART_HOST, &parsedHost, 0) == CURLUE_OK, let parsedHost else {
            throw HTTPClientError.transport.with(detail: "libcurl cannot read the URL")
        }
        let curlHost = String(cString: parsedHost)
        curl_free(parsedHost)
        guard Self.bare(curlHost) == Self.bare(host) else {
            throw HTTPClientError.transport.with(detail: "libcurl and Foundation read different hosts in the URL")
        }
        let handle = CurlHandles.shared.take()
        defer { CurlHandles.shared.giveBack(handle) }
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        for line in headerLines { list = curl_slist_append(list, line) }
        let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        defer { errorText.deallocate() }
        errorText[0] = 0

        let raw = handle.raw
        let context = Unmanaged.passUnretained(self).toOpaque()
        var code = CurlHandles.shared.useShared(handle)
        if code == CURLE_OK { code = tether_curl_set_pointer(raw, CURLOPT_CURLU, UnsafeRawPointer(parsed)) }
        let settings: [(CURLoption, Int)] = [
            (CURLOPT_NOSIGNAL, 1), (CURLOPT_FOLLOWLOCATION, 0), (CURLOPT_NOPROGRESS, 0),
            (CURLOPT_TIMEOUT_MS, Int(max(1, (timeout * 1000).rounded(.up)))),
        ]
        for (option, value) in settings where code == CURLE_OK { code = tether_curl_set_long(raw, option, value) }
        for (option, value) in [(CURLOPT_PROTOCOLS_STR, "http,https"), (CURLOPT_REDIR_PROTOCOLS_STR, "http,https")] where code == CURLE_OK {
            code = tether_curl_set_pointer(raw, option, value)
        }
        let pointers: [(CURLoption, UnsafeRawPointer?)] = [
            (CURLOPT_HTTPHEADER, UnsafeRawPointer(list)), (CURLOPT_ERRORBUFFER, UnsafeRawPointer(errorText)),
            (CURLOPT_WRITEDATA, UnsafeRawPointer(context)), (CURLOPT_HEADERDATA, UnsafeRawPointer(context)),
            (CURLOPT_XFERINFODATA, UnsafeRawPointer(context)),
        ]
        for (option, value) in pointers where code == CURLE_OK { code = tether_curl_set_pointer(raw, option, value) }
        if code == CURLE_OK { code = tether_curl_set_data_function(raw, CURLOPT_WRITEFUNCTION, curlReceivedBody) }
        if code == CURLE_OK { code = tether_curl_set_data_function(raw, CURLOPT_HEADERFUNCTION, curlReceivedHeader) }
        if code == CURLE_OK { code = tether_curl_set_progress_function(raw, curlProgress) }
        if code == CURLE_OK { code = setMethod(on: raw) }
        if code == CURLE_OK { code = curl_easy_perform(raw) }

        if let tooLarge { throw HTTPClientError.responseTooLarge.with(detail: tooLarge) }
        switch code {
        case CURLE_OK:
            var status = 0
            _ = tether_curl_get_long(raw, CURLINFO_RESPONSE_CODE, &status)
            return HTTPClientResponse(status: status, headers: headers, body: received)
        case CURLE_OPERATION_TIMEDOUT:
            throw HTTPClientError.transport.with(detail: "no answer within \(timeout) s")
        case CURLE_ABORTED_BY_CALLBACK:
            throw HTTPClientError.transport.with(detail: "cancelled")
        default:
            let detail = errorText[0] != 0 ? String(cString: errorText) : String(cString: curl_easy_strerror(code))
            throw HTTPClientError.transport.with(detail: detail)
        }
    }

    /// A host as compared: lowercased, an IPv6 literal without its brackets.
    private static func bare(_ host: String) -> String {
        let lowered = host.lowercased()
        return lowered.hasPrefix("[") && lowered.hasSuffix("]") ? String(lowered.dropFirst().dropLast()) : lowered
    }

    /// The request's method and body: GET and HEAD without one; any other method with its body, if any.
    private func setMethod(on raw: UnsafeMutableRawPointer) -> CURLcode {
        switch method {
        case "GET": return tether_curl_set_long(raw, CURLOPT_HTTPGET, 1)
        case "HEAD": return tether_curl_set_long(raw, CURLOPT_NOBODY, 1)
        default:
            let body = self.body ?? []
            var code = tether_curl_set_offset(raw, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            if code == CURLE_OK {
                // Copied by libcurl: the request's bytes need not outlive this call.
                code = body.isEmpty
                    ? tether_curl_set_pointer(raw, CURLOPT_COPYPOSTFIELDS, "")
                    : body.withUnsafeBytes { tether_curl_set_pointer(raw, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }
            }
            if code == CURLE_OK, method != "POST" { code = tether_curl_set_pointer(raw, CURLOPT_CUSTOMREQUEST, method) }
            return code
        }
    }

    /// A piece of the body: false once the body would pass the limit, which stops the transfer.
    fileprivate func receive(body bytes: UnsafeRawBufferPointer) -> Bool {
        guard received.count + bytes.count <= maximumBytes else {
            tooLarge = "more than \(maximumBytes) bytes"
            return false
        }
        received.append(contentsOf: bytes)
        return true
    }

    /// A header line (or a status line, which starts the fields of a new response, as after `100 Continue`): false
    /// when its `Content-Length` announces a body past the limit, which stops the transfer before the body comes.
    fileprivate func receive(headerLine bytes: UnsafeRawBufferPointer) -> Bool {
        let line = String(decoding: bytes, as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            headers = [:]
            return true
        }
        guard let colon = line.firstIndex(of: ":") else { return true }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        if name == "content-length", let length = Int64(value), length > Int64(maximumBytes) {
            tooLarge = "Content-Length \(length)"
            return false
        }
        headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        return true
    }

    fileprivate var shouldStop: Bool { isCancelled.load(ordering: .relaxed) }
}

private func curlReceivedBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    // Returning less than was given stops the transfer (CURLE_WRITE_ERROR).
    return transfer.receive(body: UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
}

private func curlReceivedHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receive(headerLine: UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
}

private func curlProgress(_ context: UnsafeMutableRawPointer?, _: curl_off_t, _: curl_off_t, _: curl_off_t, _: curl_off_t) -> Int32 {
    guard let context else { return 0 }
    // Non-zero stops the transfer (CURLE_ABORTED_BY_CALLBACK).
    return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue().shouldStop ? 1 : 0
}

/// The process's idle easy handles, and the share object through which all of them use one connection cache.
private final class CurlHandles: Sendable {
    static let shared = CurlHandles()

    /// More idle handles than this are closed when given back (with their connections).
    static let idleLimit = 32

    struct Handle: @unchecked Sendable {
        // An easy handle is used by one thread at a time: the one that took it from the pool.
        let raw: UnsafeMutableRawPointer
    }

    private let idle = Mutex<[Handle]>([])
    /// Connections, DNS answers and TLS sessions, shared by every handle (libcurl locks it through ``CurlShareLocks``).
    private let share: Handle

    private init() {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        guard let share = curl_share_init() else { fatalError("curl_share_init failed: out of memory") }
        var code = tether_curl_share_set_locks(share, curlShareLock, curlShareUnlock)
        for data in [CURL_LOCK_DATA_CONNECT, CURL_LOCK_DATA_DNS, CURL_LOCK_DATA_SSL_SESSION] where code == CURLSHE_OK {
            code = tether_curl_share_data(share, data)
        }
        precondition(code == CURLSHE_OK, "libcurl refused to share its caches: \(String(cString: curl_share_strerror(code)))")
        self.share = Handle(raw: share)
    }

    func take() -> Handle {
        if let handle = idle.withLock({ $0.popLast() }) { return handle }
        guard let raw = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        return Handle(raw: raw)
    }

    /// Points `handle` (options set for a transfer, or reset) at the shared caches.
    func useShared(_ handle: Handle) -> CURLcode {
        tether_curl_set_pointer(handle.raw, CURLOPT_SHARE, share.raw)
    }

    /// Takes `handle` back, its options reset.
    func giveBack(_ handle: Handle) {
        curl_easy_reset(handle.raw)
        let kept = idle.withLock { idle in
            guard idle.count < Self.idleLimit else { return false }
            idle.append(handle)
            return true
        }
        if !kept { curl_easy_cleanup(handle.raw) }
    }
}

/// The locks libcurl takes around the shared caches, one for each kind of data (`curl_lock_data`).
private enum CurlShareLocks {
    nonisolated(unsafe) static let locks: [UnsafeMutablePointer<pthread_mutex_t>] = (0..<Int(CURL_LOCK_DATA_LAST.rawValue)).map { _ in
        let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(lock, nil)
        return lock
    }

    static func lock(for data: curl_lock_data) -> UnsafeMutablePointer<pthread_mutex_t> {
        locks[min(Int(data.rawValue), locks.count - 1)]
    }
}

private func curlShareLock(_: UnsafeMutableRawPointer?, _ data: curl_lock_data, _: curl_lock_access, _: UnsafeMutableRawPointer?) {
    pthread_mutex_lock(CurlShareLocks.lock(for: data))
}

private func curlShareUnlock(_: UnsafeMutableRawPointer?, _ data: curl_lock_data, _: UnsafeMutableRawPointer?) {
    pthread_mutex_unlock(CurlShareLocks.lock(for: data))
}
