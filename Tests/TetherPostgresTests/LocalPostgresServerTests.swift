import Foundation
import Testing
import TetherPostgres

@Suite("A private PostgreSQL cluster's port")
struct LocalPostgresServerTests {
    /// A port from the ephemeral range can be taken by any outgoing connection before the server binds it;
    /// the suites' standbys met that in CI. The ports picked are below the range, and free.
    @Test func aPickedPortIsOneNoOutgoingConnectionCanTake() throws {
        let ephemeral = LocalPostgresServer.ephemeralPortRange()
        try #require(ephemeral.lowerBound >= 11_000, "this machine's ephemeral range leaves no room below it")
        var picked = Set<Int>()
        for _ in 0..<20 {
            let port = try LocalPostgresServer.freeLoopbackPort()
            #expect(port >= 10_000 && port < ephemeral.lowerBound, "port \(port) is in the ephemeral range \(ephemeral)")
            picked.insert(port)
        }
        #expect(picked.count > 1, "the ports are drawn at random, so concurrent suites rarely meet")
    }

    /// A mistyped `--data` must not cost anyone their files: a directory that holds files but no cluster, or a
    /// file, is refused, and what is there stays. (The cluster was made in its place, after removing it.)
    @Test func aClusterIsNeverMadeWhereSomethingElseIs() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("tether-notes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let directory = base.appendingPathComponent("notes")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: directory.appendingPathComponent("sub/notes.txt"))
        let file = base.appendingPathComponent("important.txt")
        try Data("important data".utf8).write(to: file)
        for path in [directory, file] {
            let server = try LocalPostgresServer(dataDirectory: path, port: try LocalPostgresServer.freeLoopbackPort(), isThrowaway: true)
            #expect(throws: LocalPostgresError.self) { try server.start() }
        }
        #expect(try String(contentsOf: directory.appendingPathComponent("sub/notes.txt"), encoding: .utf8) == "keep")
        #expect(try String(contentsOf: file, encoding: .utf8) == "important data")
    }

    /// A start of a cluster that runs already, on another port than asked for, answered the asked port's URL (and
    /// `tether postgres start` printed it, exit 0): nothing listened there. It is refused; the same port, or the
    /// recorded one, is still a start that finds it running.
    @Test func aRunningClusterIsNotStartedOnAnotherPort() throws {
        let directory = URL(fileURLWithPath: "/tmp/tether-running-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = directory.appendingPathComponent("pg")
        let server = try LocalPostgresServer(dataDirectory: data, port: try LocalPostgresServer.freeLoopbackPort(), isThrowaway: true)
        try server.start()
        defer { try? server.stop() }
        let other = try LocalPostgresServer(dataDirectory: data, port: try LocalPostgresServer.freeLoopbackPort(), isThrowaway: true)
        let error = #expect(throws: LocalPostgresError.self) { try other.start() }
        #expect(error?.message.contains("already runs") == true && error?.message.contains("on port \(server.port)") == true)
        try LocalPostgresServer(dataDirectory: data, port: server.port, isThrowaway: true).start()
        let recorded = try LocalPostgresServer(dataDirectory: data, isThrowaway: true)
        try recorded.start()
        #expect(recorded.port == server.port)
    }

    /// When the server cannot start, the error carries the server's own reason, not only pg_ctl's
    /// "examine the log output": here its port is the source port of a live connection.
    @Test func aServerThatCannotStartSaysWhy() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer {
            close(client)
            close(listener)
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let connected = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(listener, generic, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, generic, &length) == 0
                    && connect(client, generic, length) == 0 && getsockname(client, generic, &length) == 0
            }
        }
        try #require(connected)
        let busyPort = Int(UInt16(bigEndian: address.sin_port))

        let directory = URL(fileURLWithPath: "/tmp/tether-busy-port-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try LocalPostgresServer(dataDirectory: directory.appendingPathComponent("pg"), port: busyPort, isThrowaway: true)
        defer { try? server.stop() }
        let error = #expect(throws: LocalPostgresError.self) { try server.start() }
        #expect(error?.message.contains("pg_ctl start") == true)
        #expect(error?.message.contains("Address already in use") == true, "\(error?.message ?? "")")
        // The port it could not start on is not remembered: the next start without one picks another.
        #expect(try LocalPostgresServer(dataDirectory: directory.appendingPathComponent("pg"), isThrowaway: true).port != busyPort)
    }
}
