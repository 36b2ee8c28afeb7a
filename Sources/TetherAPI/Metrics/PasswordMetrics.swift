import TetherHTTP

/// The passwords hashed since the start (scrypt: the costliest work a request can ask for).
struct PasswordMetrics: MetricsCollector {
    let commands: AccountCommands

    func collect() async throws -> [MetricFamily] {
        [MetricFamily(
            name: "tether_password_hashes_total", help: "Passwords hashed (sign-ups, changes, resets, links of a password).",
            type: .counter, samples: [MetricSample(value: Double(commands.passwordHashes.count.load(ordering: .relaxed)))])]
    }
}
