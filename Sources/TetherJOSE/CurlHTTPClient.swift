import CCurl
import Foundation
import Synchronization
import TetherCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``HTTPClient`` on libcurl: uncached, cookieless, no redirects, size-capped, http and https only.
///
/// Not `URLSession`: on this toolchain (swift-corelibs-foundation of Swift 6.3) every `URLSession` task checks its
/// URL's host with `CFURLSessionCurlHostIsEqual`, which releases the parsed URL with `curl_free` instead of
/// `curl_url_cleanup` and so leaks its parts, about 50 bytes a request in heaptrack. A webhook receiver taking
/// sixty deliveries a second grew tether's heap by megabytes an hour, and pinned the heap's pages with it.
///
/// Every transfer of the process runs on one libcurl multi handle, driven by one thread of its own
/// (``CurlDriver``): a request waiting for a slow provider holds no thread, and cancelling it ends it at once.
/// The multi handle keeps one connection cache (up to 64 connections to a host at once; more requests wait for
/// one) and one DNS cache for all of them, so a Facebook sign-in's two Graph calls, a webhook's deliveries and a
/// key-set refetch do not each pay a TCP and TLS handshake.
public struct CurlHTTPClient: HTTPClient {
    /// Creates the client; it sends through the process's one multi handle.
    public init() {}

    /// GETs `url`; a body beyond `maxBytes` cancels the transfer instead of buffering it.
    public func get(url: URL, timeout: TimeInterval, maxBytes: Int) async throws -> HTTPClientResponse {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return try await send(request, timeout: timeout, maxBytes: maxBytes)
    }

    /// Sends `request` (its URL, method, header fields and body; nothing else of it is read), following no redirect.
    /// A body beyond `maxBytes` stops the transfer instead of being buffered, and so does `timeout` seconds without
    /// the whole answer (waiting for a free connection to the host included). Cancelling the calling task stops the
    /// transfer and throws at once.
    ///
    /// - Parameter addresses: when not empty, the only addresses the transfer may connect to for the URL's host
    ///   (libcurl's `CURLOPT_RESOLVE`): what a caller checked is what is connected to, whatever the name resolves
    ///   to by the time the transfer starts (a name re-pointed between the check and the request).
    public func send(
        _ request: URLRequest, timeout: TimeInterval, maxBytes: Int, connectingTo addresses: [String] = []
    ) async throws -> HTTPClientResponse {
        let transfer = try CurlTransfer(request: request, timeout: timeout, maxBytes: maxBytes, connectingTo: addresses)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                CurlDriver.shared.start(transfer, answering: continuation)
            }
        } onCancel: {
            CurlDriver.shared.cancel(transfer)
        }
    }
}

/// One request, the libcurl resources it holds while it runs, and what came back of it.
///
/// `@unchecked Sendable` invariant: the caller's thread prepares it, then hands it to the driver's thread through a
/// lock (``CurlDriver/start(_:answering:)``); from then on only that thread touches it (libcurl calls the callbacks
/// there), except the cancellation flag, which is atomic.
private final class CurlTransfer: @unchecked Sendable {
    private let url: String
    /// The host as Foundation reads the URL.
    private let host: String
    private let method: String
    private let headerLines: [String]
    private let body: [UInt8]?
    private let timeout: TimeInterval
    private let maximumBytes: Int
    /// `CURLOPT_RESOLVE`'s entry pinning the host to the addresses given, if any.
    private let pin: String?
    private let cancelled = Atomic<Bool>(false)

    private var received: [UInt8] = []
    private var headers: [String: String] = [:]
    private var tooLarge: String?

    /// What the transfer holds from ``prepare()`` until ``finish(_:)``.
    private(set) var handle: CurlHandles.Handle?
    private var parsed: OpaquePointer?
    private var list: UnsafeMutablePointer<curl_slist>?
    private var pins: UnsafeMutablePointer<curl_slist>?
    private var errorText: UnsafeMutablePointer<CChar>?
    /// Who waits for the answer; resumed once.
    var continuation: CheckedContinuation<HTTPClientResponse, any Error>?

    init(request: URLRequest, timeout: TimeInterval, maxBytes: Int, connectingTo addresses: [String] = []) throws {
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
        if addresses.isEmpty {
            self.pin = nil
        } else {
            // `+`: the entry ages out of the shared DNS cache as a looked-up one does, rather than staying for good.
            let port = url.port ?? (scheme == "https" ? 443 : 80)
            let bracketed = addresses.map { $0.contains(":") && !$0.hasPrefix("[") ? "[\($0)]" : $0 }
            self.pin = "+\(Self.bare(host)):\(port):\(bracketed.joined(separator: ","))"
        }
    }

    deinit { release() }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func cancel() { cancelled.store(true, ordering: .releasing) }

    /// Takes an easy handle and sets it up for the request, on the caller's thread (the handle is in no multi handle
    /// yet). What it took is given back by ``finish(_:)``, or by ``release()`` when this throws.
    func prepare() throws {
        // libcurl sends to the URL as it parses it: that must name the host Foundation read (the checks made of
        // `URL.host` hold), and the transfer then uses exactly that parse.
        guard let parsed = curl_url() else { throw HTTPClientError.transport.with(detail: "out of memory") }
        self.parsed = parsed
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
        self.handle = handle
        for line in headerLines { list = curl_slist_append(list, line) }
        let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorText[0] = 0
        self.errorText = errorText

        let raw = handle.raw
        let context = Unmanaged.passUnretained(self).toOpaque()
        var code = CurlHandles.shared.useShared(handle)
        if code == CURLE_OK { code = tether_curl_set_pointer(raw, CURLOPT_CURLU, UnsafeRawPointer(parsed)) }
        let settings: [(CURLoption, Int)] = [
            (CURLOPT_NOSIGNAL, 1), (CURLOPT_FOLLOWLOCATION, 0), (CURLOPT_TIMEOUT_MS, Int(max(1, (timeout * 1000).rounded(.up)))),
        ]
        for (option, value) in settings where code == CURLE_OK { code = tether_curl_set_long(raw, option, value) }
        for (option, value) in [(CURLOPT_PROTOCOLS_STR, "http,https"), (CURLOPT_REDIR_PROTOCOLS_STR, "http,https")] where code == CURLE_OK {
            code = tether_curl_set_pointer(raw, option, value)
        }
        let pointers: [(CURLoption, UnsafeRawPointer?)] = [
            (CURLOPT_HTTPHEADER, UnsafeRawPointer(list)), (CURLOPT_ERRORBUFFER, UnsafeRawPointer(errorText)),
            (CURLOPT_WRITEDATA, UnsafeRawPointer(context)), (CURLOPT_HEADERDATA, UnsafeRawPointer(context)),
        ]
        for (option, value) in pointers where code == CURLE_OK { code = tether_curl_set_pointer(raw, option, value) }
        if let pin {
            pins = curl_slist_append(nil, pin)
            if code == CURLE_OK { code = tether_curl_set_pointer(raw, CURLOPT_RESOLVE, UnsafeRawPointer(pins)) }
        }
        if code == CURLE_OK { code = tether_curl_set_data_function(raw, CURLOPT_WRITEFUNCTION, curlReceivedBody) }
        if code == CURLE_OK { code = tether_curl_set_data_function(raw, CURLOPT_HEADERFUNCTION, curlReceivedHeader) }
        if code == CURLE_OK { code = setMethod(on: raw) }
        guard code == CURLE_OK else { throw HTTPClientError.transport.with(detail: String(cString: curl_easy_strerror(code))) }
    }

    /// Ends the transfer with libcurl's `code` (nil: cancelled), gives back what it holds and answers the caller.
    /// On the driver's thread, once the handle is out of the multi handle.
    func finish(_ code: CURLcode?) {
        let result: Result<HTTPClientResponse, any Error>
        if let tooLarge {
            result = .failure(HTTPClientError.responseTooLarge.with(detail: tooLarge))
        } else {
            switch code {
            case nil:
                result = .failure(HTTPClientError.transport.with(detail: "cancelled"))
            case CURLE_OK?:
                var status = 0
                if let handle { _ = tether_curl_get_long(handle.raw, CURLINFO_RESPONSE_CODE, &status) }
                result = .success(HTTPClientResponse(status: status, headers: headers, body: received))
            case CURLE_OPERATION_TIMEDOUT?:
                result = .failure(HTTPClientError.transport.with(detail: "no answer within \(timeout) s"))
            case let code?:
                let written = errorText.flatMap { $0[0] != 0 ? String(cString: $0) : nil }
                result = .failure(HTTPClientError.transport.with(detail: written ?? String(cString: curl_easy_strerror(code))))
            }
        }
        release()
        continuation?.resume(with: result)
        continuation = nil
    }

    /// Gives back the handle and frees what the request's setup made.
    func release() {
        if let handle { CurlHandles.shared.giveBack(handle) }
        handle = nil
        if let parsed { curl_url_cleanup(parsed) }
        parsed = nil
        curl_slist_free_all(list)
        list = nil
        curl_slist_free_all(pins)
        pins = nil
        errorText?.deallocate()
        errorText = nil
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

/// The process's one libcurl multi handle, and the thread that runs every transfer on it.
///
/// Callers hand transfers over through `incoming` and wake the thread (`curl_multi_wakeup`, which any thread may
/// call). The thread adds them to the multi handle, lets libcurl work, waits in `curl_multi_poll` for the sockets,
/// libcurl's own timers, a new transfer or a cancellation, and answers each transfer as it ends.
///
/// `@unchecked Sendable` invariant: `running` and `cancellationsSeen` are touched only by the driver's thread; the rest
/// is immutable, locked or atomic, and libcurl's multi handle is called from that thread only (but for the wakeup).
private final class CurlDriver: @unchecked Sendable {
    static let shared: CurlDriver = {
        let driver = CurlDriver()
        let thread = Thread { driver.run() }
        thread.name = "tether-curl"
        thread.start()
        return driver
    }()

    /// Connections open to one host at once; more transfers to it wait inside libcurl for one to be free.
    static let connectionsPerHost = 64

    private let multi: UnsafeMutableRawPointer
    private let incoming = Mutex<[CurlTransfer]>([])
    /// Counts calls of ``cancel(_:)``, so that the thread looks for cancelled transfers only when there may be one.
    private let cancellations = Atomic<Int>(0)
    private var cancellationsSeen = 0
    /// The transfers in the multi handle, by their easy handle.
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    private init() {
        CurlHandles.initializeLibrary()
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        let limits: [(CURLMoption, Int)] = [
            (CURLMOPT_MAX_HOST_CONNECTIONS, Self.connectionsPerHost), (CURLMOPT_MAXCONNECTS, 2 * Self.connectionsPerHost),
        ]
        for (option, value) in limits {
            let code = tether_curl_multi_set_long(multi, option, value)
            precondition(code == CURLM_OK, "libcurl refused a limit of its multi handle: \(String(cString: curl_multi_strerror(code)))")
        }
        self.multi = multi
    }

    /// Prepares `transfer` and hands it to the thread, which answers `continuation` when it ends.
    func start(_ transfer: CurlTransfer, answering continuation: CheckedContinuation<HTTPClientResponse, any Error>) {
        do {
            try transfer.prepare()
        } catch {
            transfer.release()
            continuation.resume(throwing: error)
            return
        }
        transfer.continuation = continuation
        incoming.withLock { $0.append(transfer) }
        curl_multi_wakeup(multi)
    }

    /// Ends `transfer` as cancelled: at once, whether it is waiting to be added or running.
    func cancel(_ transfer: CurlTransfer) {
        transfer.cancel()
        cancellations.add(1, ordering: .releasing)
        curl_multi_wakeup(multi)
    }

    private func run() {
        while true {
            for transfer in incoming.withLock({ list in defer { list = [] }; return list }) {
                guard let handle = transfer.handle, !transfer.isCancelled else {
                    transfer.finish(nil)
                    continue
                }
                if curl_multi_add_handle(multi, handle.raw) == CURLM_OK {
                    running[handle.raw] = transfer
                } else {
                    transfer.finish(CURLE_FAILED_INIT)
                }
            }
            let cancelled = cancellations.load(ordering: .acquiring)
            if cancelled != cancellationsSeen {
                cancellationsSeen = cancelled
                for (handle, transfer) in running where transfer.isCancelled {
                    curl_multi_remove_handle(multi, handle)
                    running[handle] = nil
                    transfer.finish(nil)
                }
            }
            var active: Int32 = 0
            _ = curl_multi_perform(multi, &active)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                // The message is gone once its handle leaves the multi handle: read it first.
                let result = tether_curl_message_result(message)
                guard result >= 0, let handle = message.pointee.easy_handle, let transfer = running.removeValue(forKey: handle) else {
                    continue
                }
                curl_multi_remove_handle(multi, handle)
                transfer.finish(CURLcode(rawValue: UInt32(result)))
            }
            // Returns on socket activity, a wakeup, or when libcurl's next timer is due (it never waits past one).
            if curl_multi_poll(multi, nil, 0, 1000, nil) != CURLM_OK {
                // It could not wait (out of memory, descriptors): pause rather than spin; timeouts still end transfers.
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
    }
}

/// The process's idle easy handles, and the share object through which all of them use one TLS session cache (the
/// multi handle keeps the connections and DNS answers).
private final class CurlHandles: Sendable {
    static let shared = CurlHandles()

    /// More idle handles than this are closed when given back (their connections stay in the multi handle's cache).
    static let idleLimit = 32

    struct Handle: @unchecked Sendable {
        // An easy handle is used by one thread at a time: the caller's while it is set up, then the driver's.
        let raw: UnsafeMutableRawPointer
    }

    private let idle = Mutex<[Handle]>([])
    /// TLS sessions, shared by every handle (libcurl locks it through ``CurlShareLocks``).
    private let share: Handle

    /// `curl_global_init`, once, before any other libcurl call.
    private static let libraryInitialized: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    static func initializeLibrary() { _ = libraryInitialized }

    private init() {
        Self.initializeLibrary()
        guard let share = curl_share_init() else { fatalError("curl_share_init failed: out of memory") }
        var code = tether_curl_share_set_locks(share, curlShareLock, curlShareUnlock)
        if code == CURLSHE_OK { code = tether_curl_share_data(share, CURL_LOCK_DATA_SSL_SESSION) }
        precondition(code == CURLSHE_OK, "libcurl refused to share its TLS sessions: \(String(cString: curl_share_strerror(code)))")
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
