import Foundation
import TetherCore
import TetherTesting

/// The built `tether` executable, run as an operator would run it, from any test.
enum TetherCommandLine {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String

        var lines: [String] { stdout.split(separator: "\n").map(String.init) }
    }

    /// Runs `.build/debug/tether` (built with the tests) with `arguments` and only the given `TETHER_DATABASE_URL`.
    ///
    /// The wait happens on a dispatch thread: blocked in `waitpid` on one of the few
    /// cooperative threads, it would stall every other test's server meanwhile.
    /// - Parameter standardOutput: a path to write standard output to (`/dev/full`, say) instead of a file read back.
    static func run(
        _ arguments: [String], databaseURL: String?, environment extra: [String: String] = [:], standardOutput: String? = nil
    ) async throws -> Run {
        try await BlockingWork.run { try runAndWait(arguments, databaseURL: databaseURL, extra: extra, standardOutput: standardOutput) }
    }

    private static func runAndWait(_ arguments: [String], databaseURL: String?, extra: [String: String], standardOutput: String?) throws -> Run {
        let process = try spawn(arguments, databaseURL: databaseURL, environment: extra, standardOutput: standardOutput)
        return try process.waitBlocking()
    }

    /// A `tether` process started by ``spawn(_:databaseURL:environment:)``, still running until waited for.
    final class Process: Sendable {
        let pid: pid_t
        let directory: URL

        init(pid: pid_t, directory: URL) {
            self.pid = pid
            self.directory = directory
        }

        /// Sends `signal` (SIGKILL: the process gets no chance to clean up).
        func send(_ signal: Int32) {
            kill(pid, signal)
        }

        /// Waits for the exit (on a dispatch thread), and answers its status and output.
        func wait() async throws -> Run {
            try await BlockingWork.run { try self.waitBlocking() }
        }

        fileprivate func waitBlocking() throws -> Run {
            defer { try? FileManager.default.removeItem(at: directory) }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 {
                guard errno == EINTR else { throw HarnessError("waitpid failed: errno \(errno)") }
            }
            let read = { (name: String) in
                String(decoding: FileManager.default.contents(atPath: self.directory.appendingPathComponent(name).path) ?? Data(), as: UTF8.self)
            }
            return Run(status: status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f), stdout: read("stdout"), stderr: read("stderr"))
        }
    }

    /// Starts `tether serve` listening on `port` and returns once its `/readyz` answers 200 (within 10 s).
    static func serve(databaseURL: String, port: Int, environment: [String: String]) async throws -> Process {
        var environment = environment
        environment["TETHER_LISTEN"] = "127.0.0.1:\(port)"
        return try await ready(try spawn(["serve"], databaseURL: databaseURL, environment: environment), port: port, within: .seconds(10))
    }

    /// `process` once its `/readyz` on `port` answers 200; killed, and its output thrown, when it does not within `limit`.
    static func ready(_ process: Process, port: Int, within limit: Duration) async throws -> Process {
        let probe = HTTPTestClient(port: port, timeout: .seconds(2))
        defer { Task { await probe.close() } }
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if (try? await probe.get("/readyz").status) == 200 { return process }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.send(SIGKILL)
        throw HarnessError("tether did not get ready: \(try await process.wait().stderr)")
    }

    /// Starts `.build/debug/tether` with `arguments`, only the given `TETHER_DATABASE_URL` and `environment`, and returns at once.
    static func spawn(
        _ arguments: [String], databaseURL: String?, environment extra: [String: String] = [:], standardOutput: String? = nil
    ) throws -> Process {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let executable = root.appendingPathComponent(".build/debug/tether").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw HarnessError("\(executable) is missing: build with swift build --build-tests first")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let out = directory.appendingPathComponent("stdout").path
        let err = directory.appendingPathComponent("stderr").path

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, standardOutput ?? out, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var environment = ["PATH=/usr/bin:/bin", "USER=support-test"]
        if let databaseURL { environment.append("TETHER_DATABASE_URL=\(databaseURL)") }
        environment += extra.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard spawned == 0 else {
            try? FileManager.default.removeItem(at: directory)
            throw HarnessError("cannot run \(executable): errno \(spawned)")
        }
        return Process(pid: pid, directory: directory)
    }

}
