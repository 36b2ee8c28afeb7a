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
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("firebase-admin/test_firebase_admin.py")
        try await FirebaseApp.run { firebase in
            let run = try await BlockingWork.run { () throws -> (Int32, String) in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: Self.python!)
                process.arguments = [script.path]
                process.environment = [
                    "FIREBASE_AUTH_EMULATOR_HOST": "127.0.0.1:\(firebase.app.port)",
                    "TETHER_FIREBASE_PROJECT_ID": FirebaseApp.projectID, "PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory(),
                ]
                let output = Pipe()
                process.standardOutput = output
                process.standardError = output
                try process.run()
                let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                return (process.terminationStatus, text)
            }
            #expect(run.0 == 0, "firebase-admin suite failed:\n\(run.1)")
            // unittest's summary: every test of the file ran (a test that failed to import would not).
            #expect(run.1.contains("Ran 5 tests") && run.1.hasSuffix("OK\n"), "\(run.1)")
        }
    }
}
