import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders

/// Loads ``Seed`` stories through the same path a client's requests take, so a seeded user's history looks like a real one.
///
/// Each step mints a real token with the in-process dev identity provider,
/// verifies it with the configured identity providers, and runs the
/// ``AccountService`` command a `/v1` route would, recorded with surface `cli`
/// and actor `system:seeds`. Command ids derive from the seed's name and the
/// step's index, and a step whose command is already in the log is skipped, so
/// loading again (every `tether dev` start) changes nothing, and an interrupted
/// load resumes where it stopped. Session ids and the seeded sessions' refresh
/// tokens derive from the step too, which is what lets a resumed load refresh or
/// end a session opened by an earlier run; seeds exist only under `tether dev`.
public struct SeedLoader: Sendable {
    /// What one seed did.
    public struct Outcome: Sendable, Hashable {
        /// The seed's name.
        public var seed: String
        /// The user its story is about.
        public var userId: UUID
        /// Steps run now.
        public var applied: Int
        /// Steps found in the log already.
        public var skipped: Int
    }

    /// The command layer the `/v1` routes call too: seeds get its limits, verification and second-factor branch.
    public let commands: AccountCommands
    public var accounts: AccountService { commands.accounts }
    public let devIdP: DevIdentityProvider

    /// A loader running commands through `commands`.
    public init(commands: AccountCommands, devIdP: DevIdentityProvider) {
        self.commands = commands
        self.devIdP = devIdP
    }

    /// A loader on `service`'s command layer.
    public init(service: TetherService, devIdP: DevIdentityProvider) {
        self.init(commands: service.commands, devIdP: devIdP)
    }

    /// Reads every seed of `directory`, checks them all, then loads them in file-name order.
    public func load(directory: URL) async throws(SeedError) -> [Outcome] {
        try await load(try Seed.all(in: directory))
    }

    /// Checks every seed, then loads them in order; the first failing step stops the load.
    public func load(_ seeds: [Seed]) async throws(SeedError) -> [Outcome] {
        for seed in seeds { try seed.validate() }
        var outcomes: [Outcome] = []
        for seed in seeds {
            outcomes.append(try await load(seed))
        }
        return outcomes
    }

    /// What the story knows between steps.
    private struct Story {
        var userId: UUID?
        /// The session opened last, with its current refresh token.
        var session: (id: UUID, refreshToken: String)?
    }

    private func load(_ seed: Seed) async throws(SeedError) -> Outcome {
        var story = Story()
        var applied = 0, skipped = 0
        for (index, step) in seed.steps.enumerated() {
            let ids = StepIDs(seed: seed.name, index: index)
            do {
                if let recordedUser = try await userOfRecordedCommand(ids.command) {
                    skipped += 1
                    Self.advance(&story, after: step, ids, userId: recordedUser)
                } else {
                    let userId = try await run(step, ids, story: story)
                    applied += 1
                    Self.advance(&story, after: step, ids, userId: userId)
                }
            } catch let error as SeedError {
                throw error
            } catch {
                throw SeedError(seed: seed.name, step: index, step.summary, Self.describe(error))
            }
        }
        // validate() guarantees a first step that creates the user.
        return Outcome(seed: seed.name, userId: story.userId!, applied: applied, skipped: skipped)
    }

    /// Runs one step's command; answers the user it acted on.
    private func run(_ step: Seed.Step, _ ids: StepIDs, story: Story) async throws -> UUID {
        let context = CommandContext(
            commandId: ids.command,
            metadata: EventMetadata(correlationId: ids.correlation, actor: .system("seeds"), surface: "cli"))
        let method = step.command == .signUp ? ProviderName.password.rawValue : step.provider ?? ProviderName.password.rawValue
        let session = NewSession(
            id: ids.session, refreshTokenHash: RefreshTokens.hash(ids.refreshToken), amr: AccountCommands.authenticationMethods(provider: method))
        switch step.command {
        case .signIn:
            let command = SignInCommand(credential: try credential(step), session: session, context: context)
            let userId: UUID = switch try await commands.signIn(command) {
            case .signedIn(let account, _): account.id
            case .secondFactorRequired(let userId, _, _): userId
            case .needsConfirmation(let email, let methods, _):
                throw SeedError(seed: ids.seed, step: ids.index, step.summary,
                                "\(email) belongs to an account that signs in with \(methods.joined(separator: ", ")); link this credential to it")
            }
            if let storyUser = story.userId, storyUser != userId {
                throw SeedError(seed: ids.seed, step: ids.index, step.summary, "signed in another user than the story's first step made")
            }
            return userId
        case .signUp:
            return try await commands.signUp(SignUpCommand(
                email: step.email!, password: step.password!, displayName: step.displayName, session: session, context: context)).id
        default:
            break
        }
        // Every other command acts on the user the first step made.
        let userId = story.userId!
        switch step.command {
        case .link:
            _ = try await commands.link(LinkCommand(credential: try credential(step), userId: userId, context: context))
        case .unlink:
            try await accounts.unlink(provider: step.provider!, from: userId, context: context)
        case .refresh:
            let current = story.session!
            _ = try await accounts.refresh(
                presentedHash: RefreshTokens.hash(current.refreshToken), newHash: RefreshTokens.hash(ids.refreshToken),
                presentedJKT: nil, context: context)
        case .signOut:
            try await accounts.signOut(userId: userId, sessionId: story.session!.id, context: context)
        case .revokeSessions:
            try await accounts.revokeAllSessions(userId: userId, context: context)
        case .disable, .enable:
            try await accounts.setDisabled(step.command == .disable, userId: userId, reason: step.reason, context: context)
        case .signIn, .signUp:
            break
        }
        return userId
    }

    /// What a step leaves behind for the next ones, whether it ran now or in an earlier load.
    private static func advance(_ story: inout Story, after step: Seed.Step, _ ids: StepIDs, userId: UUID) {
        story.userId = story.userId ?? userId
        switch step.command {
        case .signIn, .signUp:
            story.session = (ids.session, ids.refreshToken)
        case .refresh:
            story.session?.refreshToken = ids.refreshToken
        case .signOut, .revokeSessions, .disable:
            story.session = nil
        case .link, .unlink, .enable:
            break
        }
    }

    /// The credential a client would send for the step, with a token freshly minted by the dev identity provider.
    private func credential(_ step: Seed.Step) throws -> ProviderCredential {
        let provider = step.provider!
        var credential: [String: JSONValue] = [:]
        if let request = step.accessToken {
            credential["accessToken"] = .string(try devIdP.mintFacebookAccessToken(request: request))
        } else if let token = step.token, case .object(var claims) = token, let name = ProviderName(rawValue: provider) {
            // A fresh nonce each time, as an app makes one per sign-in; the verifier checks and consumes it.
            var rawNonce = Base64URL.encode(SecureRandom.bytes(count: 16))
            if case .string(let given)? = claims["rawNonce"] { rawNonce = given }
            claims["rawNonce"] = .string(rawNonce)
            let member = switch name {
            case .apple: "identityToken"
            case .facebook: "authenticationToken"
            default: "idToken"
            }
            credential[member] = .string(try devIdP.mintIDToken(name, request: .object(claims)))
            credential["rawNonce"] = .string(rawNonce)
            credential["fullName"] = step.fullName
        } else {
            credential["email"] = step.email.map(JSONValue.string)
            credential["password"] = step.password.map(JSONValue.string)
        }
        return try ProviderCredential(provider: provider, credential: .object(credential))
    }

    /// The user of the first event `command` appended, if that command is in the log.
    private func userOfRecordedCommand(_ command: UUID) async throws -> UUID? {
        try await accounts.database.query("""
            SELECT user_id FROM events WHERE event_id = \(AccountEventCodec.eventID(command: command, index: 0))
            """).first?.decode("user_id")
    }

    /// The error as one line that starts with its stable code when it has one (`credential_already_in_use: …`).
    private static func describe(_ error: any Error) -> String {
        let text = String(describing: error)
        guard let code = (error as? any ProblemConvertible)?.problem.code, !text.contains(code) else { return text }
        return "\(code): \(text)"
    }
}

/// The ids one step's command uses, derived from the seed's name and the step's index.
struct StepIDs {
    let seed: String
    let index: Int

    /// The command id: event ids derive from it.
    var command: UUID { Self.derive(seed, String(index), "command") }
    /// Groups every command of one seed.
    var correlation: UUID { Self.derive(seed, "correlation") }
    /// The session a sign-in or sign-up step opens.
    var session: UUID { Self.derive(seed, String(index), "session") }
    /// The refresh token the step hands out (sign-in, sign-up, refresh).
    var refreshToken: String {
        RefreshTokens.prefix + Base64URL.encode(Self.digest([seed, String(index), "refresh-token"]))
    }

    /// A version-8 UUID from SHA-256 of the parts.
    static func derive(_ parts: String...) -> UUID {
        var bytes = digest(parts)
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    private static func digest(_ parts: [String]) -> [UInt8] {
        DigestAlgorithm.sha256.hash(Array((["tether-seeds"] + parts).joined(separator: "\u{0}").utf8))
    }
}
