import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres
import TetherProviders

/// Everything the server reads from `TETHER_*` variables (or a `--config` JSON file).
///
/// A value that cannot be used stops start-up with one line naming the variable.
public struct TetherConfiguration: Sendable {
    /// Which accounts may share an email address.
    /// The email policy is a domain rule: it lives in TetherCore.
    public typealias EmailPolicy = TetherCore.EmailPolicy

    /// An address and port to listen on.
    public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Parses `host:port`, `[v6]:port` or `:port` (all addresses); the host is `localhost` or an IPv4 or IPv6
        /// address, as the server listens on (a name it would have to resolve, or `127.0.0.1@evil.example`, is none).
        public init?(parsing text: String) {
            let host: Substring
            let portText: Substring
            if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
                host = text[text.index(after: text.startIndex)..<close]
                let rest = text[text.index(after: close)...]
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            } else {
                guard let colon = text.lastIndex(of: ":") else { return nil }
                host = text[..<colon]
                portText = text[text.index(after: colon)...]
            }
            guard let port = Int(portText), (0...65535).contains(port) else { return nil }
            self.host = host.isEmpty ? "0.0.0.0" : String(host)
            self.port = port
            guard HTTPServer.Configuration.canListen(on: self.host) else { return nil }
        }

        /// True for 127.0.0.0/8, ::1 and localhost.
        public var isLoopback: Bool {
            host == "localhost" || host == "::1" || host.hasPrefix("127.")
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// A configuration problem, naming the variable.
    public typealias Invalid = ConfigurationError

    /// `TETHER_DATABASE_URL`; nil means `tether dev` starts its own PostgreSQL.
    public var databaseURL: String?
    /// `TETHER_LISTEN`.
    public var listen: ListenAddress
    /// `TETHER_EMAIL_POLICY`.
    public var emailPolicy: EmailPolicy
    /// `TETHER_PARSE_APP_ID`; nil turns the Parse surface off.
    public var parseAppID: String?
    /// `TETHER_PARSE_CLIENT_KEY`: when set, `X-Parse-Client-Key` or `X-Parse-REST-API-Key` must match it.
    public var parseClientKey: String?
    /// `TETHER_PUBLIC_URL`: the base of links Tether hands out (Parse `Location` headers) and of a URL a
    /// DPoP proof may name beside the request's `Host`; nil takes the request's own `Host`.
    public var publicURL: URL?
    /// `TETHER_FIREBASE_PROJECT_ID`; nil turns the Firebase surface off.
    public var firebaseProjectID: String?
    /// `TETHER_SMS_WEBHOOK_URL`.
    public var smsWebhookURL: URL?
    /// `TETHER_SMS_WEBHOOK_SECRET`: signs every webhook request; set exactly when the URL is.
    public var smsWebhookSecret: String?
    /// `TETHER_MAIL_WEBHOOK_URL`: where mails with codes are POSTed; nil turns the email flows off
    /// (unless a dev outbox takes the mails).
    public var mailWebhookURL: URL?
    /// `TETHER_MAIL_WEBHOOK_SECRET`: signs every mail webhook request; set exactly when the URL is.
    public var mailWebhookSecret: String?
    /// `TETHER_PASSWORD_RESET_CODE_TTL`: how long a password reset code lasts.
    public var passwordResetCodeLifetime: TimeInterval
    /// `TETHER_EMAIL_VERIFICATION_CODE_TTL`: how long a verification or email-change code lasts.
    public var emailVerificationCodeLifetime: TimeInterval
    /// `TETHER_PROVIDER_REVALIDATE_INTERVAL`: how often a session's provider grant is checked on refresh.
    public var providerRevalidateInterval: TimeInterval
    /// `TETHER_WEBHOOK_ALLOW_HTTP`: webhook targets may be plain `http`.
    public var webhookAllowsHTTP: Bool
    /// `TETHER_WEBHOOK_ALLOWED_HOSTS`: hosts webhooks may reach although they resolve to private addresses.
    public var webhookAllowedHosts: Set<String>
    /// `TETHER_MASTER_KEY_FILE`: the key that wraps the personal-data keys stored in the database.
    public var masterKey: MasterKey?
    /// The further files of `TETHER_MASTER_KEY_FILE`: they still unwrap (a rotation in progress).
    public var olderMasterKeys: [MasterKey]
    /// `TETHER_LOG_LEVEL`.
    public var logLevel: Logger.Level
    /// `TETHER_SIGN_IN_FAILURE_LIMIT`: failed sign-ins a minute per client address and per password account.
    public var signInFailureLimit: Int
    /// `TETHER_TRUSTED_PROXIES`: addresses of reverse proxies whose `X-Forwarded-For` names the client.
    public var trustedProxies: [IPAddressRange]
    /// `TETHER_MAX_CONNECTIONS`: connections open at once; more are closed on accept.
    public var maxConnections: Int
    /// `TETHER_MAX_CONNECTIONS_PER_ADDRESS`: connections open at once from one peer address; 0 for none
    /// (the default behind `TETHER_TRUSTED_PROXIES`, whose connections all come from the proxy).
    public var maxConnectionsPerAddress: Int
    /// `TETHER_IDLE_TIMEOUT`: how long a connection may stay silent, mid-request or between requests.
    public var idleTimeout: TimeInterval
    /// `TETHER_HEADER_TIMEOUT`: how long a request's head may take to arrive, however its bytes trickle in.
    public var headerTimeout: TimeInterval
    /// `TETHER_BODY_TIMEOUT`: how long a request's body may take to arrive once its head has.
    public var bodyTimeout: TimeInterval
    /// `TETHER_DATABASE_READ_URL`: a standby for support reads and the event feed; nil sends every read to the primary.
    public var databaseReadURL: String?
    /// `TETHER_DATABASE_STATEMENT_TIMEOUT`: the server pool's `statement_timeout`, below the 30 s request deadline.
    public var databaseStatementTimeout: TimeInterval
    /// `TETHER_STATE_CACHE_MB`: about the most memory, in MB, users' states kept between commands take.
    public var stateCacheMegabytes: Int
    /// `TETHER_SCHEMA_DIR`: where the numbered migrations are (found automatically when unset).
    public var schemaDirectory: String?
    /// Every `TETHER_*` value, for the layers that read their own (identity providers).
    public var values: [String: String]

    /// The variables this build understands, with their meaning, for `--help` and validation.
    public static let variables: [(name: String, defaultValue: String, meaning: String)] = [
        ("TETHER_DATABASE_URL", "none: tether dev starts its own PostgreSQL", "libpq connection string"),
        ("TETHER_LISTEN", "127.0.0.1:8080", "address:port of the HTTP server: localhost or an IPv4 or IPv6 address ([::1]:8080), or :port for all"),
        ("TETHER_EMAIL_POLICY", "one-account-per-email", "or allow-duplicate-emails"),
        ("TETHER_APPLE_CLIENT_IDS", "none (Apple disabled)", "comma list of bundle ids / Services ids accepted as aud"),
        ("TETHER_APPLE_JWKS_URL", "https://appleid.apple.com/auth/keys", ""),
        ("TETHER_APPLE_ISSUER", "https://appleid.apple.com", ""),
        ("TETHER_APPLE_TEAM_ID", "none (authorization codes not redeemed)",
         "the Apple team of the Sign in with Apple key that signs Tether's client secret (with the two below)"),
        ("TETHER_APPLE_KEY_ID", "none", "the key's id (the kid of the client secret)"),
        ("TETHER_APPLE_PRIVATE_KEY_FILE", "none", "the team's .p8 key file (PKCS#8 PEM, P-256)"),
        ("TETHER_APPLE_TOKEN_URL", "https://appleid.apple.com/auth/token", "where authorization codes are redeemed and refresh tokens validated"),
        ("TETHER_APPLE_REVOKE_URL", "https://appleid.apple.com/auth/revoke", "where tokens are revoked when an identity goes or a user is erased"),
        ("TETHER_PROVIDER_REVALIDATE_INTERVAL", "24h",
         "how often a refresh checks that the Apple or Facebook grant behind its session still stands (a span: 12h, 1d)"),
        ("TETHER_FACEBOOK_APP_IDS", "none (Facebook disabled)", "comma list"),
        ("TETHER_FACEBOOK_APP_SECRET", "none", "for appsecret_proof and debug_token (without it, Limited Login tokens only)"),
        ("TETHER_FACEBOOK_GRAPH_URL", "https://graph.facebook.com/v21.0", ""),
        ("TETHER_FACEBOOK_LIMITED_JWKS_URL", "https://limited.facebook.com/.well-known/oauth/openid/jwks/", ""),
        ("TETHER_FACEBOOK_LIMITED_ISSUER", "https://www.facebook.com", ""),
        ("TETHER_GOOGLE_CLIENT_IDS", "none (Google disabled)", "comma list"),
        ("TETHER_GOOGLE_JWKS_URL", "https://www.googleapis.com/oauth2/v3/certs", ""),
        ("TETHER_GOOGLE_ISSUER", "https://accounts.google.com", ""),
        ("TETHER_PARSE_APP_ID", "none (Parse surface off)", "value of X-Parse-Application-Id; turns on the Parse surface at /parse"),
        ("TETHER_PARSE_CLIENT_KEY", "none (not checked)", "when set, X-Parse-Client-Key / X-Parse-REST-API-Key must match"),
        ("TETHER_PUBLIC_URL", "none (tether dev: the request's Host)",
         "base URL of links Tether hands out (no credentials, query, fragment or dot segments): mails' links, Parse Location headers; a URL DPoP proofs may name; required with TETHER_MAIL_WEBHOOK_URL"),
        ("TETHER_ANONYMOUS_USERS", "on", "off refuses the anonymous provider on every surface"),
        ("TETHER_FIREBASE_PROJECT_ID", "none (Firebase surface off)", "project id in paths and token aud: lower-case letters, digits, hyphens"),
        ("TETHER_SMS_WEBHOOK_URL", "none", "where SMS codes are POSTed in production: https (http only to loopback, or with TETHER_WEBHOOK_ALLOW_HTTP=1)"),
        ("TETHER_SMS_WEBHOOK_SECRET", "none (required with TETHER_SMS_WEBHOOK_URL)",
         "HMAC-SHA256 key of the X-Tether-Signature header, at least 16 characters"),
        ("TETHER_MAIL_WEBHOOK_URL", "none (email flows off; tether dev: the outbox at /dev-idp/mail)",
         "where mails with codes and links (password reset, verification, email change) are POSTed: https (http only to loopback, or with TETHER_WEBHOOK_ALLOW_HTTP=1)"),
        ("TETHER_MAIL_WEBHOOK_SECRET", "none (required with TETHER_MAIL_WEBHOOK_URL)",
         "HMAC-SHA256 key of the mail webhook's X-Tether-Signature header, at least 16 characters"),
        ("TETHER_PASSWORD_RESET_CODE_TTL", "1h", "how long a password reset code lasts (a span: 30m, 1h)"),
        ("TETHER_EMAIL_VERIFICATION_CODE_TTL", "3d", "how long an email verification or email change code lasts"),
        ("TETHER_WEBHOOK_ALLOW_HTTP", "0", "1 lets webhook targets, and the SMS and mail webhooks, be plain http (https only otherwise; tether dev allows http to event webhooks)"),
        ("TETHER_WEBHOOK_ALLOWED_HOSTS", "none", "comma list of hosts webhooks may reach although they resolve to private or local addresses"),
        ("TETHER_MASTER_KEY_FILE", "none (tether dev makes and uses .tether/master.key)",
         "file of the key (32 bytes, base64) that wraps every user's personal-data key; tether serve needs it. A comma list during a rotation: the first wraps, all unwrap"),
        ("TETHER_LOG_LEVEL", "info", "debug, info, warn, error"),
        ("TETHER_SIGN_IN_FAILURE_LIMIT", "10", "failed sign-ins a minute per client address and per password account (and sign-ups a minute per address) before 429"),
        ("TETHER_TRUSTED_PROXIES", "none", "comma list of reverse-proxy addresses or CIDR ranges (a range by its first address) whose X-Forwarded-For names the client"),
        ("TETHER_MAX_CONNECTIONS", "1000", "connections open at once; past it, new ones wait in the listen queue until there is room"),
        ("TETHER_MAX_CONNECTIONS_PER_ADDRESS", "64 (0, no limit, when TETHER_TRUSTED_PROXIES is set)",
         "connections open at once from one peer address, so idle or slow clients cannot take every place"),
        ("TETHER_DATABASE_READ_URL", "none (every read on the primary)",
         "a standby (streaming replica) that answers admin search, user detail, history and the event feed; commands and users' own reads stay on the primary"),
        ("TETHER_DATABASE_STATEMENT_TIMEOUT", "20s",
         "statement_timeout of the server's database connections: a statement stuck behind a lock is cancelled and rolled back, and the request answered 503, within the 30 s deadline"),
        ("TETHER_IDLE_TIMEOUT", "60s", "how long a connection may stay silent, mid-request or between requests, before it is closed"),
        ("TETHER_HEADER_TIMEOUT", "10s",
         "how long a request's line and headers may take to arrive, however slowly they trickle in: from the connection's opening, or for a later request from the previous answer plus TETHER_IDLE_TIMEOUT; the connection is closed then"),
        ("TETHER_BODY_TIMEOUT", "30s", "how long a request's body may take to arrive once its headers have; the connection is closed then"),
        ("TETHER_STATE_CACHE_MB", "256",
         "about the most memory users' states kept between commands take; past it, the least recently used go (a command on such a user reads their snapshot, when they have one, and the events after it)"),
        ("TETHER_SCHEMA_DIR", "the schema/ directory of the checkout", "where the numbered SQL migrations are"),
    ]

    /// Reads the configuration: values of the JSON file at `configFile` (if any), overridden by
    /// the environment's `TETHER_*` variables.
    public static func load(
        environment: [String: String] = ProcessInfo.processInfo.environment, configFile: String? = nil
    ) throws(Invalid) -> TetherConfiguration {
        var values: [String: String] = [:]
        if let configFile {
            values = try fileValues(configFile)
        }
        // An empty variable overrides the file too, and counts as not set: a secret injected empty must not fall
        // back to a file's, nor be read as no secret at all (the checks that refuse an empty one see it).
        for (key, value) in environment where key.hasPrefix("TETHER_") {
            values[key] = value
        }
        return try TetherConfiguration(values: values)
    }

    /// Validates `values` (variable name → text).
    public init(values: [String: String]) throws(Invalid) {
        func value(_ name: String) -> String? {
            guard let text = values[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
            return text
        }
        self.values = values
        func connectionString(_ name: String) throws(Invalid) -> String? {
            guard let url = value(name) else { return nil }
            guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") || url.contains("=") else {
                throw Invalid(name, "expected a postgresql:// URL or a key=value connection string")
            }
            if let problem = PostgresConnection.connectionStringProblem(url) { throw Invalid(name, problem) }
            return url
        }
        databaseURL = try connectionString("TETHER_DATABASE_URL")
        databaseReadURL = try connectionString("TETHER_DATABASE_READ_URL")
        let listenText = value("TETHER_LISTEN") ?? "127.0.0.1:8080"
        guard let listen = ListenAddress(parsing: listenText) else {
            throw Invalid("TETHER_LISTEN", "expected address:port, the address localhost or an IPv4 or IPv6 one (like 127.0.0.1:8080 or [::1]:8080), got \"\(listenText)\"")
        }
        self.listen = listen
        let policyText = value("TETHER_EMAIL_POLICY") ?? EmailPolicy.oneAccountPerEmail.rawValue
        guard let policy = EmailPolicy(rawValue: policyText) else {
            throw Invalid("TETHER_EMAIL_POLICY", "expected one-account-per-email or allow-duplicate-emails, got \"\(policyText)\"")
        }
        emailPolicy = policy
        let levelText = value("TETHER_LOG_LEVEL") ?? "info"
        guard let level = Logger.Level(name: levelText) else {
            throw Invalid("TETHER_LOG_LEVEL", "expected debug, info, warn or error, got \"\(levelText)\"")
        }
        logLevel = level
        let limitText = value("TETHER_SIGN_IN_FAILURE_LIMIT") ?? "10"
        guard let limit = Int(limitText), (1...100_000).contains(limit) else {
            throw Invalid("TETHER_SIGN_IN_FAILURE_LIMIT", "expected a whole number from 1 to 100000, got \"\(limitText)\"")
        }
        signInFailureLimit = limit
        var proxies: [IPAddressRange] = []
        for entry in (value("TETHER_TRUSTED_PROXIES") ?? "").split(separator: ",") {
            let address = entry.trimmingCharacters(in: .whitespaces)
            guard !address.isEmpty else { continue }
            guard let range = IPAddressRange(address) else {
                throw Invalid("TETHER_TRUSTED_PROXIES", "expected a comma list of IP addresses or CIDR ranges (10.0.0.0/8), got \"\(address)\"")
            }
            // Trusting a whole range by a slip is trusting every address in it to name its clients: said explicitly.
            guard !range.hasHostBits else {
                throw Invalid("TETHER_TRUSTED_PROXIES", "\"\(address)\" names an address inside its range: write the range's first address, or the address alone")
            }
            proxies.append(range)
        }
        trustedProxies = proxies
        func count(_ name: String, _ defaultValue: Int, _ range: ClosedRange<Int>) throws(Invalid) -> Int {
            guard let text = value(name) else { return defaultValue }
            guard let number = Int(text), range.contains(number) else {
                throw Invalid(name, "expected a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(text)\"")
            }
            return number
        }
        maxConnections = try count("TETHER_MAX_CONNECTIONS", 1000, 1...100_000)
        maxConnectionsPerAddress = try count("TETHER_MAX_CONNECTIONS_PER_ADDRESS", proxies.isEmpty ? 64 : 0, 0...100_000)
        stateCacheMegabytes = try count("TETHER_STATE_CACHE_MB", AccountStateCache.defaultByteBudget >> 20, 1...1_048_576)
        parseAppID = value("TETHER_PARSE_APP_ID")
        parseClientKey = value("TETHER_PARSE_CLIENT_KEY")
        if let text = value("TETHER_PUBLIC_URL") {
            // Links start from it: no credentials, a real port, no `..` to be resolved differently by each reader.
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil,
                  url.query == nil, url.fragment == nil, url.user == nil, url.password == nil,
                  url.hasUsablePort, !url.path.split(separator: "/").contains(where: { $0 == ".." || $0 == "." })
            else {
                throw Invalid("TETHER_PUBLIC_URL", "expected an http(s) URL without credentials, query, fragment or dot segments, got \"\(text)\"")
            }
            publicURL = url
        } else {
            publicURL = nil
        }
        firebaseProjectID = value("TETHER_FIREBASE_PROJECT_ID")
        // A project id is a path segment and a token's audience: Google's form (lower-case letters, digits, hyphens).
        if let id = firebaseProjectID, !(1...63).contains(id.count) || !id.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }) {
            throw Invalid("TETHER_FIREBASE_PROJECT_ID", "expected 1 to 63 lower-case letters, digits and hyphens, got \"\(id)\"")
        }
        let allowsHTTP: Bool
        switch value("TETHER_WEBHOOK_ALLOW_HTTP")?.lowercased() ?? "0" {
        case "1", "true", "on": allowsHTTP = true
        case "0", "false", "off": allowsHTTP = false
        case let other: throw Invalid("TETHER_WEBHOOK_ALLOW_HTTP", "expected 1, true or on, or 0, false or off, got \"\(other)\"")
        }
        (smsWebhookURL, smsWebhookSecret) = try Self.webhook(
            url: "TETHER_SMS_WEBHOOK_URL", secret: "TETHER_SMS_WEBHOOK_SECRET", what: "SMS messages", allowsHTTP: allowsHTTP, value)
        (mailWebhookURL, mailWebhookSecret) = try Self.webhook(
            url: "TETHER_MAIL_WEBHOOK_URL", secret: "TETHER_MAIL_WEBHOOK_SECRET", what: "mails", allowsHTTP: allowsHTTP, value)
        if mailWebhookURL != nil, publicURL == nil {
            throw Invalid("TETHER_PUBLIC_URL", "required when TETHER_MAIL_WEBHOOK_URL is set: the links in mails start from it")
        }
        func lifetime(_ name: String, _ defaultValue: TimeInterval) throws(Invalid) -> TimeInterval {
            guard let text = value(name) else { return defaultValue }
            guard let span = HistorySince.seconds(inSpan: text), (1...(30 * 86400)).contains(span) else {
                throw Invalid(name, "expected a span from 1s to 30d (like 30m, 1h, 3d), got \"\(text)\"")
            }
            return span
        }
        webhookAllowsHTTP = allowsHTTP
        webhookAllowedHosts = Set((value("TETHER_WEBHOOK_ALLOWED_HOSTS") ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty })
        // A comma list: the first wraps, every one unwraps (during a rotation: the new file, then the old).
        var masterKeys: [MasterKey] = []
        for path in (value("TETHER_MASTER_KEY_FILE") ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) })
        where !path.isEmpty {
            do {
                masterKeys.append(try MasterKey(file: path))
            } catch {
                throw Invalid("TETHER_MASTER_KEY_FILE", "\((error as? CryptoError)?.detail ?? String(describing: error))")
            }
        }
        masterKey = masterKeys.first
        olderMasterKeys = Array(masterKeys.dropFirst())
        passwordResetCodeLifetime = try lifetime("TETHER_PASSWORD_RESET_CODE_TTL", UserAccount.defaultPasswordResetCodeLifetime)
        emailVerificationCodeLifetime = try lifetime("TETHER_EMAIL_VERIFICATION_CODE_TTL", UserAccount.defaultEmailVerificationCodeLifetime)
        providerRevalidateInterval = try lifetime("TETHER_PROVIDER_REVALIDATE_INTERVAL", 24 * 60 * 60)
        idleTimeout = try lifetime("TETHER_IDLE_TIMEOUT", 60)
        headerTimeout = try lifetime("TETHER_HEADER_TIMEOUT", 10)
        bodyTimeout = try lifetime("TETHER_BODY_TIMEOUT", 30)
        databaseStatementTimeout = try lifetime("TETHER_DATABASE_STATEMENT_TIMEOUT", 20)
        guard databaseStatementTimeout < 30 else {
            throw Invalid("TETHER_DATABASE_STATEMENT_TIMEOUT", "must be below the 30 s request deadline, got \(Int(databaseStatementTimeout)) s")
        }
        schemaDirectory = value("TETHER_SCHEMA_DIR")
        let known = Set(Self.variables.map(\.name))
        if let unknown = values.keys.sorted().first(where: { $0.hasPrefix("TETHER_") && !known.contains($0) && !$0.hasPrefix("TETHER_TEST_") }) {
            throw Invalid(unknown, "unknown setting (see tether --help for the list)")
        }
    }

    /// A webhook's URL and secret: both or neither, an http(s) URL, a long enough secret.
    private static func webhook(
        url urlName: String, secret secretName: String, what: String, allowsHTTP: Bool, _ value: (String) -> String?
    ) throws(Invalid) -> (URL?, String?) {
        var url: URL?
        if let text = value(urlName) {
            guard let parsed = URL(string: text), ["http", "https"].contains(parsed.scheme?.lowercased() ?? ""), let host = parsed.host,
                  parsed.hasUsablePort else {
                throw Invalid(urlName, "not an http(s) URL with a port from 1 to 65535: \"\(text)\"")
            }
            // The messages carry codes that sign people in: not in clear text beyond this machine, unless the operator
            // says plain http is meant (TETHER_WEBHOOK_ALLOW_HTTP, as for event webhooks: a relay inside one network).
            guard parsed.scheme?.lowercased() == "https" || PublicBase.isLoopback(host) || allowsHTTP else {
                throw Invalid(urlName, "must be https (plain http only to a loopback address, or with TETHER_WEBHOOK_ALLOW_HTTP=1): \"\(text)\"")
            }
            url = parsed
        }
        let secret = value(secretName)
        switch (url, secret) {
        case (_?, nil):
            throw Invalid(secretName, "required when \(urlName) is set (it signs every message)")
        case (nil, _?):
            throw Invalid(urlName, "not set, but \(secretName) is: say where to post \(what)")
        case (_?, let secret?) where secret.utf8.count < minimumWebhookSecretLength:
            throw Invalid(secretName, "too short: use at least \(minimumWebhookSecretLength) characters")
        default:
            return (url, secret)
        }
    }

    /// The fewest characters a webhook secret may have.
    public static let minimumWebhookSecretLength = 16

    /// The master keys the database pools open stored keys with (the configured one), if any.
    public var masterKeys: MasterKeyRing? { masterKey.map { MasterKeyRing(current: $0, others: olderMasterKeys) } }

    /// The production SMS sender when `TETHER_SMS_WEBHOOK_URL` is set; nil otherwise (no SMS can be sent).
    public func smsSender(httpClient: any ProviderHTTPClient = CurlProviderHTTPClient()) -> (any SMSSender)? {
        guard let smsWebhookURL, let smsWebhookSecret else { return nil }
        return WebhookSMSSender(configuration: .init(url: smsWebhookURL, secret: smsWebhookSecret), httpClient: httpClient)
    }

    /// The production mail sender when `TETHER_MAIL_WEBHOOK_URL` is set; nil otherwise (no mail can be sent).
    public func mailSender(httpClient: any ProviderHTTPClient = CurlProviderHTTPClient()) -> (any MailSender)? {
        guard let mailWebhookURL, let mailWebhookSecret else { return nil }
        return WebhookMailSender(configuration: .init(url: mailWebhookURL, secret: mailWebhookSecret), httpClient: httpClient)
    }

    /// The settings of a `--config` file: one strict JSON object (no member twice, no trailing comma) of `TETHER_*`
    /// names, each a string, a number, a boolean, or a list of strings (joined with commas). Anything else is refused rather
    /// than read some way: a second member that silently wins, a misspelt name, `true` taken for 1.
    private static func fileValues(_ path: String) throws(Invalid) -> [String: String] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Invalid("--config", "cannot read \(path)")
        }
        let object: [String: JSONValue]
        do {
            guard case .object(let members) = try CompactJSONDecoder(refusesDuplicateNames: true).decode(JSONValue.self, from: Array(data)) else {
                throw Invalid("--config", "\(path) is not a JSON object of TETHER_* keys")
            }
            object = members
        } catch let invalid as Invalid {
            throw invalid
        } catch DecodingError.dataCorrupted(let context) {
            // The parser's own words (a member named twice, at which byte), and the member they are about, if any.
            let member = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw Invalid("--config", "\(path) is not one JSON object of TETHER_* keys, each named once: "
                + (member.isEmpty ? "" : "\(member): ") + context.debugDescription)
        } catch {
            throw Invalid("--config", "\(path) is not one JSON object of TETHER_* keys, each named once: \(error)")
        }
        var values: [String: String] = [:]
        for (key, value) in object.sorted(by: { $0.key < $1.key }) {
            guard key.hasPrefix("TETHER_") else { throw Invalid(key, "in \(path): not a setting (they are named TETHER_…)") }
            // The environment's TETHER_TEST_* variables are the test suites' and pass unread; a file names settings only.
            guard Self.variables.contains(where: { $0.name == key }) else {
                throw Invalid(key, "in \(path): unknown setting (see tether --help for the list)")
            }
            switch value {
            case .string(let text): values[key] = text
            case .int(let number): values[key] = String(number)
            case .double(let number): values[key] = String(number)
            // As its words: an on/off setting reads them, a number refuses them (never 1 for true).
            case .bool(let flag): values[key] = flag ? "true" : "false"
            case .array(let items):
                let texts = items.compactMap { if case .string(let text) = $0 { text } else { nil } }
                guard texts.count == items.count else { throw Invalid(key, "in \(path): a list holds strings only") }
                values[key] = texts.joined(separator: ",")
            default: throw Invalid(key, "in \(path): expected a string, a number, a boolean or a list of strings")
            }
        }
        return values
    }
}
