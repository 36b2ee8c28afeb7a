import Testing
@testable import TetherAPI

/// Which `Host` values name this machine and nothing else (tether dev's mail links, its owner admin).
@Suite("Loopback host names (pure)")
struct PublicBaseTests {
    @Test func onlyALoopbackNameAndAPortPass() {
        for host in ["localhost", "LOCALHOST:8080", "127.0.0.1", "127.1.2.3:80", "[::1]", "[::1]:4000", "::1"] {
            #expect(PublicBase.isLoopback(host), "\(host)")
        }
        for host in ["localhost:1@evil.example", "127.0.0.1:80@evil.example", "[::1]:1@evil.example", "localhost/evil.example",
                     "localhost:80x", "localhost:", "localhost:123456", "127.0.0.1.evil.example", "127.0.0.256", "127.0.0", "[::2]:80",
                     "[::1", "evil.example", "localhost.evil.example", "localhost ", "0x7f.0.0.1", ""] {
            #expect(!PublicBase.isLoopback(host), "\(host)")
        }
    }
}
