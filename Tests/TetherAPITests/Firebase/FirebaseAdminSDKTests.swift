import Foundation
import Testing
import TetherCore

/// The real firebase-admin (Python, pinned in `Tests/firebase-admin/requirements.txt`) against a Tether
/// service in development mode, as `FIREBASE_AUTH_EMULATOR_HOST` points it at an emulator. `make test`
/// installs the SDK into `.tether/firebase-admin-venv` and scripts/test.sh names its Python; a bare
/// `swift test` without it reports this test as skipped, never as passed.
@Suite("firebase-admin against Tether")
struct FirebaseAdminSDKTests {
    static let python = ProcessInfo.processInfo.environment["TETHER_TEST_FIREBASE_ADMIN_PYTHON"]

    @Test(.enabled(if: python != nil, "firebase-admin is not installed: run make test"))
    func theFirebaseAdminSuitePasses() async throws {
        try await FirebaseApp.run { firebase in
            let run = try await Self.python("test_firebase_admin.py", environment: [
                "FIREBASE_AUTH_EMULATOR_HOST": "127.0.0.1:\(firebase.app.port)", "TETHER_FIREBASE_PROJECT_ID": FirebaseApp.projectID,
            ])
            // unittest's summary: every test of the file ran (a test that failed to import would not).
            #expect(run.status == 0 && run.output.contains("Ran 13 tests") && run.output.hasSuffix("OK\n"), "\(run.output)")
        }
    }

    /// `tether firebase service-account create` makes the JSON firebase-admin signs custom tokens with,
    /// outside emulator mode, and a production-mode service takes exactly those.
    @Test(.enabled(if: python != nil, "firebase-admin is not installed: run make test"))
    func customTokensSignedWithAServiceAccountSignInUnderServe() async throws {
        try await FirebaseApp.run(settings: ["TETHER_TEST_PRODUCTION": "1"]) { firebase in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-sa-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let config = directory.appendingPathComponent("config.json")
            try Data(#"{"TETHER_FIREBASE_PROJECT_ID": "\#(FirebaseApp.projectID)"}"#.utf8).write(to: config)
            let created = try await TetherCommandLine.run(
                ["firebase", "service-account", "create", "--config", config.path], databaseURL: firebase.app.database.url)
            #expect(created.status == 0, "\(created.stderr)")
            #expect(created.stderr.contains("shown this once"))
            let account = try JSONDecoder().decode([String: String].self, from: Data(created.stdout.utf8))
            #expect(account["type"] == "service_account" && account["project_id"] == FirebaseApp.projectID)
            let stored = try await firebase.app.admin.query("SELECT public_key_pem FROM firebase_service_accounts")
            #expect(stored.count == 1)
            #expect(!(try stored[0].decode("public_key_pem", as: String.self)).contains("PRIVATE"))
            let file = directory.appendingPathComponent("service-account.json")
            try Data(created.stdout.utf8).write(to: file)
            let run = try await Self.python("test_firebase_admin_production.py", environment: [
                "TETHER_URL": "http://127.0.0.1:\(firebase.app.port)", "TETHER_SERVICE_ACCOUNT": file.path,
            ])
            #expect(run.status == 0 && run.output.contains("Ran 2 tests") && run.output.hasSuffix("OK\n"), "\(run.output)")
        }
    }

    /// Runs a script of `Tests/firebase-admin` with the SDK's Python and only `environment` (and a `PATH`).
    private static func python(_ script: String, environment: [String: String]) async throws -> (status: Int32, output: String) {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("firebase-admin/\(script)").path
        return try await BlockingWork.run { () throws -> (Int32, String) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Self.python!)
            process.arguments = [path]
            process.environment = environment.merging(["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()]) { given, _ in given }
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, text)
        }
    }
}
