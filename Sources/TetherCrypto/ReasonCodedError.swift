/// An error identified by a stable machine-readable `reason`, with free-form `detail` for logs.
///
/// Tether's errors are structs over a private enum; this protocol gives them
/// one shared meaning of equality (by reason only, so callers can match a
/// static member whatever detail was attached) and one textual form.
public protocol ReasonCodedError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The stable machine code of the failure.
    var reason: String { get }
    /// Human-readable context; never part of equality.
    var detail: String { get }
}

extension ReasonCodedError {
    /// The reason followed by the detail.
    public var description: String { detail.isEmpty ? reason : "\(reason): \(detail)" }

    /// Errors are equal when their reasons are.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.reason == rhs.reason }

    /// Hashes the reason only, matching `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(reason) }
}
