/// Why a seed could not be read or loaded: one line naming the seed file and, when known, the step.
public struct SeedError: Error, Sendable, CustomStringConvertible {
    /// The seed's name (its file name without `.json`).
    public let seed: String
    /// The step's index (0-based) and summary (`link facebook`), when the fault is in one step.
    public let step: (index: Int, summary: String)?
    /// What went wrong.
    public let message: String

    /// A fault of the seed as a whole.
    public init(seed: String, _ message: String) {
        self.seed = seed
        self.step = nil
        self.message = message
    }

    /// A fault of one step.
    public init(seed: String, step index: Int, _ summary: String, _ message: String) {
        self.seed = seed
        self.step = (index, summary)
        self.message = message
    }

    /// `seeds/grace.json, step 2 (link apple): credential_already_in_use …`; steps are counted from 1 for people.
    public var description: String {
        let place = step.map { "seeds/\(seed).json, step \($0.index + 1) (\($0.summary))" } ?? "seeds/\(seed).json"
        return "\(place): \(message)"
    }
}
