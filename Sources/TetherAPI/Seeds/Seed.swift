import TetherCore
import Foundation
import TetherHTTP
import TetherProviders

/// One sample user of `seeds/`: a short story of account commands, as a client and an admin would send them.
///
/// A seed file (`seeds/ada.json`) holds `{"about": "…", "steps": [step, …]}`;
/// the seed's ``name`` is the file name without `.json`. Each step names a
/// `command` and what it needs:
///
/// | command | members | does |
/// |---|---|---|
/// | `sign-in` | `provider` and its credential (below) | sign in (the first time: sign up) and open a session |
/// | `sign-up` | `email`, `password`, `displayName`? | create a password user and open a session |
/// | `link` | `provider` and its credential | link another provider to the user |
/// | `unlink` | `provider` | remove a provider |
/// | `refresh` | — | rotate the refresh token of the session opened last |
/// | `sign-out` | — | end the session opened last |
/// | `revoke-sessions` | — | end every session |
/// | `disable`, `enable` | `reason`? | an admin disables or enables the user |
///
/// Credentials are minted by the dev identity provider from the same members its
/// routes take: `token` is the body of `POST /dev-idp/{apple,google}/token` or of
/// `POST /dev-idp/facebook/limited-token` (`sub`, `email`, `emailVerified`, `name`, …);
/// `accessToken` is the body of `POST /dev-idp/facebook/access-token` (`userId`,
/// `email`, `name`) for a classic Facebook token; Apple takes `fullName`
/// (`{"givenName", "familyName"}`) as the app would send it; `password` signs in
/// with `email` and `password`.
public struct Seed: Sendable {
    /// The file name without `.json`; command ids derive from it and the step's index.
    public var name: String
    /// One line on who the user is.
    public var about: String?
    /// The commands, in order; the first one creates the user.
    public var steps: [Step]

    /// One command of a seed.
    public struct Step: Sendable, Decodable {
        /// What a step does.
        public enum Command: String, Sendable, Decodable, CaseIterable {
            case signIn = "sign-in"
            case signUp = "sign-up"
            case link
            case unlink
            case refresh
            case signOut = "sign-out"
            case revokeSessions = "revoke-sessions"
            case disable
            case enable
        }

        public var command: Command
        /// `apple`, `facebook`, `google` or `password`.
        public var provider: String?
        /// Claims of an ID token the dev identity provider mints (Apple, Google, Facebook Limited Login).
        public var token: JSONValue?
        /// What the fake Graph API says about a classic Facebook access token.
        public var accessToken: JSONValue?
        /// Apple's `fullName` credential member.
        public var fullName: JSONValue?
        public var email: String?
        public var password: String?
        public var displayName: String?
        /// Why an admin disables or enables the user.
        public var reason: String?

        enum CodingKeys: String, CodingKey {
            case command, provider, token, accessToken, fullName, email, password, displayName, reason
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let text = try container.decode(String.self, forKey: .command)
            guard let command = Command(rawValue: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .command, in: container,
                    debugDescription: "unknown command \"\(text)\" (one of \(Command.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            self.command = command
            provider = try container.decodeIfPresent(String.self, forKey: .provider)
            token = try container.decodeIfPresent(JSONValue.self, forKey: .token)
            accessToken = try container.decodeIfPresent(JSONValue.self, forKey: .accessToken)
            fullName = try container.decodeIfPresent(JSONValue.self, forKey: .fullName)
            email = try container.decodeIfPresent(String.self, forKey: .email)
            password = try container.decodeIfPresent(String.self, forKey: .password)
            displayName = try container.decodeIfPresent(String.self, forKey: .displayName)
            reason = try container.decodeIfPresent(String.self, forKey: .reason)
        }

        /// `link facebook`, `sign-out`: how errors name the step.
        public var summary: String {
            provider.map { "\(command.rawValue) \($0)" } ?? command.rawValue
        }
    }

    /// A seed from its parts.
    public init(name: String, about: String? = nil, steps: [Step]) {
        self.name = name
        self.about = about
        self.steps = steps
    }

    /// Reads and checks the seed file at `file`.
    ///
    /// - Throws: ``SeedError`` naming the file (and the member or step) when it cannot be read or is not a valid story.
    public init(contentsOf file: URL) throws(SeedError) {
        let name = file.deletingPathExtension().lastPathComponent
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw SeedError(seed: name, "cannot read \(file.path)")
        }
        struct Document: Decodable {
            var about: String?
            var steps: [Step]
        }
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: data)
        } catch let error as DecodingError {
            let problem = Problem(decodingError: error)
            let pointer = problem.extensions["pointer"].flatMap { if case .string(let text) = $0 { text } else { nil } }
            throw SeedError(seed: name, (problem.detail ?? "invalid").replacingOccurrences(of: "The request body", with: "The file")
                + (pointer.map { " (at \($0))" } ?? ""))
        } catch {
            throw SeedError(seed: name, "not JSON")
        }
        self.init(name: name, about: document.about, steps: document.steps)
        try validate()
    }

    /// Every `*.json` seed of `directory`, in file-name order.
    public static func all(in directory: URL) throws(SeedError) -> [Seed] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw SeedError(seed: directory.path, "cannot list the seed directory")
        }
        var seeds: [Seed] = []
        for name in names.sorted() where name.hasSuffix(".json") {
            seeds.append(try Seed(contentsOf: directory.appendingPathComponent(name)))
        }
        return seeds
    }

    /// The `seeds/` directory beside the migrations' `schema/` directory (both sit at the top of a checkout).
    public static func directory(besideSchema schemaDirectory: URL) -> URL {
        schemaDirectory.standardizedFileURL.deletingLastPathComponent().appendingPathComponent("seeds")
    }

    /// Checks the story's shape before anything is written: every step has what it needs, in an order that can run.
    public func validate() throws(SeedError) {
        guard let first = steps.first else { throw SeedError(seed: name, "a seed needs at least one step") }
        guard first.command == .signIn || first.command == .signUp else {
            throw SeedError(seed: name, step: 0, first.summary, "the first step must be sign-in or sign-up: it creates the user")
        }
        var hasSession = false
        for (index, step) in steps.enumerated() {
            func fail(_ message: String) -> SeedError { SeedError(seed: name, step: index, step.summary, message) }
            switch step.command {
            case .signIn, .link:
                guard let provider = step.provider.flatMap(ProviderName.init(rawValue:)) else {
                    throw fail("provider must be apple, facebook, google, password or anonymous")
                }
                try Self.checkCredential(of: step, provider: provider, fail)
                hasSession = hasSession || step.command == .signIn
            case .signUp:
                guard step.email != nil, step.password != nil else { throw fail("sign-up needs email and password") }
                hasSession = true
            case .unlink:
                guard step.provider.flatMap(ProviderName.init(rawValue:)) != nil else {
                    throw fail("provider must be apple, facebook, google, password or anonymous")
                }
            case .refresh, .signOut:
                guard hasSession else { throw fail("no session is open at this step (sign in first)") }
                hasSession = step.command == .refresh
            case .revokeSessions, .disable:
                hasSession = false
            case .enable:
                break
            }
        }
    }

    private static func checkCredential(of step: Step, provider: ProviderName, _ fail: (String) -> SeedError) throws(SeedError) {
        switch provider {
        case .password:
            guard step.command == .signIn else { throw fail("a password is added by sign-up, not linked") }
            guard step.email != nil, step.password != nil else { throw fail("a password sign-in needs email and password") }
        case .facebook:
            guard (step.token == nil) != (step.accessToken == nil) else {
                throw fail("a Facebook step needs either token (Limited Login) or accessToken (classic)")
            }
        case .apple, .google:
            guard step.token != nil, step.accessToken == nil else { throw fail("\(provider.rawValue) needs token (the claims to mint)") }
        case .custom:
            throw fail("custom tokens are not seeded")
        case .anonymous:
            guard step.command == .signIn else { throw fail("an anonymous user is made by sign-in, not linked") }
            guard step.token == nil, step.accessToken == nil else { throw fail("an anonymous sign-in takes no token") }
        }
        for (member, value) in [("token", step.token), ("accessToken", step.accessToken)] {
            guard let value else { continue }
            guard case .object = value else { throw fail("\(member) must be an object") }
        }
    }
}
