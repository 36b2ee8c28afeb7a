import Foundation
import TetherCore
import TetherHTTP
import TetherPostgres
import TetherProviders

/// The support and admin API under `/v1/admin` (API.md "Support and admin API").
///
/// Every route takes `Authorization: Bearer <admin key>`. A missing, malformed,
/// unknown or revoked key is 401 and reaches nothing; every other request is
/// recorded in the key's stream as one event, with the user it concerned and the
/// status it was answered with, refusals (403, 400, 404) included. A request's
/// data is sent only once its record is written.
///
/// `DELETE /v1/admin/users/{id}` erases a user by crypto-shredding: their key is
/// destroyed (see `PersonalDataVault`), so the log keeps its events but what they
/// say about the person can no longer be read, and the read models drop it.
public struct AdminRoutes: Sendable {
    /// The actions of `POST /v1/admin/users/{id}/<action>`.
    enum Action: String, CaseIterable, Sendable {
        case disable
        case enable
        case revokeSessions = "revoke-sessions"
        /// `DELETE /v1/admin/users/{id}/sessions/{sessionId}`: one session, say a lost phone's.
        case endSession = "end-session"
        /// `DELETE /v1/admin/users/{id}/identities/{provider}`: one way in, the last one too.
        case unlink
        /// `DELETE /v1/admin/users/{id}`.
        case erase

        /// The actions with a `POST /v1/admin/users/{id}/<action>` route.
        static let posted: [Action] = [.disable, .enable, .revokeSessions]
    }

    /// The longest `reason` an action accepts.
    static let maxReasonLength = 500

    let keys: AdminKeyStore
    let directory: AdminUserDirectory
    let history: UserHistory
    let accounts: AccountService
    let feed: EventFeed
    /// The webhook subscriptions, when this server delivers them.
    let webhooks: WebhookStore?
    /// The standby that answers search, detail, history and the feed, when there is one; `directory`
    /// and `history` then read on it too.
    let replica: ReadReplica?

    public init(
        keys: AdminKeyStore, directory: AdminUserDirectory, history: UserHistory, accounts: AccountService, webhooks: WebhookStore? = nil,
        replica: ReadReplica? = nil, feedWaits: EventFeed.Waits = EventFeed.Waits()
    ) {
        self.feed = EventFeed(
            store: replica.map { PostgresEventStore(client: $0.database, upcasters: accounts.store.upcasters) } ?? accounts.store,
            waits: feedWaits)
        self.replica = replica
        self.webhooks = webhooks
        self.keys = keys
        self.directory = directory
        self.history = history
        self.accounts = accounts
    }

    /// Adds the routes to `router`.
    public func register(on router: inout Router) {
        router.get("/v1/admin/users") { request in try await search(request) }
        router.get("/v1/admin/users/{id}") { request in try await detail(request) }
        router.get("/v1/admin/users/{id}/history") { request in try await userHistory(request) }
        router.get("/v1/admin/events") { request in try await events(request) }
        router.get("/v1/admin/users/{id}/export") { request in try await export(request) }
        if let webhooks { registerWebhooks(on: &router, webhooks: webhooks) }
        let idempotent: @Sendable (Action, HTTPRequest) async throws -> HTTPResponse = { action, request in
            // An action's answer shows the user: it is theirs, and goes when they are erased. The erasure's own
            // answer, which shows nothing of them, is kept after the erasure's delete (named by its answer's id),
            // and stays for its retries.
            try await once(request, subject: action == .erase ? nil : Self.namedUser(request)) { try await act(action, request) }
        }
        for action in Action.posted {
            router.post("/v1/admin/users/{id}/\(action.rawValue)") { request in try await idempotent(action, request) }
        }
        router.delete("/v1/admin/users/{id}") { request in try await idempotent(.erase, request) }
        router.delete("/v1/admin/users/{id}/sessions/{sessionId}") { request in try await idempotent(.endSession, request) }
        router.delete("/v1/admin/users/{id}/identities/{provider}") { request in try await idempotent(.unlink, request) }
    }

    // MARK: Handlers

    private func search(_ request: HTTPRequest) async throws -> HTTPResponse {
        let raw = request.query
        let terms = AdminEvent.SearchTerms(email: raw["email"], uid: raw["uid"], q: raw["q"])
        let failure = { (status: Int) in
            AdminEvent.usersSearched(.init(provider: raw["provider"], limit: nil, resultCount: nil, status: status, personal: terms))
        }
        return try await audited(request, requires: .support, failure: failure) { _ in
            let query = try AdminQuery(
                request, accepting: ["email", "provider", "uid", "q", "after", "limit"], emptyAsAbsent: ["email", "provider", "uid"])
            let search = UserSearch(email: query["email"], provider: query["provider"], uid: query["uid"], q: query["q"])
            let limit = try query.limit(standard: UserHistory.defaultPageSize, maximum: UserHistory.maxPageSize)
            let found = try await directory.search(search, after: try query.userID("after"), limit: limit)
            let body: JSONValue = [
                "users": .array(found.users.map(\.json)),
                "nextAfter": found.nextAfter.map { .string($0.lowercasedText) } ?? .null,
            ]
            let record = AdminEvent.usersSearched(.init(
                provider: search.provider, limit: limit, resultCount: found.users.count, status: 200,
                personal: .init(email: search.email, uid: search.uid, q: search.q)))
            return (try HTTPResponse.json(body), record)
        }
    }

    private func detail(_ request: HTTPRequest) async throws -> HTTPResponse {
        let named = Self.namedUser(request)
        return try await audited(request, requires: .support, failure: { .userViewed(.init(userId: named, status: $0)) }) { _ in
            _ = try AdminQuery(request, accepting: [])
            let id = try Self.userID(request)
            return (try HTTPResponse.json(try await directory.detail(id)), .userViewed(.init(userId: id, status: 200)))
        }
    }

    private func userHistory(_ request: HTTPRequest) async throws -> HTTPResponse {
        let named = Self.namedUser(request)
        let failure = { (status: Int) in
            AdminEvent.historyViewed(.init(userId: named, after: nil, limit: nil, returned: nil, status: status))
        }
        // Without a replica the page's record checks the key in its own transaction: a key found live before
        // is not looked up first.
        return try await audited(request, requires: .support, keyCheckedByTheRecord: replica == nil, failure: failure) { metadata, key in
            let query = try AdminQuery(request, accepting: ["after", "limit"])
            let id = try Self.userID(request)
            let after = try query.position("after") ?? 0
            let limit = try query.limit(standard: UserHistory.defaultPageSize, maximum: UserHistory.maxPageSize)
            let reads = history.pageStatements(of: id, after: after, limit: limit)
                + [AdminUserDirectory.knownStatement(id), Self.recentHistoryViewStatement(of: id, by: key.id, after: after)]
            // The record, from how many rows were read, and the page's text started on a dispatch thread: the
            // record commits while the page is opened and written out, and sends nothing until it has.
            let answer: @Sendable (ArraySlice<PostgresRows>, Double?) -> (AdminEvent?, Result<BlockingWork.Pending<[UInt8]>, AccountError>) = {
                [history] rows, lag in
                let count = PostgresEventStore.userEventsStatementCount
                let returned = UserHistory.entryCount(in: rows.prefix(count), limit: limit)
                // An erased user's history outlives their row; an id with neither is no user at all, whatever
                // records of earlier requests about it say.
                if rows[rows.startIndex + count].isEmpty {
                    let record = AdminEvent.historyViewed(.init(userId: named, after: nil, limit: nil, returned: nil, status: 404))
                    return (record, .failure(.notFound))
                }
                // A reading's later pages (past the last event its recorded page held) are not recorded again while
                // the key's record of a successful read is recent: each page's record would otherwise be on the next
                // page, and a reader of small pages would never reach the end. A read from the start is always recorded.
                let continues = after > 0 && !rows[rows.startIndex + count + 1].isEmpty
                let held = PostgresEventStore.userEventRows(rows.prefix(count))
                let through: Int64? = returned > 0 ? try? held[returned - 1].decode("position") : nil
                let record = continues
                    ? nil : AdminEvent.historyViewed(.init(userId: id, after: after, limit: limit, returned: returned, status: 200, through: through))
                return (record, .success(history.startWriting(of: id, from: rows.prefix(count), limit: limit, replicaLagSeconds: lag)))
            }
            let text: [UInt8] = try await history.timed {
                let page: Result<BlockingWork.Pending<[UInt8]>, AccountError>
                if let replica {
                    // On the standby, in one round trip with its lag; then the record, on the primary.
                    let rows = try await replica.database.withTransactionJob { try $0.runAlone(reads + [ReadReplica.lagStatement]) }
                    let (record, read) = answer(rows.dropLast(), try ReadReplica.lag(from: rows[rows.endIndex - 1]))
                    do {
                        if let record { try await keys.record(record, keyId: key.id, metadata: metadata) }
                    } catch {
                        throw Recorded(error: error)
                    }
                    page = read
                } else {
                    // The page is read in its record's transaction, in the same round trip as the record's locks:
                    // the reader waits for one round trip more than the read, the commit of the record.
                    do {
                        page = try await keys.record(keyId: key.id, about: id, metadata: metadata, reading: reads) { rows in answer(rows, nil) }
                    } catch let error as AdminError where error == .invalidKey {
                        throw Recorded(error: error)  // revoked since it was found: nothing to record it in
                    }
                }
                let writing: BlockingWork.Pending<[UInt8]>
                do {
                    writing = try page.get()
                } catch {
                    throw Recorded(error: error)  // the 404, recorded as such
                }
                // A page that cannot be written out (a server fault: an event that does not decode) fails after
                // its record of 200 committed; the failure is recorded too, as a second record with its status.
                return try await writing.value
            }
            return HTTPResponse.json(text: text)
        }
    }

    /// How long a key's reading of a user's history is one reading: its later pages add no record.
    static let historyReadingWindow = "10 minutes"

    /// A row when `keyId` recorded a successful read of `userId`'s history among the user's last 50 events
    /// and within ``historyReadingWindow`` (the user's newest events, read backwards on their index), whose page
    /// ended at or before `after`: a page from there on continues that reading. A refused request's record (a
    /// 400, a 404) does not count, nor does a page that starts before what the recorded one held.
    static func recentHistoryViewStatement(of userId: UUID, by keyId: UUID, after: Int64) -> PostgresQuery {
        """
        SELECT 1 AS recent FROM (SELECT stream, type, occurred_at, data FROM events WHERE user_id = \(userId) ORDER BY position DESC LIMIT 50) e
        WHERE e.stream = \(StreamName.adminKey(keyId).rawValue) AND e.type = 'AdminHistoryViewed' AND e.data->>'status' = '200'
          AND (e.data->>'through')::bigint <= \(after) AND e.occurred_at > now() - \(historyReadingWindow)::interval
        LIMIT 1
        """
    }

    /// Everything held about the user (``UserExport``), for an admin key; recorded like an action.
    private func export(_ request: HTTPRequest) async throws -> HTTPResponse {
        let named = Self.namedUser(request)
        let record = { (status: Int) in AdminEvent.actionRequested(.init(userId: named, action: "export", reason: nil, status: status)) }
        return try await audited(request, requires: .admin, failure: record) { _ in
            _ = try AdminQuery(request, accepting: [])
            let id = try Self.userID(request)
            guard let document = try await UserExport(database: accounts.database).document(id) else { throw AccountError.notFound }
            var response = try HTTPResponse.json(document)
            response.headers["Content-Disposition"] = "attachment; filename=\"tether-user-\(id.lowercasedText).json\""
            return (response, record(200))
        }
    }

    /// A page of the public event feed. Admin keys see personal members; support keys the rest.
    private func events(_ request: HTTPRequest) async throws -> HTTPResponse {
        let raw = request.query
        let named = raw["userId"].flatMap(UUID.init(text:))
        let failure = { (status: Int) in
            AdminEvent.eventsRead(.init(userId: named, after: raw["after"], types: nil, returned: nil, status: status))
        }
        return try await audited(request, requires: .support, failure: failure) { metadata, key in
            let query = try AdminQuery(request, accepting: ["after", "limit", "type", "userId", "wait"], emptyAsAbsent: ["after", "type", "userId"])
            let after = try query["after"].map { text throws(AdminError) in
                guard let cursor = EventFeed.Cursor(parsing: text) else {
                    throw .invalidRequest("after takes the nextAfter of an earlier page (or 0 for the start), not '\(text)'.")
                }
                return cursor
            } ?? EventFeed.Cursor(.start)
            // Asked of the primary: a standby behind it has not reached a cursor the primary gave, and waits for it.
            guard try await accounts.store.reaches(after.checkpoint) else {
                throw AdminError.invalidRequest("after \(EventFeed.Cursor.pastTheLog): take the nextAfter of an earlier page, or 0 for the start.")
            }
            let limit = try query.limit(standard: 50, maximum: EventFeed.maxPageSize)
            let types = query["type"].map { $0.split(separator: ",").map { String($0.trimmingWhiteSpace()) } }
            guard let internalTypes = EventFeed.internalTypes(for: types) else {
                throw AdminError.invalidRequest("type takes a comma list of \(PublicEvent.types.joined(separator: ", ")).")
            }
            let userId = try query.userID("userId")
            let wait = try query["wait"].map { text throws(AdminError) in
                guard let seconds = Int(text), (0...30).contains(seconds) else { throw .invalidRequest("wait takes 0 to 30 seconds, not '\(text)'.") }
                return Duration.seconds(seconds)
            } ?? .zero
            let page = try await feed.page(
                after: after, types: internalTypes, userId: userId, limit: limit, personal: key.role == .admin, wait: wait)
            let record = AdminEvent.eventsRead(.init(
                userId: userId, after: after.description, types: types, returned: page.events.count, status: 200))
            do {
                // A page may have waited up to 30 s for its events: its record checks that the key was not revoked
                // meanwhile, and a revoked key is answered 401 with nothing of what it waited for.
                try await keys.record(keyId: key.id, about: userId, metadata: metadata, reading: []) { _ in (record, ()) }
            } catch {
                throw Recorded(error: error)
            }
            return try HTTPResponse.json([
                "events": .array(page.events), "nextAfter": .string(page.next.description), "version": .int(PublicEvent.version),
            ] as JSONValue)
        }
    }

    /// `{"reason"}`, or nothing: any other member is refused, so a body meant for another route does not pass
    /// for a reasonless action.
    private struct ActionBody: Decodable {
        var reason: String?

        init(from decoder: any Decoder) throws {
            let members = try BodyMember.members(of: decoder, only: ["reason"], of: "an action")
            reason = try members.decodeIfPresent(String.self, forKey: BodyMember("reason"))
        }
    }

    private func act(_ action: Action, _ request: HTTPRequest) async throws -> HTTPResponse {
        let named = Self.namedUser(request)
        let session = request.pathParameters["sessionId"].flatMap(UUID.init(text:))
        let provider = Self.namedProvider(request)
        let failure = { (status: Int) in
            AdminEvent.actionRequested(.init(
                userId: named, action: action.rawValue, sessionId: session, provider: provider, reason: nil, status: status))
        }
        return try await audited(request, requires: .admin, failure: failure, changesState: true) { metadata in
            _ = try AdminQuery(request, accepting: [])
            let id = try Self.userID(request)
            let reason = request.body.isEmpty ? nil : try request.decodeJSON(ActionBody.self).reason
            if let reason, reason.count > Self.maxReasonLength {
                throw AdminError.invalidRequest("reason must be at most \(Self.maxReasonLength) characters.")
            }
            // The reason is recorded in the user's events, whose JSON PostgreSQL keeps as jsonb: no NUL there.
            if let reason, reason.unicodeScalars.contains("\u{0}") {
                throw AdminError.invalidRequest("reason must be text without NUL characters.")
            }
            let context = CommandContext(commandId: metadata.commandId ?? UUID.random(), metadata: metadata)
            // The answer shows the state the command left (nothing is read back).
            let account = switch action {
            case .disable: try await accounts.setDisabled(true, userId: id, reason: reason, context: context)
            case .enable: try await accounts.setDisabled(false, userId: id, reason: reason, context: context)
            case .revokeSessions: try await accounts.revokeAllSessions(userId: id, context: context)
            case .endSession: try await accounts.endSession(try Self.sessionID(request), of: id, by: .admin, context: context)
            case .unlink: try await accounts.unlink(provider: try Self.providerName(request), from: id, byAdmin: true, context: context)
            case .erase: try await accounts.erase(userId: id, reason: reason, context: context)
            }
            let user = UserBody(account).shownToAdmins
            let record = AdminEvent.actionRequested(.init(
                userId: id, action: action.rawValue, sessionId: session, provider: provider, reason: reason, status: 200))
            return (HTTPResponse.json(UserAnswer(user: user)), record)
        }
    }

    // MARK: Pieces

    /// Authenticates the key, checks its role, runs `body` and records the request in the key's stream.
    ///
    /// `body` answers with the response and the event that records it; a thrown
    /// error is recorded through `failure` with the status it is answered with.
    /// When that record cannot be written either, the original error is answered.
    ///
    /// `changesState`: `body` has committed a change when it answers (a user disabled, a webhook made), so a
    /// record that then fails does not turn the answer into an error: the change is done, its own events name
    /// the key as their actor, and the answer may hold what is shown once (a new webhook's secret). A read's
    /// answer is not given without its record.
    func audited(
        _ request: HTTPRequest, requires role: AdminRole, failure: (Int) -> AdminEvent, changesState: Bool = false,
        _ body: (EventMetadata) async throws -> (HTTPResponse, AdminEvent)
    ) async throws -> HTTPResponse {
        try await audited(request, requires: role, failure: failure) { metadata, key in
            let (response, record) = try await body(metadata)
            if changesState {
                await keys.recordCommitted(record, keyId: key.id, metadata: metadata)
                return response
            }
            do {
                try await keys.record(record, keyId: key.id, metadata: metadata)
            } catch {
                throw Recorded(error: error) // no second record for a record that failed
            }
            return response
        }
    }

    /// An error the request's record has already been written for (or failed with): not recorded again.
    struct Recorded: Error {
        let error: any Error
    }

    /// Runs `body` for the request's admin key, which must have `role`; `body` writes the request's
    /// record itself. Anything else it throws is recorded as `failure` with the error's status.
    ///
    /// `keyCheckedByTheRecord`: `body` writes its record with ``AdminKeyStore/record(keyId:about:metadata:reading:decide:)``,
    /// which checks that the key is live in the record's transaction, and writes nothing before it; a key
    /// found live before is then not looked up again.
    func audited(
        _ request: HTTPRequest, requires role: AdminRole, keyCheckedByTheRecord: Bool = false, failure: (Int) -> AdminEvent,
        recordingItself body: (EventMetadata, AdminKey) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        let key = try await authenticate(request, checkedByItsRecord: keyCheckedByTheRecord)
        // A new command per request; retries get the stored answer (see `register`).
        let commandID = UUID.random()
        let metadata = EventMetadata(
            commandId: commandID, correlationId: commandID, actor: .admin(keyId: key.id), clientIP: request.remoteAddress,
            userAgent: request.headers["user-agent"], surface: "admin")
        do {
            guard key.role.allows(role) else { throw AdminError.forbidden(needs: role) }
            var response = try await body(metadata, key)
            // What the admin API answers is about people (detail, history, a whole export): no cache keeps it.
            response.headers["Cache-Control"] = "no-store"
            return response
        } catch let recorded as Recorded {
            throw recorded.error
        } catch {
            // A key not looked up is looked up now: a key revoked since it was found gets 401, as it would have
            // before, and no record. (When the lookup itself fails, the request's own error stands.)
            if keyCheckedByTheRecord {
                do { _ = try await authenticate(request) } catch let refused as AdminError { throw refused } catch {}
            }
            try? await keys.record(failure(Problem(converting: error)?.status ?? 500), keyId: key.id, metadata: metadata)
            throw error
        }
    }

    /// Runs a change once per `Idempotency-Key` of the request's admin key: a retry gets the first answer and
    /// records nothing new. The key is checked first, so no answer is kept for a request without a live key.
    func once(_ request: HTTPRequest, subject: UUID? = nil, _ body: () async throws -> HTTPResponse) async throws -> HTTPResponse {
        let key = try await authenticate(request)
        return try await IdempotentRequests(database: accounts.database).respond(to: request, principal: key.id, subject: subject, body)
    }

    /// The live admin key of `Authorization: Bearer`, or 401.
    private func authenticate(_ request: HTTPRequest, checkedByItsRecord: Bool = false) async throws -> AdminKey {
        guard let (scheme, presented) = request.authorization else { throw AdminError.missingKey }
        guard scheme == "bearer", !presented.isEmpty,
              let key = try await keys.authenticate(presented, checkedByItsRecord: checkedByItsRecord) else {
            throw AdminError.invalidKey
        }
        return key
    }

    /// The `{id}` of the path as a user id, or 400.
    private static func userID(_ request: HTTPRequest) throws(AdminError) -> UUID {
        guard let id = namedUser(request) else {
            throw .invalidRequest("'\(request.pathParameters["id"] ?? "")' is not a user id (a UUID).")
        }
        return id
    }

    /// The `{sessionId}` of the path as a session id, or 400.
    private static func sessionID(_ request: HTTPRequest) throws(AdminError) -> UUID {
        guard let id = request.pathParameters["sessionId"].flatMap(UUID.init(text:)) else {
            throw .invalidRequest("'\(request.pathParameters["sessionId"] ?? "")' is not a session id (a UUID).")
        }
        return id
    }

    /// The `{provider}` of the path, when it names a provider: recorded even when the request is refused.
    private static func namedProvider(_ request: HTTPRequest) -> String? {
        request.pathParameters["provider"].flatMap { ProviderName(rawValue: $0)?.rawValue }
    }

    /// The `{provider}` of the path as a provider's name, or 400.
    private static func providerName(_ request: HTTPRequest) throws(AdminError) -> String {
        guard let provider = namedProvider(request) else {
            let names = ProviderName.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalidRequest("'\(request.pathParameters["provider"] ?? "")' is not a provider (\(names)).")
        }
        return provider
    }

    /// The `{id}` of the path, when it is a UUID: recorded even when the request is refused.
    private static func namedUser(_ request: HTTPRequest) -> UUID? {
        request.pathParameters["id"].flatMap(UUID.init(text:))
    }
}

/// A member of an admin request's body, for bodies that refuse members they do not know: a misspelt one must not
/// pass for an absent one, whose default may ask for more (every event, personal data) than was meant.
struct BodyMember: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }

    /// The body's members, when it has none but `known`; `what` names the body in the refusal.
    static func members(of decoder: any Decoder, only known: [String], of what: String) throws -> KeyedDecodingContainer<BodyMember> {
        let members = try decoder.container(keyedBy: BodyMember.self)
        if let unknown = members.allKeys.first(where: { !known.contains($0.stringValue) }) {
            let list = known.map { "\"\($0)\"" }.joined(separator: ", ")
            throw DecodingError.dataCorrupted(.init(
                codingPath: [unknown], debugDescription: "unknown member \(unknown.stringValue): \(what) takes only {\(list)}"))
        }
        return members
    }
}
