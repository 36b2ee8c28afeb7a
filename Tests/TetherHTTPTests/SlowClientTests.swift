import Foundation
import Testing
import TetherCore
import TetherHTTP
import TetherTesting

/// Idle and slow connections (slowloris: headers that never end) against the server's limits: a cap
/// per peer address, a total cap, and an idle timeout. Sockets are raw, from other loopback addresses
/// (127.0.0.2 …) than the well-behaved client's.
@Suite("Slow and idle clients do not starve the others")
struct SlowClientTests {
    /// A connection from `source` to the server that sent the start of a request and stops there.
    private static func openSlow(port: Int, from source: String) -> Int32 {
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
        let start = Array("GET /ping HTTP/1.1\r\nHost: slow\r\nX-Slow: ".utf8)
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
        let addresses = max(1, min(20, (files - 400) / (2 * perAddress)))
        try await withServer(Self.pingRouter, configure: {
            $0.connectionLimit = 1200
            $0.perAddressConnectionLimit = perAddress
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
            let descriptor = try await BlockingWork.run { Self.openSlow(port: server.boundPort, from: "127.0.0.2") }
            defer { if descriptor >= 0 { close(descriptor) } }
            #expect(descriptor >= 0)
            #expect(try await BlockingWork.run { !Self.isClosed(descriptor, within: 0.3) }, "not before the timeout")
            #expect(try await BlockingWork.run { Self.isClosed(descriptor, within: 4) }, "closed once silent past the timeout")
            #expect(try await client.get("/ping").status == 200)
        }
    }

    @Test func pastTheTotalCapConnectionsWaitUnservedUntilThereIsRoom() async throws {
        try await withServer(Self.pingRouter, configure: {
            $0.connectionLimit = 20
            $0.perAddressConnectionLimit = 0
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

    /// Whether `descriptor` has something to read within `seconds`.
    private static func isReadable(_ descriptor: Int32, within seconds: Double) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, Int32(seconds * 1000)) == 1
    }
}
