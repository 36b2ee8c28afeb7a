import Foundation

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
