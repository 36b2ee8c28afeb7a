import Foundation

/// A private PostgreSQL cluster in a directory of its own, for `tether dev` and tests.
///
/// It listens only on 127.0.0.1 (no Unix socket), trusts local connections, and
/// runs as an unprivileged user when started by root, because PostgreSQL refuses
/// to run as root.
public struct LocalPostgresServer: Sendable {
    /// Where the cluster lives (`.tether/pg` for `tether dev`).
    public let dataDirectory: URL
    /// The TCP port on 127.0.0.1.
    public let port: Int
    /// Turns off durability (fsync) for throwaway test clusters, which makes them much faster.
    public let isThrowaway: Bool
    /// Further `postgresql.conf` settings (`name=value`), after Tether's own (replication tests).
    public var extraSettings: [String] = []

    /// Describes a cluster; `port` 0 reuses the port recorded by an earlier start, or picks a free one.
    public init(dataDirectory: URL, port: Int = 0, isThrowaway: Bool = false) throws {
        self.dataDirectory = Self.reachableLocation(for: dataDirectory.standardizedFileURL)
        self.isThrowaway = isThrowaway
        if port != 0 {
            self.port = port
        } else if let recorded = Self.recordedPort(in: self.dataDirectory) {
            self.port = recorded
        } else {
            self.port = try Self.freeLoopbackPort()
        }
    }

    /// The superuser connection URL of the cluster's `postgres` database.
    public var url: String { url(database: "postgres") }

    /// A connection URL for `database` on this cluster.
    public func url(database: String) -> String {
        "postgresql://postgres@127.0.0.1:\(port)/\(database)"
    }

    /// Creates the cluster on first use, then starts it and waits until it accepts connections.
    public func start() throws {
        let binaries = try Self.binaryDirectory()
        let fileManager = FileManager.default
        let owner = Self.unprivilegedUser()
        try fileManager.createDirectory(at: dataDirectory.deletingLastPathComponent(), withIntermediateDirectories: true)
        if !fileManager.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) {
            try Self.requireNothingAt(dataDirectory)
            try fileManager.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
            if let owner {
                try Self.run("/bin/chown", ["-R", owner, dataDirectory.path])
                try Self.requireAccess(for: owner, to: dataDirectory)
            }
            try Self.run(binaries + "/initdb", [
                "-D", dataDirectory.path, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-instructions",
            ], as: owner, what: "initdb (creating the PostgreSQL cluster in \(dataDirectory.path))")
        }
        if isRunning {
            // Running already, perhaps on another port than asked for: answering this one's URL would name a port
            // nothing listens on.
            if let running = runningPort, running != port {
                throw LocalPostgresError(
                    "a PostgreSQL cluster already runs in \(dataDirectory.path) on port \(running), not \(port): "
                        + "stop it first (tether postgres stop --data \(dataDirectory.path)) to start it on another")
            }
            return
        }
        var settings = [
            "listen_addresses='127.0.0.1'", "port=\(port)", "unix_socket_directories=''",
            "logging_collector=off",
        ]
        if isThrowaway {
            // Test suites run in parallel, each with its own service pools: many idle connections at once.
            settings += ["fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=600"]
        } else {
            settings += ["max_connections=200"]
        }
        settings += extraSettings
        let config = dataDirectory.appendingPathComponent("tether.conf")
        try (settings.joined(separator: "\n") + "\n").write(to: config, atomically: true, encoding: .utf8)
        let mainConfig = dataDirectory.appendingPathComponent("postgresql.conf")
        let existing = (try? String(contentsOf: mainConfig, encoding: .utf8)) ?? ""
        if !existing.contains("include_if_exists = 'tether.conf'") {
            try (existing + "\ninclude_if_exists = 'tether.conf'\n").write(to: mainConfig, atomically: false, encoding: .utf8)
        }
        if let owner {
            try Self.run("/bin/chown", [owner, config.path, mainConfig.path])
        }
        let portFile = Self.portFile(in: dataDirectory)
        let recorded = try? String(contentsOf: portFile, encoding: .utf8)
        try String(port).write(to: portFile, atomically: true, encoding: .utf8)
        let log = dataDirectory.appendingPathComponent("server.log")
        do {
            try Self.run(binaries + "/pg_ctl", ["-D", dataDirectory.path, "-l", log.path, "-w", "-t", "60", "start"],
                         as: owner, what: "pg_ctl start (log: \(log.path))")
        } catch let error as LocalPostgresError {
            // A port it could not start on is not remembered: the next start goes back to the one before, or a free one.
            if let recorded { try? recorded.write(to: portFile, atomically: true, encoding: .utf8) } else { try? FileManager.default.removeItem(at: portFile) }
            // pg_ctl says only "examine the log output"; the server's own last words say why.
            let lines = (try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").suffix(5) ?? []
            throw lines.isEmpty ? error : LocalPostgresError("\(error.message); the server's log ends: \(lines.joined(separator: " | "))")
        }
    }

    /// Stops the cluster (fast shutdown: open transactions are rolled back) if it is running.
    public func stop() throws {
        guard isRunning else { return }
        try Self.run(try Self.binaryDirectory() + "/pg_ctl", ["-D", dataDirectory.path, "-m", "fast", "-w", "stop"],
                     as: Self.unprivilegedUser(), what: "pg_ctl stop")
    }

    /// A streaming standby of this running cluster in `directory`, copied with `pg_basebackup` and set up
    /// to follow it (`standby.signal`, `primary_conninfo` naming it `name`, the name a primary's
    /// `synchronous_standby_names` lists); not started yet.
    public func makeStandby(at directory: URL, name: String) throws -> LocalPostgresServer {
        let standby = try LocalPostgresServer(dataDirectory: directory, port: try Self.freeLoopbackPort())
        let owner = Self.unprivilegedUser()
        let fileManager = FileManager.default
        try? fileManager.removeItem(at: standby.dataDirectory)
        try fileManager.createDirectory(at: standby.dataDirectory.deletingLastPathComponent(), withIntermediateDirectories: true)
        if let owner {
            try fileManager.createDirectory(at: standby.dataDirectory, withIntermediateDirectories: true)
            try Self.run("/bin/chown", ["-R", owner, standby.dataDirectory.path])
            try Self.run("/bin/chmod", ["0700", standby.dataDirectory.path])
        }
        try Self.run(try Self.binaryDirectory() + "/pg_basebackup", [
            "-D", standby.dataDirectory.path, "-d", "host=127.0.0.1 port=\(port) user=postgres application_name=\(name)",
            "-R", "-X", "stream", "-c", "fast",
        ], as: owner, what: "pg_basebackup (a standby of port \(port))")
        return standby
    }

    /// Promotes a standby to a primary and waits until it accepts writes.
    public func promote() throws {
        try Self.run(try Self.binaryDirectory() + "/pg_ctl", ["-D", dataDirectory.path, "-w", "promote"],
                     as: Self.unprivilegedUser(), what: "pg_ctl promote")
    }

    /// The port the running cluster listens on (the fourth line of `postmaster.pid`), when it runs.
    var runningPort: Int? {
        guard isRunning, let text = try? String(contentsOf: dataDirectory.appendingPathComponent("postmaster.pid"), encoding: .utf8) else {
            return nil
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        return lines.count > 3 ? Int(lines[3].trimmingCharacters(in: .whitespaces)) : nil
    }

    /// Whether a server is running on the data directory (its postmaster.pid is live).
    public var isRunning: Bool {
        guard let pidText = try? String(contentsOf: dataDirectory.appendingPathComponent("postmaster.pid"), encoding: .utf8),
              let pid = pidText.split(separator: "\n").first.flatMap({ Int32($0) })
        else { return false }
        // EPERM: the process lives but is another user's (a cluster root started runs as `postgres`).
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// Refuses to make a cluster where something else already is: a file, or a directory that holds files (a
    /// mistyped `--data`, or a cluster whose `initdb` was interrupted). Nothing there is removed.
    static func requireNothingAt(_ directory: URL) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) else { return }
        guard isDirectory.boolValue else {
            throw LocalPostgresError("\(directory.path) is a file, not a PostgreSQL data directory: choose another path")
        }
        guard try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty else {
            throw LocalPostgresError(
                "\(directory.path) holds files but no PostgreSQL cluster (no PG_VERSION): nothing in it was touched; "
                    + "choose an empty or new directory, or remove it")
        }
    }

    /// Where the cluster can live: the requested directory, or, when PostgreSQL's unprivileged
    /// user could not reach it (a checkout under /root, say), a directory of its own under
    /// /var/tmp with a symbolic link at the requested place so people still find it there.
    static func reachableLocation(for requested: URL) -> URL {
        guard unprivilegedUser() != nil else { return requested }
        let fileManager = FileManager.default
        if let destination = try? fileManager.destinationOfSymbolicLink(atPath: requested.path) {
            return URL(fileURLWithPath: destination)
        }
        var ancestor = requested.deletingLastPathComponent()
        var isReachable = true
        while ancestor.path != "/" {
            if let attributes = try? fileManager.attributesOfItem(atPath: ancestor.path),
               let permissions = attributes[.posixPermissions] as? Int, permissions & 0o001 == 0 {
                isReachable = false
                break
            }
            ancestor.deleteLastPathComponent()
        }
        guard !isReachable else { return requested }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in requested.path.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        let location = URL(fileURLWithPath: "/var/tmp/tether-pg/\(String(hash, radix: 16))")
        try? fileManager.createDirectory(at: URL(fileURLWithPath: "/var/tmp/tether-pg"), withIntermediateDirectories: true)
        try? fileManager.createDirectory(at: requested.deletingLastPathComponent(), withIntermediateDirectories: true)
        if !fileManager.fileExists(atPath: requested.path) {
            try? fileManager.createSymbolicLink(at: requested, withDestinationURL: location)
        }
        return location
    }

    private static func portFile(in directory: URL) -> URL {
        directory.appendingPathComponent("tether-port")
    }

    private static func recordedPort(in directory: URL) -> Int? {
        guard let text = try? String(contentsOf: portFile(in: directory), encoding: .utf8) else { return nil }
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// A port on 127.0.0.1 that nothing uses right now, below the kernel's ephemeral range.
    ///
    /// A port from the ephemeral range (what binding port 0 gives) is free only until the next outgoing
    /// connection on the machine picks it as its source port, and then a server told to listen there
    /// cannot bind it: a test suite opening thousands of connections met that. Ports below the range are
    /// never handed out that way; only when the range leaves none does this fall back to port 0.
    public static func freeLoopbackPort() throws -> Int {
        let ephemeralStart = ephemeralPortRange().lowerBound
        let candidates = 10_000..<max(10_000, ephemeralStart)
        if candidates.count >= 1_000 {
            for _ in 0..<200 {
                let port = Int.random(in: candidates)
                if try bindLoopback(port: port) == port { return port }
            }
        }
        guard let port = try bindLoopback(port: 0) else { throw LocalPostgresError("cannot bind 127.0.0.1 to find a free port") }
        return port
    }

    /// The kernel's range of source ports for outgoing connections (Linux's default when unreadable).
    public static func ephemeralPortRange() -> ClosedRange<Int> {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] <= bounds[1] else { return 32_768...60_999 }
        return bounds[0]...bounds[1]
    }

    /// Binds a socket to 127.0.0.1:`port` and closes it again: the port bound (the kernel's pick for 0),
    /// or nil when it is in use.
    private static func bindLoopback(port: Int) throws -> Int? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw LocalPostgresError("cannot open a socket to find a free port") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
            }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }

    /// The directory holding `initdb` and `pg_ctl` (Debian keeps them off the PATH).
    static func binaryDirectory() throws -> String {
        let fileManager = FileManager.default
        if let output = try? capture("/usr/bin/env", ["pg_config", "--bindir"]),
           fileManager.isExecutableFile(atPath: output + "/initdb") {
            return output
        }
        let root = "/usr/lib/postgresql"
        let versions = ((try? fileManager.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted(by: >)
        for version in versions where fileManager.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        where fileManager.isExecutableFile(atPath: "\(directory)/initdb") {
            return String(directory)
        }
        throw LocalPostgresError("PostgreSQL server binaries (initdb, pg_ctl) not found: install the postgresql package (make run does)")
    }

    /// The user PostgreSQL runs as when we are root; nil when we are not root.
    static func unprivilegedUser() -> String? {
        guard getuid() == 0 else { return nil }
        return getpwnam("postgres") != nil ? "postgres" : "nobody"
    }

    /// Fails clearly when `user` cannot reach `directory` (a parent such as /root is closed to it).
    private static func requireAccess(for user: String, to directory: URL) throws {
        do {
            try run("/usr/bin/test", ["-w", directory.path], as: user, what: "access check")
        } catch {
            throw LocalPostgresError(
                "PostgreSQL runs as the user \(user), who cannot write \(directory.path) (a parent directory is closed to it); "
                    + "move the checkout or set TETHER_DATABASE_URL")
        }
    }

    @discardableResult
    private static func run(_ executable: String, _ arguments: [String], as user: String? = nil, what: String? = nil) throws -> String {
        var executable = executable
        var arguments = arguments
        if let user {
            arguments = ["-u", user, "--", executable] + arguments
            executable = "/sbin/runuser"
        }
        // A file, not a pipe, and posix_spawn rather than Foundation's Process:
        // pg_ctl leaves the server running with the descriptors it inherited, so
        // anything that waits for those to close would wait for the server to stop.
        let outputURL = FileManager.default.temporaryDirectory.appendingPathComponent("tether-\(UUID.random().uuidString).log")
        defer { try? FileManager.default.removeItem(at: outputURL) }
        let status = try spawnAndWait(executable, arguments, output: outputURL.path)
        let data = (try? Data(contentsOf: outputURL)) ?? Data()
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard status == 0 else {
            let lastLines = text.split(separator: "\n").suffix(5).joined(separator: " | ")
            throw LocalPostgresError("\(what ?? executable) failed (exit \(status)): \(lastLines)")
        }
        return text
    }

    /// Runs a program with stdin from /dev/null and stdout/stderr into `output`, and waits for it alone.
    private static func spawnAndWait(_ executable: String, _ arguments: [String], output: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Keep our sockets and files (an HTTP listener, test connections) out of the server.
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for descriptor in open.compactMap({ Int32($0) }) where descriptor > 2 && fcntl(descriptor, F_GETFD) >= 0 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw LocalPostgresError("cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw LocalPostgresError("waiting for \(executable) failed: errno \(errno)") }
        }
        // WIFEXITED / WEXITSTATUS, which Swift does not import.
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    private static func capture(_ executable: String, _ arguments: [String]) throws -> String {
        try run(executable, arguments)
    }
}

/// Why the private PostgreSQL cluster could not be created, started or stopped.
public struct LocalPostgresError: Error, Sendable, CustomStringConvertible {
    /// One line saying what failed.
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
