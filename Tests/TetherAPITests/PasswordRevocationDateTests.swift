import Foundation
import Synchronization
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherTesting

/// A password hashed slowly (`delay` before each new hash): the time a real work factor takes, made long enough
/// that a revocation dated at the request's start, before the hash, is told apart from one dated after it.
private struct SlowHasher: PasswordHashing {
    let delay: TimeInterval
    let hasher = RunningService.quickPasswords

    func hash(_ password: [UInt8]) throws -> String {
        Thread.sleep(forTimeInterval: delay)
        return try hasher.hash(password)
    }

    func verify(_ password: [UInt8], against storedHash: String) throws -> Bool { try hasher.verify(password, against: storedHash) }
    func needsRehash(_ storedHash: String) -> Bool { hasher.needsRehash(storedHash) }
}

/// Every way a password is set ends the user's sessions as of when it is written, after its hash: tokens a
/// session refreshed while the hash ran (hundreds of milliseconds with a real work factor) would otherwise be
/// dated after the revocation, and a backend checking `iat` against `validSince` (firebase-admin's
/// check_revoked) would take them for their hour.
@Suite("A password's revocation is dated after its hash, on every surface")
struct PasswordRevocationDateTests {
    static let delay: TimeInterval = 0.5

    enum Path: String, CaseIterable, Sendable {
        case firebaseOwnChange, firebaseAdmin, parseChange, parseFirstPassword, commandLayerAdmin
    }

    /// Runs a service with both compatible surfaces on and a slow hasher.
    private func run(_ body: (DevService) async throws -> Void) async throws {
        let settings = [
            "TETHER_FIREBASE_PROJECT_ID": FirebaseApp.projectID, "TETHER_PARSE_APP_ID": ParseApp.appID,
            "TETHER_SIGN_IN_FAILURE_LIMIT": "1000",
        ]
        try await DevService.run(settings: settings, passwords: SlowHasher(delay: Self.delay), body)
    }

    /// The user's sign-up on /v1, with a password (every path but Parse's first password).
    private func signUp(_ service: DevService, _ email: String) async throws -> UUID {
        let response = try await service.client.post("/v1/sign-up", json: ["email": email, "password": "first password"])
        guard response.status == 201 else { throw HarnessError("sign-up answered \(response.status): \(response.bodyText)") }
        return try #require(UUID(uuidString: try response.decodeJSON(SignedIn.self).user.id))
    }

    /// Sets a password the path's way for a user it makes: the user, and when the change was sent.
    private func change(_ path: Path, _ service: DevService) async throws -> (userId: UUID, sent: Date) {
        let firebase = FirebaseApp(app: service), parse = ParseApp(app: service)
        switch path {
        case .firebaseOwnChange, .firebaseAdmin:
            let userId = try await signUp(service, "fb@example.com")
            let signedIn = try await firebase.call(
                "accounts:signInWithPassword", .object(["email": "fb@example.com", "password": "first password", "returnSecureToken": true]))
            let idToken = try #require(signedIn.string("idToken"), "\(signedIn.text)")
            let sent = Date()
            let answer = path == .firebaseAdmin
                ? try await firebase.admin("accounts:update", .object(["localId": .string(userId.uuidString.lowercased()), "password": "second password"]))
                : try await firebase.call("accounts:update", .object(["idToken": .string(idToken), "password": "second password"]))
            #expect(answer.status == 200, "\(answer.text)")
            return (userId, sent)
        case .parseChange, .parseFirstPassword:
            let userId: UUID, logIn: ParseAnswer
            if path == .parseChange {
                userId = try await signUp(service, "parse@example.com")
                logIn = try await parse.send("POST", "/login", json: .object(["username": "parse@example.com", "password": "first password"]))
            } else {
                let viaV1 = try await service.signedIn(try await service.apple("apple-first", email: "first@example.com"))
                userId = try #require(UUID(uuidString: viaV1.user.id))
                logIn = try await parse.logIn("apple", ["id": "apple-first", "token": try await parse.appleToken("apple-first", email: "first@example.com")])
            }
            let objectId = try #require(logIn.string("objectId"), "\(logIn.text)")
            // A first password is keyed by the user's address, named as its username.
            let fields: JSONValue = path == .parseChange ? ["password": "second password"] : ["username": "first@example.com", "password": "a password"]
            let sent = Date()
            let answer = try await parse.send("PUT", "/users/\(objectId)", .init(session: logIn.string("sessionToken")), json: fields)
            #expect(answer.status == 200, "\(answer.text)")
            return (userId, sent)
        case .commandLayerAdmin:
            let userId = try await signUp(service, "admin@example.com")
            let sent = Date()
            // A command that came a minute ago (its context's time), whose hash and write happen now.
            _ = try await service.service.commands.setPassword(
                userId: userId, password: "second password", context: CommandContext(now: sent.addingTimeInterval(-60)))
            return (userId, sent)
        }
    }

    @Test(arguments: Path.allCases)
    func theRevocationComesAfterTheHash(_ path: Path) async throws {
        try await run { service in
            let (userId, sent) = try await change(path, service)
            let validSince = try #require(try await service.service.accounts.read(userId).validSince)
            #expect(validSince >= sent.addingTimeInterval(Self.delay), "revoked \(validSince.timeIntervalSince(sent)) s after the request was sent")
        }
    }
}
