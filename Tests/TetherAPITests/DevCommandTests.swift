import Foundation
import Testing
import TetherCrypto
import TetherPostgres
import TetherTesting

/// `tether dev` on a data directory another `tether dev` uses too.
@Suite("tether dev: a PostgreSQL shared by two")
struct DevCommandTests {
    /// Starts `tether dev --data <data> --no-seeds` on `port`; returns once its `/readyz` answers 200.
    private func dev(data: URL, port: Int, masterKey: String) async throws -> TetherCommandLine.Process {
        try await TetherCommandLine.ready(TetherCommandLine.spawn(["dev", "--data", data.path, "--no-seeds"], databaseURL: nil, environment: [
            "TETHER_LISTEN": "127.0.0.1:\(port)", "TETHER_MASTER_KEY_FILE": masterKey, "TETHER_LOG_LEVEL": "info",
        ]), port: port, within: .seconds(30))
    }

    /// The first `tether dev` started the cluster, a second joined it: when the first stops, the second keeps
    /// its database; when the second stops, it leaves what it did not start.
    @Test func theOneThatStartedItLeavesItRunningWhileAnotherUsesIt() async throws {
        let base = URL(fileURLWithPath: "/tmp/tether-devtwo-\(UUID().uuidString.prefix(8))")
        let data = base.appendingPathComponent("pg")
        let masterKey = base.appendingPathComponent("master.key").path
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        _ = try MasterKey.create(at: masterKey)
        defer {
            if let cluster = try? LocalPostgresServer(dataDirectory: data) { try? cluster.stop() }
            try? FileManager.default.removeItem(at: base)
        }
        let first = try await dev(data: data, port: try LocalPostgresServer.freeLoopbackPort(), masterKey: masterKey)
        let secondPort = try LocalPostgresServer.freeLoopbackPort()
        let second = try await dev(data: data, port: secondPort, masterKey: masterKey)

        first.send(SIGINT)
        let firstRun = try await first.wait()
        #expect(firstRun.status == 0, "\(firstRun.stderr)")
        #expect((firstRun.stdout + firstRun.stderr).contains("PostgreSQL left running: other clients still use it"))
        let cluster = try LocalPostgresServer(dataDirectory: data)
        #expect(cluster.isRunning)
        let probe = HTTPTestClient(port: secondPort, timeout: .seconds(2))
        for _ in 0..<5 {
            #expect(try await probe.get("/readyz").status == 200, "the second keeps its database")
            try await Task.sleep(for: .milliseconds(100))
        }
        await probe.close()

        second.send(SIGINT)
        let secondRun = try await second.wait()
        #expect(secondRun.status == 0, "\(secondRun.stderr)")
        #expect(!(secondRun.stdout + secondRun.stderr).contains("stopping PostgreSQL"))
        #expect(cluster.isRunning, "the second did not start it, and leaves it")

        // Alone, a tether dev stops the cluster it started (its own connections do not count as another's).
        try cluster.stop()
        let alone = try await dev(data: data, port: secondPort, masterKey: masterKey)
        alone.send(SIGINT)
        let aloneRun = try await alone.wait()
        #expect(aloneRun.status == 0, "\(aloneRun.stderr)")
        #expect((aloneRun.stdout + aloneRun.stderr).contains("stopping PostgreSQL"))
        #expect(!cluster.isRunning)
    }
}
