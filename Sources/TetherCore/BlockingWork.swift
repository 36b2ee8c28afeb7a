import Dispatch

/// Runs CPU-heavy synchronous work (a memory-hard password hash) on a dispatch thread.
///
/// A scrypt call takes hundreds of milliseconds; on one of Swift's few cooperative
/// threads it would stall every other request and deadline sweep meanwhile.
public enum BlockingWork {
    /// Runs `work` off the cooperative pool and returns its result.
    public static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(with: Result { try work() })
            }
        }
    }
}
