import Foundation
import Testing
import TetherCore
@testable import TetherHTTP
import TetherTesting

/// Idle and slow connections (slowloris: headers that never end; uploads that never end) against the
/// server's limits: a cap per peer address, a total cap, an idle timeout, and header and body timeouts. Sockets are raw, from other loopback addresses
/// (127.0.0.2 …) than the well-behaved client's.
@Suite("Slow and idle clients do not starve the others")
struct SlowClientTests {
    /// A connection from `source` to the server that sent `start` (by default the start of a request) and stops there.
    private static func openSlow(port: Int, from source: String, sending start: String = "GET /ping HTTP/1.1\r\nHost: slow\r\nX-Slow: ") -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return -1 }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        remote.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &local) { localPointer in
            withUnsafePointer(to: &remote) { remotePointer in
                localPointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bound in
                    remotePointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                        bind(descriptor, bound, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                            && connect(descriptor, target, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                    }
                }
            }
        }
        let start = Array(start.utf8)
        guard connected, send(descriptor, start, start.count, Int32(MSG_NOSIGNAL)) == start.count else {
            close(descriptor)
            return -1
        }
        return descriptor
    }

    /// Whether the server closed `descriptor` within `seconds` (it becomes readable and reads 0 bytes).
    private static func isClosed(_ descriptor: Int32, within seconds: Double) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, Int32(seconds * 1000)) == 1 else { return false }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
    }

    private static var pingRouter: Router {
        var router = Router()
        router.get("/ping") { _ in .text("pong") }
        return router
    }

    @Test func aThousandSlowConnectionsLeaveRoomForOthersAndOneAddressGetsItsShareOnly() async throws {
        let files = HTTPServer.raiseOpenFileLimit()
        let perAddress = 50
        // Three descriptors a slow connection in this process: the client's, the server's and its duplicate.
        let addresses = max(1, min(20, (files - 400) / (3 * perAddress)))
        try await withServer(Self.pingRouter, configure: {
            $0.connectionLimit = 1200
            $0.perAddressConnectionLimit = perAddress
            $0.headerTimeout = .seconds(600) // the slow connections must stay for the whole test, however slow the machine
        }) { server, client, _ in
            let port = server.boundPort
            func pings() async throws -> [Double] {
                var latencies: [Double] = []
                for _ in 0..<200 {
                    let started = ContinuousClock.now
                    let answer = try await client.get("/ping")
                    #expect(answer.status == 200)
                    let elapsed = ContinuousClock.now - started
                    latencies.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
                }
                return latencies.sorted()
            }
            let quiet = try await pings()
            let slow = try await BlockingWork.run {
                (2..<(2 + addresses)).flatMap { last in (0..<perAddress).map { _ in Self.openSlow(port: port, from: "127.0.0.\(last)") } }
            }
            defer { slow.forEach { if $0 >= 0 { close($0) } } }
            #expect(slow.allSatisfy { $0 >= 0 }, "every slow connection was made")
            #expect(slow.count == addresses * perAddress)

            // The well-behaved client is served while they hang (the latencies are printed, not judged).
            let crowded = try await pings()
            print("""
                SlowClientTests: /ping p50/p99 \(quiet[100])/\(quiet[197]) ms alone, \(crowded[100])/\(crowded[197]) ms \
                with \(slow.count) slow connections open
                """)

            // One address past its share is turned away at once; its earlier connections stay open.
            let extra = try await BlockingWork.run { Self.openSlow(port: port, from: "127.0.0.2") }
            defer { if extra >= 0 { close(extra) } }
            #expect(extra < 0 || Self.isClosed(extra, within: 2), "a 51st connection from one address is closed")
            #expect(try await BlockingWork.run { !Self.isClosed(slow[0], within: 0.05) }, "the first ones are still open")
        }
    }

    @Test func aConnectionSilentForTheIdleTimeoutIsClosed() async throws {
        try await withServer(Self.pingRouter, configure: { $0.connectionTimeout = .seconds(1) }) { server, client, _ in
            // Opened and checked in one blocking call: a wait for a dispatch thread in between would count as silence.
            let (earlyClose, lateClose) = try await BlockingWork.run { () -> (Bool, Bool) in
                let descriptor = Self.openSlow(port: server.boundPort, from: "127.0.0.2")
                guard descriptor >= 0 else { return (true, false) }
                defer { close(descriptor) }
                return (Self.isClosed(descriptor, within: 0.3), Self.isClosed(descriptor, within: 4))
            }
            #expect(!earlyClose, "not before the timeout")
            #expect(lateClose, "closed once silent past the timeout")
            #expect(try await client.get("/ping").status == 200)
        }
    }

    @Test func pastTheTotalCapConnectionsWaitUnservedUntilThereIsRoom() async throws {
        try await withServer(Self.pingRouter, configure: {
            $0.connectionLimit = 20
            $0.perAddressConnectionLimit = 0
            $0.headerTimeout = .seconds(600)
        }) { server, _, _ in
            let port = server.boundPort
            let slow = try await BlockingWork.run { (0..<20).map { index in Self.openSlow(port: port, from: "127.0.0.\(2 + index % 4)") } }
            #expect(slow.allSatisfy { $0 >= 0 })
            try await Task.sleep(for: .milliseconds(200))
            // A whole request on one more connection: the server does not take it while the cap is reached.
            let waiting = try await BlockingWork.run { Self.openSlow(port: port, from: "127.0.0.9") }
            defer { if waiting >= 0 { close(waiting) } }
            let rest = Array("\r\nConnection: close\r\n\r\n".utf8)
            #expect(send(waiting, rest, rest.count, Int32(MSG_NOSIGNAL)) == rest.count)
            #expect(try await BlockingWork.run { !Self.isReadable(waiting, within: 1) }, "no answer while 20 connections hold the cap")
            slow.forEach { if $0 >= 0 { close($0) } }
            #expect(try await BlockingWork.run { Self.isReadable(waiting, within: 5) }, "answered once there is room")
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = recv(waiting, &buffer, buffer.count, 0)
            #expect(count > 0 && String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        }
    }

    /// Opens a connection from `source` that sends `start`, then one byte every `every` seconds until
    /// the server closes it or `limit` seconds have passed; returns the seconds from the opening until
    /// it closed, or `nil` if it stayed open. Opened and timed in one blocking call, so that a wait for
    /// a dispatch thread is not counted.
    private static func trickle(
        port: Int, from source: String, sending start: String, every: Double = 0.2, limit: Double
    ) async throws -> Double? {
        try await BlockingWork.run {
            let started = ContinuousClock.now
            func elapsed() -> Double {
                let span = ContinuousClock.now - started
                return Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18
            }
            let descriptor = openSlow(port: port, from: source, sending: start)
            guard descriptor >= 0 else { return nil }
            defer { close(descriptor) }
            while elapsed() < limit {
                var byte = UInt8(ascii: "a")
                if send(descriptor, &byte, 1, Int32(MSG_NOSIGNAL)) != 1 { return elapsed() }
                if isClosed(descriptor, within: every) { return elapsed() }
            }
            return nil
        }
    }

    private static var uploadRouter: Router {
        var router = pingRouter
        router.post("/upload") { request in .text("\(request.body.count)") }
        return router
    }

    @Test func aClientThatTricklesItsHeadersIsClosedAtTheHeaderTimeoutWhateverTheIdleTimeout() async throws {
        try await withServer(Self.pingRouter, configure: {
            $0.connectionTimeout = .seconds(60)
            $0.headerTimeout = .seconds(1)
        }) { server, client, logs in
            // A header line that never ends, one byte every 0.2 s: each byte resets the idle timeout.
            let closedAfter = try await Self.trickle(
                port: server.boundPort, from: "127.0.0.2", sending: "GET /ping HTTP/1.1\r\nHost: slow\r\nX-Slow: ", limit: 5)
            #expect(closedAfter.map { $0 >= 0.8 && $0 < 2.5 } == true, "closed about the header timeout in: \(String(describing: closedAfter))")
            let line = try await logs.record { ($0["msg"] as? String) == "slow connection closed" }
            #expect((line?["reason"] as? String)?.hasPrefix("request head not complete") == true)
            #expect(line?["remote"] as? String == "127.0.0.2")
            #expect(try await client.get("/ping").status == 200, "others are served")
        }
    }

    @Test func aConnectionThatSendsNothingIsClosedAtTheHeaderTimeout() async throws {
        try await withServer(Self.pingRouter, configure: {
            $0.connectionTimeout = .seconds(60)
            $0.headerTimeout = .seconds(1)
        }) { server, _, _ in
            let (earlyClose, lateClose) = try await BlockingWork.run { () -> (Bool, Bool) in
                let descriptor = Self.openSlow(port: server.boundPort, from: "127.0.0.3", sending: "")
                guard descriptor >= 0 else { return (true, false) }
                defer { close(descriptor) }
                return (Self.isClosed(descriptor, within: 0.6), Self.isClosed(descriptor, within: 3))
            }
            #expect(!earlyClose, "not before the timeout")
            #expect(lateClose, "closed after it, long before the idle timeout")
        }
    }

    @Test func aSlowUploadIsClosedAtTheBodyTimeoutAndItsRequestLogged408() async throws {
        try await withServer(Self.uploadRouter, configure: {
            $0.connectionTimeout = .seconds(60)
            $0.bodyTimeout = .seconds(1)
        }) { server, client, logs in
            // A whole head, then a body of 1,000 bytes sent one byte every 0.2 s.
            let closedAfter = try await Self.trickle(
                port: server.boundPort, from: "127.0.0.4",
                sending: "POST /upload HTTP/1.1\r\nHost: slow\r\nContent-Length: 1000\r\nContent-Type: text/plain\r\n\r\n", limit: 5)
            #expect(closedAfter.map { $0 >= 0.8 && $0 < 2.5 } == true, "closed about the body timeout in: \(String(describing: closedAfter))")
            let access = try await logs.record { ($0["msg"] as? String) == "request" && ($0["remote"] as? String) == "127.0.0.4" }
            #expect(access?["status"] as? Int == 408)
            #expect((access?["error"] as? String)?.hasPrefix("request body not complete") == true)
            // A whole upload in time is answered as ever.
            let upload = try await client.post(
                "/upload", headers: ["Content-Type": "text/plain"], body: Array(repeating: UInt8(ascii: "x"), count: 1000))
            #expect(upload.status == 200 && String(decoding: upload.body, as: UTF8.self) == "1000")
        }
    }

    @Test func aKeepAliveConnectionMayWaitBetweenRequestsLongerThanTheHeaderTimeout() async throws {
        try await withServer(Self.pingRouter, configure: {
            $0.connectionTimeout = .seconds(60)
            $0.headerTimeout = .seconds(1)
        }) { server, _, _ in
            let answers = try await BlockingWork.run { () -> [String] in
                let descriptor = Self.openSlow(port: server.boundPort, from: "127.0.0.5")
                guard descriptor >= 0 else { return [] }
                defer { close(descriptor) }
                var answers: [String] = []
                for round in 0..<2 {
                    // The first head was begun by openSlow; the second is sent whole after a 1.5 s pause.
                    let text = round == 0 ? "1\r\n\r\n" : "GET /ping HTTP/1.1\r\nHost: slow\r\n\r\n"
                    if round == 1 { usleep(1_500_000) }
                    let bytes = Array(text.utf8)
                    guard send(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count,
                          Self.isReadable(descriptor, within: 3) else { return answers }
                    var buffer = [UInt8](repeating: 0, count: 1024)
                    let count = recv(descriptor, &buffer, buffer.count, 0)
                    answers.append(String(decoding: buffer.prefix(max(0, count)), as: UTF8.self))
                }
                return answers
            }
            #expect(answers.count == 2 && answers.allSatisfy { $0.hasPrefix("HTTP/1.1 200") }, "\(answers)")
        }
    }

    @Test func aServerShutDownClosesItsSlowConnectionsAndKeepsNoDescriptorOfThem() async throws {
        // The grace period ends before the header timeout: the daemon's stop, not the sweep, closes them.
        var configuration = HTTPServer.Configuration(port: 0, shutdownGracePeriod: .seconds(1), log: LogCollector().sink)
        configuration.headerTimeout = .seconds(60)
        let server = HTTPServer(configuration: configuration, router: Self.pingRouter)
        try server.start()
        let port = server.boundPort
        let slow = try await BlockingWork.run { (0..<20).map { _ in Self.openSlow(port: port, from: "127.0.0.6") } }
        #expect(slow.allSatisfy { $0 >= 0 })
        // Once accepted, each has two descriptors here (libmicrohttpd's and the timeouts' duplicate), plus the listener.
        var sockets = Set<String>()
        for _ in 0..<300 where Self.descriptors(of: sockets) < 41 {
            sockets = Self.socketInodes(onLocalPort: port)
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(Self.descriptors(of: sockets) == 41, "the server holds two descriptors for each (the check can see them)")
        await server.shutdown()
        #expect(try await BlockingWork.run { slow.allSatisfy { Self.isClosed($0, within: 3) } }, "every slow connection closed")
        slow.forEach { if $0 >= 0 { close($0) } }
        // Neither libmicrohttpd's descriptors nor the duplicates kept for the timeouts outlive the stop
        // (the server object itself is still alive: its connections' state must not wait for it to go).
        withExtendedLifetime(server) {
            #expect(Self.descriptors(of: sockets) == 0)
        }
    }

    /// libmicrohttpd 0.9.75 drops a connection whose query it cannot hold, when a NUL before the `?` hides the
    /// query from the URI callback, without completing its request. That request's state held the timeouts'
    /// duplicate of the socket: the client was never answered or closed, and each such request kept a descriptor
    /// for good, past every connection limit. The request now ends with its connection.
    @Test func aConnectionLibmicrohttpdDropsKeepsNoDescriptor() async throws {
        try await withServer(Self.pingRouter) { server, client, _ in
            let port = server.boundPort
            let request = "GET /\0?" + Array(repeating: "a=b", count: 600).joined(separator: "&") + " HTTP/1.1\r\nHost: nul\r\n\r\n"
            let dropped = try await BlockingWork.run { (0..<20).map { _ in Self.openSlow(port: port, from: "127.0.0.7", sending: request) } }
            #expect(dropped.allSatisfy { $0 >= 0 })
            #expect(try await BlockingWork.run { dropped.allSatisfy { Self.isClosed($0, within: 5) } }, "each is closed, not left hanging")
            dropped.forEach { if $0 >= 0 { close($0) } }
            var held = Int.max
            for _ in 0..<300 where held > 1 {
                held = Self.descriptors(of: Self.socketInodes(onLocalPort: port))
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(held == 1, "the listener only: \(held)")
            #expect(try await client.get("/ping").status == 200)
        }
    }

    /// The inodes of the TCP sockets bound to `port` on this side (IPv4), as `/proc/net/tcp` lists them.
    private static func socketInodes(onLocalPort port: Int) -> Set<String> {
        // Read to the end: Foundation's whole-file readers stop at the first page of a /proc file.
        let table = (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/net/tcp")).readToEnd())
            .flatMap { $0.map { String(decoding: $0, as: UTF8.self) } } ?? ""
        let portField = String(format: "%04X", port)
        return Set(table.split(separator: "\n").dropFirst().compactMap { row -> String? in
            let fields = row.split(separator: " ")
            // The whole local address: a client socket bound to 127.0.0.x may have the same port number.
            guard fields.count > 9, fields[1] == "0100007F:" + portField else { return nil }
            return String(fields[9])
        })
    }

    /// How many of this process's descriptors refer to one of the sockets `inodes`.
    private static func descriptors(of inodes: Set<String>) -> Int {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return descriptors.filter { name in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name),
                  target.hasPrefix("socket:[") else { return false }
            return inodes.contains(String(target.dropFirst(8).dropLast()))
        }.count
    }

    @Test func aConnectionTheSweepClosedIsNeverHandedToAHandlerAndARenewedOneIsNotClosed() throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[1]) }
        let clocks = HTTPServer.ConnectionClocks(configuration: .init())
        let clock = HTTPServer.ConnectionClock(socket: pair[0], peer: "127.0.0.7")
        clocks.add(clock)
        defer { clocks.remove(clock) }
        // A body owed by a deadline that has passed: the sweep claims the connection and shuts it down.
        #expect(clock.expect(.body, by: clocks.now - 1))
        #expect(clocks.closeOverdue().map(\.owed) == [.body])
        #expect(clock.closedReason == .body)
        #expect(!clock.expectNothing(), "a claimed connection is not dispatched")
        #expect(!clock.expect(.head, by: .max), "nor given a new deadline")
        #expect(clocks.closeOverdue().isEmpty, "it is closed once")
        var byte: UInt8 = 0
        #expect(recv(pair[1], &byte, 1, Int32(MSG_DONTWAIT)) == 0, "the peer reads end-of-stream")

        // A connection whose body arrived (nothing owed) is left alone, however old its last deadline.
        var other: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &other) == 0)
        defer { close(other[1]) }
        let answered = HTTPServer.ConnectionClock(socket: other[0], peer: nil)
        clocks.add(answered)
        defer { clocks.remove(answered) }
        #expect(answered.expect(.body, by: clocks.now - 1) && answered.expectNothing())
        #expect(clocks.closeOverdue().isEmpty)
        #expect(answered.closedReason == nil)
    }

    /// Whether `descriptor` has something to read within `seconds`.
    private static func isReadable(_ descriptor: Int32, within seconds: Double) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, Int32(seconds * 1000)) == 1
    }
}
