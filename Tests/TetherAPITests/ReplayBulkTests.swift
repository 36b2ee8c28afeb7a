import Foundation
import Testing
@testable import TetherAPI
@testable import TetherCore
import TetherPostgres
import TetherTesting

/// A small deterministic generator, so a failing log can be made again from its seed.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return state ^ (state >> 29)
    }
}

/// What a user's commands have made so far, so later events name rows that exist (or, on purpose, do not).
private struct Made {
    var sessions: [UUID] = []
    var generations: [UUID: Int] = [:]
    var factors: [UUID] = []
    var challenges: [UUID] = []
    var codes: [String] = []
    var providers: [String] = ["apple"]
}

@Suite("tether replay: the bulk phase and the event-by-event path rebuild the same rows")
struct ReplayBulkTests {
    /// Every account event type the projection reads or passes over.
    static let everyType: Set<String> = [
        "UserRegistered", "IdentityLinked", "IdentityUnlinked", "EmailVerified", "PasswordSet", "SignedIn", "SessionStarted",
        "SessionRefreshed", "SessionEnded", "SessionsRevoked", "UserDisabled", "UserEnabled", "UserErased", "MFAFactorEnrolled",
        "MFAFactorConfirmed", "MFAFactorRemoved", "MFARecoveryCodesIssued", "MFAChallengeIssued", "MFACodeSent",
        "MFACodeDeliveryFailed", "MFACodeAccepted", "MFACodeRejected", "MFARecoveryCodeUsed", "MFAChallengeEnded",
        "ProfileUpdated", "CustomClaimsSet", "EmailChanged",
    ]

    private func pick<T>(_ values: [T], _ random: inout SeededGenerator) -> T? {
        values.isEmpty ? nil : values[Int(random.next() % UInt64(values.count))]
    }

    private func maybe(_ text: String, _ random: inout SeededGenerator) -> String? {
        random.next() % 3 == 0 ? nil : text
    }

    /// One command's events, chosen at random among every kind, with ids of rows the user has (mostly).
    private func command(_ made: inout Made, _ index: Int, _ random: inout SeededGenerator) -> [AccountEvent] {
        let now = Date(timeIntervalSince1970: 1_790_000_000 + Double(index))
        let session = pick(made.sessions, &random) ?? UUID()
        let factor = pick(made.factors, &random) ?? UUID()
        let challenge = pick(made.challenges, &random) ?? UUID()
        let text = "v\(index) tab\there\\ and\nline"
        switch random.next() % 24 {
        case 0:
            let id = UUID()
            made.sessions.append(id)
            return [
                .signedIn(.init(provider: "apple", sessionId: id, outcome: "returning")),
                .sessionStarted(.init(
                    sessionId: id, refreshTokenHash: "rt-\(id)", authTime: now, amr: ["apple", "x\(index)"],
                    jkt: maybe("jkt-\(index)", &random), secretKind: random.next() % 2 == 0 ? .accessAndRefreshTokens : .parseSessionToken,
                    installationId: maybe("inst-\(index)", &random), expiresAt: random.next() % 2 == 0 ? now + 3600 : nil, personal: nil)),
            ]
        case 1:
            let generation = (made.generations[session] ?? 0) + 1
            made.generations[session] = generation
            return [.sessionRefreshed(.init(sessionId: session, previousTokenHash: "old", refreshTokenHash: "rt-\(session)-\(generation)", generation: generation))]
        case 2: return [.sessionEnded(.init(sessionId: session, reason: random.next() % 2 == 0 ? "signed_out" : "reused"))]
        case 3: return [.sessionsRevoked(.init(validSince: now))]
        case 4:
            let provider = pick(["google", "facebook", "password", "custom"], &random)!
            if made.providers.contains(provider) { return [] }
            made.providers.append(provider)
            return [.identityLinked(.init(
                provider: provider, uid: "\(provider)-\(UUID())", emailVerified: random.next() % 2 == 0,
                personal: PersonalData(email: maybe("Linked.\(index)@Example.com", &random), displayName: maybe(text, &random),
                                       photoURL: maybe("https://example.com/\(index).png", &random))))]
        case 5:
            guard let provider = pick(made.providers, &random) else { return [] }
            made.providers.removeAll { $0 == provider }
            return [.identityUnlinked(.init(provider: provider, uid: "any", reason: "user"))]
        case 6: return [.emailVerified(.init(provider: "google", personal: PersonalData(email: maybe("Verified.\(index)@Example.com", &random))))]
        case 7: return [.passwordSet(.init(personal: PersonalData(passwordHash: "$scrypt$\(index)")))]
        case 8: return [random.next() % 2 == 0 ? .userDisabled(.init(reason: "support")) : .userEnabled(.init(reason: nil))]
        case 9:
            return [.profileUpdated(.init(
                personal: PersonalData(displayName: maybe(text, &random), photoURL: maybe("https://example.com/p\(index)", &random)),
                cleared: [random.next() % 3 == 0 ? "displayName" : "", random.next() % 3 == 0 ? "photoURL" : ""].filter { !$0.isEmpty },
                emailVerified: random.next() % 3 == 0 ? nil : random.next() % 2 == 0))]
        case 10:
            return [.emailChanged(.init(personal: PersonalData(email: maybe("Changed.\(index)@Example.COM", &random)), emailVerified: random.next() % 2 == 0))]
        case 11: return [.customClaimsSet(.init(personal: PersonalData(customClaims: pick(["{}", "{\"role\":\"x\(index)\"}"], &random))))]
        case 12:
            let id = UUID()
            made.factors.append(id)
            let phone = random.next() % 2 == 0
            return [.mfaFactorEnrolled(.init(
                factorId: id, type: phone ? .phone : .totp,
                personal: PersonalData(displayName: maybe("factor \(index)", &random), phoneNumber: phone ? "+1555010\(index % 10)\(index % 7)" : nil)))]
        case 13: return [.mfaFactorConfirmed(.init(factorId: factor, totpStep: random.next() % 2 == 0 ? Int64(index) : nil))]
        case 14:
            made.factors.removeAll { $0 == factor }
            return [.mfaFactorRemoved(.init(factorId: factor, reason: "user"))]
        case 15:
            made.codes = (0..<3).map { "code-\(index)-\($0)" }
            return [.mfaRecoveryCodesIssued(.init(codeHashes: made.codes))]
        case 16:
            let id = UUID()
            made.challenges.append(id)
            return [.mfaChallengeIssued(.init(challengeId: id, firstFactor: "password", amr: ["pwd"], expiresAt: now + 300, jkt: nil))]
        case 17:
            return [.mfaCodeSent(.init(challengeId: random.next() % 3 == 0 ? nil : challenge, factorId: factor, codeHash: "h\(index)", expiresAt: now + 120))]
        case 18: return [.mfaCodeDeliveryFailed(.init(challengeId: challenge, factorId: factor, reason: "webhook_failed"))]
        case 19:
            return [.mfaCodeAccepted(.init(
                challengeId: challenge, factorId: random.next() % 2 == 0 ? factor : nil, method: .totp,
                totpStep: random.next() % 2 == 0 ? Int64(index * 3) : nil, sessionId: session))]
        case 20:
            return [.mfaCodeRejected(.init(
                challengeId: random.next() % 4 == 0 ? nil : challenge, factorId: nil, method: .sms, attempt: index % 5, reason: "wrong_code"))]
        case 21: return [.mfaRecoveryCodeUsed(.init(challengeId: challenge, codeHash: pick(made.codes, &random) ?? "none"))]
        case 22: return [.mfaChallengeEnded(.init(challengeId: challenge, reason: "completed"))]
        default:
            // A whole sign-in with a second factor in one command, as the MFA flow writes it.
            let id = UUID()
            made.sessions.append(id)
            return [
                .mfaCodeAccepted(.init(challengeId: challenge, factorId: factor, method: .totp, totpStep: Int64(index), sessionId: id)),
                .mfaChallengeEnded(.init(challengeId: challenge, reason: "completed")),
                .signedIn(.init(provider: "password", sessionId: id, outcome: "mfa")),
                .sessionStarted(.init(
                    sessionId: id, refreshTokenHash: "rt-\(id)", authTime: now, amr: ["pwd", "otp"], jkt: nil,
                    secretKind: .firebaseTokens, installationId: nil, expiresAt: nil, personal: nil)),
            ]
        }
    }

    private func rows(_ client: PostgresClient) async throws -> [String] {
        try await accountTableRows(client)
    }

    @Test(arguments: [UInt64(7), 2026])
    func aLogOfEveryEventTypeRebuildsTheLiveRowsInBulkAndEventByEvent(seed: UInt64) async throws {
        let database = try await TestDatabase.make()
        let service = database.client(maxConnections: 4)
        let owner = database.client(asServiceRole: false, maxConnections: 4)
        defer { service.shutdown(); owner.shutdown() }
        let accounts = AccountService(database: service, emailPolicy: .allowDuplicateEmails)
        var random = SeededGenerator(state: seed)
        var index = 0
        for user in 0..<80 {
            let apple = ExternalIdentity(
                provider: "apple", uid: "bulk-\(seed)-\(user)", email: user % 2 == 0 ? "u\(user)@privaterelay.appleid.com" : nil,
                isEmailVerified: user % 2 == 0, displayName: user % 3 == 0 ? "User \(user)" : nil)
            let session = NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: ["apple"])
            let userId = try await accounts.signIn(apple, session: session, context: CommandContext()).userId
            var made = Made(sessions: [session.id])
            for _ in 0..<16 {
                index += 1
                let events = command(&made, index, &random)
                guard !events.isEmpty else { continue }
                // A command the live tables refuse (a second identity of one provider, say) writes nothing.
                _ = try? await accounts.execute(userId, CommandContext()) { _ in (events, ()) }
            }
            switch user % 10 {
            case 3: // erased for real: the key is destroyed, the log's personal parts read as erased
                try await accounts.erase(userId: userId, reason: "asked", context: CommandContext())
            case 6: // erased, then events that still arrive (a link replayed after erasure reads as erased)
                _ = try await accounts.execute(userId, CommandContext()) { _ in ([.userErased(.init(reason: "test"))], ()) }
                _ = try? await accounts.execute(userId, CommandContext()) { _ in
                    ([.identityLinked(.init(provider: "google", uid: ExternalIdentity.erasedUID, emailVerified: false, personal: PersonalData()))], ())
                }
            default:
                break
            }
        }
        let types = Set(try await owner.query("SELECT DISTINCT type FROM events WHERE stream LIKE 'user-%'").map { try $0.decode("type", as: String.self) })
        #expect(Self.everyType.subtracting(types).isEmpty, "the log lacks \(Self.everyType.subtracting(types).sorted())")
        let live = try await rows(owner)
        #expect(live.count > 300)

        for bulkLoad in [true, false] {
            let replay = ProjectionReplay(projection: .accounts, database: owner, configuration: .init(batchSize: 97, bulkLoad: bulkLoad))
            let verified = try await replay.run(.verify)
            #expect(verified.drift == [], "bulkLoad \(bulkLoad): \(verified.drift.prefix(3))")
            let replaced = try await replay.run(.replace)
            if bulkLoad {
                #expect(replaced.bulkEvents > 0, "the log went in bulk (what other tests' transactions held back, event by event)")
            } else {
                #expect(replaced.bulkEvents == 0)
            }
            #expect(try await rows(owner) == live, "bulkLoad \(bulkLoad)")
        }
    }

    @Test func aBulkRunLoadsTheLogBeforeItAndCatchesUpWithWhatCameDuringIt() async throws {
        let database = try await TestDatabase.make()
        let service = database.client(maxConnections: 8)
        let owner = database.client(asServiceRole: false, maxConnections: 4)
        defer { service.shutdown(); owner.shutdown() }
        let accounts = AccountService(database: service, emailPolicy: .allowDuplicateEmails)
        func session() -> NewSession { NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: ["apple"]) }
        for user in 0..<200 {
            _ = try await accounts.signIn(ExternalIdentity(provider: "apple", uid: "before-\(user)"), session: session(), context: CommandContext())
        }
        let before: Int = try await owner.query("SELECT count(*) AS n FROM events WHERE stream LIKE 'user-%'")[0].decode("n")
        // A transaction with an id, still open, holds the bulk phase's horizon below every command after it.
        let holder = database.client(maxConnections: 1)
        defer { holder.shutdown() }
        let started = AsyncStream<Void>.makeStream()
        async let held: Void = holder.withConnection { connection in
            try await connection.execute(simple: "BEGIN")
            try await connection.query("SELECT pg_current_xact_id()")
            started.continuation.yield()
            try await Task.sleep(for: .milliseconds(600))
            try await connection.execute(simple: "COMMIT")
        }
        for await _ in started.stream { break }
        for user in 0..<50 {
            _ = try await accounts.signIn(ExternalIdentity(provider: "apple", uid: "during-\(user)"), session: session(), context: CommandContext())
        }
        let outcome = try await ProjectionReplay(
            projection: .accounts, database: owner, configuration: .init(horizonWait: .milliseconds(100))).run(.replace)
        try await held
        #expect(outcome.bulkEvents == before, "the bulk phase stops at the oldest transaction running when it starts")
        #expect(outcome.bulkEvents > 0)
        #expect(outcome.events > outcome.bulkEvents, "events behind the horizon were caught up event by event")
        #expect(try await ProjectionReplay(projection: .accounts, database: owner).run(.verify).drift == [])
        let users: Int = try await owner.query("SELECT count(*) AS n FROM users")[0].decode("n")
        #expect(users == 250)
    }

    @Test func aBulkRowsWithoutEveryColumnIsRefusedAndLeavesTheLiveTablesAlone() async throws {
        let database = try await TestDatabase.make()
        let service = database.client(maxConnections: 2)
        let owner = database.client(asServiceRole: false, maxConnections: 4)
        defer { service.shutdown(); owner.shutdown() }
        let accounts = AccountService(database: service, emailPolicy: .allowDuplicateEmails)
        _ = try await accounts.signIn(
            ExternalIdentity(provider: "apple", uid: "one"), session: NewSession(id: UUID(), refreshTokenHash: "h", amr: []), context: CommandContext())
        var projection = Projection.accounts
        var columns = try #require(Projection.accounts.bulkRows).columns
        columns["users"]?.removeLast()
        projection.bulkRows?.columns = columns
        let live = try await rows(owner)
        await #expect { try await ProjectionReplay(projection: projection, database: owner).run(.replace) } throws: { error in
            "\(error)".contains("the bulk rows of users are") && "\(error)".contains("must write every column")
        }
        #expect(try await rows(owner) == live)
        let shadows: Int = try await owner.query("SELECT count(*) AS n FROM pg_namespace WHERE nspname = 'tether_replay'")[0].decode("n")
        #expect(shadows == 0, "the copies were dropped")
    }
}
