import Foundation
import Synchronization

/// A TCP socket listening on 127.0.0.1 at a port the system picks, for tests that play a raw HTTP peer.
struct LoopbackSocket: Sendable {
    let descriptor: Int32
    let port: Int

    struct Failure: Error {}

    init(backlog: Int32 = 128) throws {
        let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listening, $0, length) == 0 && listen(listening, backlog) == 0 && getsockname(listening, $0, &length) == 0
            }
        }
        guard listening >= 0, bound else {
            if listening >= 0 { Glibc.close(listening) }
            throw Failure()
        }
        descriptor = listening
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Stops accepting: a thread blocked in `accept` returns.
    func close() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
    }
}

/// A loopback HTTP/1.1 peer on raw sockets: each connection served on a thread of its own, each request head
/// (up to its blank line; bodies are not expected) answered with what `answer` makes of it, whole, until the
/// client closes the connection. Counts the connections it accepted.
final class RawHTTPServer: Sendable {
    private let listener: LoopbackSocket
    private let accepted = Atomic<Int>(0)
    var port: Int { listener.port }
    var connections: Int { accepted.load(ordering: .relaxed) }

    init(backlog: Int32 = 16, answer: @escaping @Sendable (_ head: String) -> String) throws {
        let listening = try LoopbackSocket(backlog: backlog)
        listener = listening
        Thread.detachNewThread { [self] in
            while true {
                let connection = accept(listening.descriptor, nil, nil)
                guard connection >= 0 else { return }
                accepted.add(1, ordering: .relaxed)
                Thread.detachNewThread { Self.serve(connection, answer) }
            }
        }
    }

    private static func serve(_ connection: Int32, _ answer: (String) -> String) {
        defer { close(connection) }
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(connection, &buffer, buffer.count)
            guard count > 0 else { return }
            pending += buffer[0..<count]
            while let end = pending.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: pending[..<end.lowerBound], as: UTF8.self)
                pending.removeSubrange(..<end.upperBound)
                let bytes = Array(answer(head).utf8)
                guard write(connection, bytes, bytes.count) == bytes.count else { return }
            }
        }
    }

    /// Stops accepting (connections already open are served until their clients close them).
    func stop() { listener.close() }
}
