/// A setting that cannot be used: one line naming the variable, which stops start-up.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The variable (or file) at fault.
    public let variable: String
    /// What is wrong with its value.
    public let problem: String

    /// Describes a problem with `variable`.
    public init(_ variable: String, _ problem: String) {
        self.variable = variable
        self.problem = problem
    }

    /// `VARIABLE: problem`.
    public var description: String { "\(variable): \(problem)" }
}
