import Foundation
import Synchronization
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherProviders

/// The running service: database pool, HTTP server and routes, from start to graceful stop.
public final class TetherService: Sendable {
    /// The settings it runs with.
    public let configuration: TetherConfiguration
    /// The pool every route uses; it acts as the `tether_service` role.
    public let database: PostgresClient
    /// The HTTP server.
    public let server: HTTPServer
    /// The keys that sign access tokens, published at `/.well-known/jwks.json`.
    public let signingKeys: SigningKeyStore
    /// The account commands every surface runs (the seed loader of `tether dev` too).
    public let accounts: AccountService
    /// How credentials are verified: the configured identity providers unless the caller gave another.
    public let identities: any IdentityVerification
    /// How passwords are hashed and checked.
    public let passwords: PasswordVerifier
    /// The command layer every surface calls (the `/v1` routes and the seeds).
    public let commands: AccountCommands
    /// Password reset, email verification and email change, for every surface.
    public let emailFlows: EmailFlows
    /// What signs Firebase ID tokens, when the Firebase surface is on.
    public let firebaseIDTokens: FirebaseIDTokens?
    /// Counters and histograms served at `GET /metrics`.
    public let metrics: MetricsRegistry
    /// Delivers webhook subscriptions while the server runs.
    public let webhooks: WebhookDeliverer
    /// Works the outbox of calls to providers (revocations) while the server runs.
    public let providerCalls: ProviderCallWorker
    /// The standby of `TETHER_DATABASE_READ_URL`, when set.
    public let replica: ReadReplica?
    let logger: Logger
    /// Sweeps operational state past its lifetime (kept Idempotency-Key answers) while the server runs.
    private let housekeeping = BackgroundLoop()
    /// The event feed's long polls, which a stop ends first.
    private let feedWaits = EventFeed.Waits()

    /// Assembles the service; `extraRoutes` are mounted as given (the dev identity provider under `tether dev`).
    ///
    /// `development` is `tether dev`'s: it alone lets `Authorization: Bearer owner` act as an admin on the
    /// Firebase surface, as firebase-admin sends it to an emulator.
    ///
    /// SMS codes go to `sms` when given (the dev outbox), otherwise to the configured webhook, if any;
    /// mails likewise go to `mail` or the configured mail webhook.
    /// `metricsCollectors` add metrics measured at scrape time to `GET /metrics`
    /// (replay's gauges go there).
    public init(
        configuration: TetherConfiguration, databaseURL: String, logger: Logger, extraRoutes: Router? = nil,
        identities: (any IdentityVerification)? = nil, passwords: any PasswordHashing = ScryptPasswordHasher(),
        sms: (any SMSSender)? = nil, mail: (any MailSender)? = nil, metricsCollectors: [any MetricsCollector] = [], development: Bool = false,
        webhookDelivery: WebhookDeliverer.Configuration = WebhookDeliverer.Configuration(),
        providerCallsConfiguration: ProviderCallWorker.Configuration = ProviderCallWorker.Configuration(),
        providerHTTPClient: any ProviderHTTPClient = CurlProviderHTTPClient(),
        appleRevalidateMinimum: TimeInterval = GrantRevalidation.appleMinimum
    ) throws {
        let providers = try ProvidersConfiguration.fromEnvironment(configuration.values)
        self.configuration = configuration
        self.logger = logger
        if !providers.facebook.appIDs.isEmpty, providers.facebook.appSecret == nil {
            logger.warn("Facebook: Limited Login tokens only; access tokens (classic and session-info) need TETHER_FACEBOOK_APP_SECRET")
        }
        let migrations = try MigrationRunner(directory: try MigrationRunner.locateSchemaDirectory(explicit: configuration.schemaDirectory))
        func pool(_ url: String, maxConnections: Int) -> PostgresClient {
            PostgresClient(configuration: .init(
                url: url, maxConnections: maxConnections, role: "tether_service", masterKeys: configuration.masterKeys,
                statementTimeout: .milliseconds(Int(configuration.databaseStatementTimeout * 1000))))
        }
        database = pool(databaseURL, maxConnections: 16)
        let replica = configuration.databaseReadURL.map { ReadReplica(database: pool($0, maxConnections: 8)) }
        self.replica = replica
        var router = Router()
        OperationsRoutes(database: database, migrations: migrations, logger: logger).register(on: &router)
        signingKeys = SigningKeyStore(client: database)
        registerJWKSRoute(on: &router, keys: signingKeys)
        let accounts = AccountService(
            database: database, emailPolicy: configuration.emailPolicy, stateCacheBytes: configuration.stateCacheMegabytes << 20)
        let passwordVerifier = try PasswordVerifier(hasher: passwords)
        let providerSet = identities != nil ? nil : try IdentityProviders(
            configuration: providers, httpClient: providerHTTPClient, nonceStore: PostgresNonceStore(client: database),
            passwords: PasswordIdentityVerifier(passwords: passwordVerifier, directory: accounts))
        let identityVerification = identities ?? ProviderIdentityVerification(providers: providerSet!)
        let revalidation = GrantRevalidation(
            accounts: accounts, grants: providerSet?.grants, interval: configuration.providerRevalidateInterval,
            minimums: ["apple": appleRevalidateMinimum])
        self.accounts = accounts
        self.identities = identityVerification
        self.passwords = passwordVerifier
        let limits = SignInLimits(database: database, configuration: .init(failures: configuration.signInFailureLimit))
        let pendingCredentials = MFAPendingCredentials(keys: signingKeys)
        commands = AccountCommands(
            accounts: accounts, identities: identityVerification, limits: limits, pendingCredentials: pendingCredentials,
            passwords: passwordVerifier, revalidation: revalidation)
        let smsSender = sms ?? configuration.smsSender()
        let mailSender = mail ?? configuration.mailSender()
        // What clients are told is only that no text or mail can be sent: the settings are named here, for the operator.
        if smsSender == nil {
            logger.info("SMS: no TETHER_SMS_WEBHOOK_URL; texted second factors answer 503 sms_unavailable")
        }
        if mailSender == nil {
            logger.info("mail: no TETHER_MAIL_WEBHOOK_URL; the email flows answer 503 mail_unavailable")
        }
        emailFlows = EmailFlows(
            commands: commands, mail: mailSender, publicURL: configuration.publicURL, development: development,
            passwordResetLifetime: configuration.passwordResetCodeLifetime,
            verificationLifetime: configuration.emailVerificationCodeLifetime, logger: logger)
        V1Routes(
            commands: commands,
            issuer: AccessTokenIssuer(keys: signingKeys), verifier: AccessTokenVerifier(keys: signingKeys),
            // Behind a proxy that forwards its own Host, the URL a client signs is the configured public one.
            // The request's Host is accepted too, as before: a server may answer under more names than its links'.
            dpop: DPoPBinding(
                replayStore: PostgresDPoPReplayStore(client: database),
                configuration: .init(publicOrigin: configuration.publicURL?.absoluteString)),
            sms: smsSender, email: emailFlows
        ).register(on: &router)
        let adminKeys = AdminKeyStore(database: database, logger: logger)
        if let appID = configuration.parseAppID {
            ParseRoutes(
                appID: appID, clientKey: configuration.parseClientKey, publicURL: configuration.publicURL, commands: commands,
                adminKeys: adminKeys, sms: smsSender, appleIssuer: providers.apple.issuer, email: emailFlows
            ).register(on: &router)
        }
        if let projectID = configuration.firebaseProjectID {
            let firebaseKeys = SigningKeyStore(
                client: database, configuration: FirebaseIDTokens.keyConfiguration, algorithm: .rs256)
            let idTokens = FirebaseIDTokens(projectID: projectID, keys: firebaseKeys)
            firebaseIDTokens = idTokens
            FirebaseRoutes(
                projectID: projectID, commands: commands, adminKeys: adminKeys, idTokens: idTokens, sms: smsSender,
                emailFlows: emailFlows, acceptsOwner: development,
                appleCodes: AppleCodeRevocation(grants: providers.apple.isEnabled ? providerSet?.grants : nil, clientIDs: providers.apple.clientIDs)
            ).register(on: &router)
        } else {
            firebaseIDTokens = nil
        }
        metrics = MetricsRegistry()
        let webhooks = WebhookStore(database: database, policy: WebhookTargetPolicy(
            allowsHTTP: configuration.webhookAllowsHTTP || development, allowedHosts: configuration.webhookAllowedHosts,
            allowsLoopback: development))
        self.webhooks = WebhookDeliverer(webhooks: webhooks, configuration: webhookDelivery, metrics: metrics, logger: logger)
        providerCalls = ProviderCallWorker(
            accounts: accounts, grants: providerSet?.grants, configuration: providerCallsConfiguration, metrics: metrics, logger: logger)
        AdminRoutes(
            keys: adminKeys, directory: AdminUserDirectory(database: replica?.database ?? database),
            history: UserHistory(database: replica?.database ?? database, latency: UserHistory.latencyHistogram(in: metrics)),
            accounts: accounts, webhooks: webhooks, replica: replica, feedWaits: feedWaits
        ).register(on: &router)
        ProviderCallbackRoutes(
            accounts: accounts,
            apple: providers.apple.isEnabled ? try AppleNotificationVerifier(configuration: providers, httpClient: CurlHTTPClient()) : nil,
            facebookAppSecret: providers.facebook.appSecret, publicURL: configuration.publicURL
        ).register(on: &router)
        AdminPage().register(on: &router)
        ActionPages(flows: emailFlows).register(on: &router)
        MetricsRoutes(
            registry: metrics,
            collectors: [
                ReplayMetrics(database: database), WebhookMetrics(database: database), ProviderCallMetrics(database: database),
                AccountStateCacheMetrics(cache: accounts.cache), PasswordMetrics(commands: commands), MemoryMetrics(),
            ]
                + (replica.map { [ReplicaMetrics(replica: $0)] } ?? []) + metricsCollectors
        ).register(on: &router)
        if let extraRoutes {
            router.mount("", extraRoutes)
        }
        var serverConfiguration = HTTPServer.Configuration(
            host: configuration.listen.host, port: configuration.listen.port, log: logger.filteredSink)
        serverConfiguration.trustedProxies = configuration.trustedProxies
        serverConfiguration.connectionLimit = configuration.maxConnections
        serverConfiguration.perAddressConnectionLimit = configuration.maxConnectionsPerAddress
        serverConfiguration.connectionTimeout = .milliseconds(Int(configuration.idleTimeout * 1000))
        serverConfiguration.headerTimeout = .milliseconds(Int(configuration.headerTimeout * 1000))
        serverConfiguration.bodyTimeout = .milliseconds(Int(configuration.bodyTimeout * 1000))
        if configuration.parseAppID != nil {
            serverConfiguration.problemRenderers.append(ParseRoutes.problemRenderer)
        }
        if configuration.firebaseProjectID != nil {
            serverConfiguration.problemRenderers += FirebaseRoutes.problemRenderers
        }
        server = HTTPServer(configuration: serverConfiguration, router: RequestMetrics(registry: metrics).instrument(router))
    }

    /// Starts listening; throws with the address when the port cannot be bound.
    public func start() throws {
        try server.start() // the server logs "listening" with its address
        webhooks.start()
        providerCalls.start()
        commands.limits.startFlushingTallies(logger: logger)
        // Kept Idempotency-Key answers past their day go in batches; a full batch means more are due now.
        // So do the limits' rows past their windows, whether or not their keys come back.
        housekeeping.start(idle: .seconds(60), logger: logger, name: "expired Idempotency-Key answers and limits' rows") {
            [database, commands] in
            _ = try await commands.sweepExpiredLimitRows()
            return try await IdempotentRequests.sweepExpired(in: database) == 1000
        }
    }

    /// Deletes the sign-in limits' and the code sends' rows past their windows now (the server does it every minute);
    /// answers how many went.
    @discardableResult
    public func sweepExpiredLimitRows() async throws -> Int {
        try await commands.sweepExpiredLimitRows()
    }

    /// Deletes kept `Idempotency-Key` answers past their lifetime now (the server does it every minute);
    /// answers how many went.
    @discardableResult
    public func sweepExpiredIdempotentAnswers() async throws -> Int {
        try await IdempotentRequests.sweepExpired(in: database)
    }

    /// Records the closed minutes of the tallies of refused sign-ins about no known account as
    /// `SignInFailuresCounted` events now (the server does it every 30 s); answers how many it appended.
    @discardableResult
    public func flushSignInFailureTallies() async throws -> Int {
        try await commands.limits.flushTallies()
    }

    /// Stops accepting, lets in-flight requests finish, then closes the pool.
    public func stop() async {
        logger.info("shutting down")
        feedWaits.end() // a long poll of the feed answers now, not at the grace period's end
        await server.shutdown() // logs "stopped" once requests in flight have finished
        // Each step is logged as it begins, so a stop that hangs names its step (see ``stoppingStep``).
        await stopStep("mails in flight") { await emailFlows.finishSending() }
        await stopStep("webhook deliveries") { await webhooks.stop() }
        await stopStep("provider calls") { await providerCalls.stop() }
        await stopStep("sign-in failure tallies") { await commands.limits.stopFlushingTallies() }
        await stopStep("housekeeping") { await housekeeping.stop() }
        stoppingStep.withLock { $0 = "database connections" }
        database.shutdown()
        replica?.database.shutdown()
        stoppingStep.withLock { $0 = nil }
    }

    /// The step ``stop()`` is in, while it runs: for a watchdog to name when the stop takes too long.
    public let stoppingStep = Mutex<String?>(nil)

    private func stopStep(_ name: String, _ step: () async -> Void) async {
        stoppingStep.withLock { $0 = name }
        logger.info("shutting down: \(name)")
        await step()
    }
}
