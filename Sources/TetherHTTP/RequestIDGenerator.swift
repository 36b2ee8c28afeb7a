import Synchronization

/// Makes request ids that are unique across processes without a syscall per request.
///
/// A random 48-bit prefix per process plus a counter: cheaper than a random
/// UUID per request (`getrandom` each time) and still unique for log search.
final class RequestIDGenerator: Sendable {
    static let shared = RequestIDGenerator()

    private let prefix: String
    private let counter = Atomic<UInt64>(0)

    init() {
        let random = String(UInt64.random(in: 0..<(1 << 48)), radix: 16)
        prefix = String(repeating: "0", count: 12 - random.count) + random
    }

    func next() -> String {
        let sequence = counter.wrappingAdd(1, ordering: .relaxed).newValue
        return prefix + "-" + String(sequence, radix: 16)
    }

    /// Whether a client-supplied id may be echoed and logged: 1 to 128 visible ASCII characters.
    static func isAcceptable(_ candidate: String) -> Bool {
        let utf8 = candidate.utf8
        return (1...128).contains(utf8.count) && utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}
