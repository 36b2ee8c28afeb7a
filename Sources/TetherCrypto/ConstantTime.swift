import COpenSSL
import Foundation

/// Comparisons whose running time does not depend on secret data.
public enum ConstantTime: Sendable {
    /// Whether `lhs` and `rhs` hold the same bytes.
    ///
    /// The time depends only on the length of `lhs` (the expected value):
    /// on a length mismatch `lhs` is compared with itself so that no early,
    /// content-dependent return exists, and the answer is `false`.
    public static func isEqual(_ lhs: some ContiguousBytes, _ rhs: some ContiguousBytes) -> Bool {
        lhs.withUnsafeBytes { left in
            rhs.withUnsafeBytes { right in
                isEqual(left, right)
            }
        }
    }

    static func isEqual(_ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer) -> Bool {
        let hasSameLength = left.count == right.count
        guard left.count > 0, let leftBase = left.baseAddress else { return hasSameLength }
        let other = hasSameLength ? right.baseAddress! : leftBase
        let difference = CRYPTO_memcmp(leftBase, other, left.count)
        return hasSameLength && difference == 0
    }
}
