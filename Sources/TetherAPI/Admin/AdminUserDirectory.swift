import Foundation
import TetherCore
import TetherHTTP
import TetherPostgres

/// What support staff search users by; criteria given together must all match.
///
/// Values and words are matched whole: the read models hold personal data sealed (``ReadModelSeal``),
/// which keeps equality and nothing else, so no other part of an email or name can be searched for.
public struct UserSearch: Sendable, Hashable {
    /// The user's email or any linked identity's email, without case.
    public var email: String?
    /// A linked provider (`apple`, `facebook`, `google`, `password`, …).
    public var provider: String?
    /// A provider's id for the person (as typed, or in lower case: a password identity's uid is its
    /// email); with `provider`, of that provider's identity.
    public var uid: String?
    /// Free text, without case: a user id, or a whole word of the user's email, name or an identity's email,
    /// name or uid (``ReadModelSeal/searchTerms(_:)``): `ada.lovelace@example.com`, `ada.lovelace`,
    /// `example.com`, `lovelace`, `ada lovelace`, but not `lovel` or `example`.
    public var q: String?

    public init(email: String? = nil, provider: String? = nil, uid: String? = nil, q: String? = nil) {
        self.email = email
        // Provider names are lower case (`APPLE` found nothing, as if no one had an Apple ID).
        self.provider = provider?.lowercased()
        self.uid = uid
        self.q = q
    }

    /// The shortest free text searched for (shorter matches far too much to be useful).
    public static let minimumTextLength = 2

    /// Throws `invalid_request` when nothing is asked for, or free text is too short.
    func validate() throws(AdminError) {
        guard email != nil || provider != nil || uid != nil || q != nil else {
            throw .invalidRequest("Search by at least one of email, provider, uid or q.")
        }
        if let q, q.count < Self.minimumTextLength {
            throw .invalidRequest("q must be at least \(Self.minimumTextLength) characters.")
        }
    }
}

/// One user in search results: enough to recognise them and open their detail.
public struct UserSummary: Sendable, Hashable {
    public var id: UUID
    public var email: String?
    public var displayName: String?
    public var disabled: Bool
    public var createdAt: Date
    public var lastSignInAt: Date?
    /// Linked providers, sorted.
    public var providers: [String]

    /// `{"id","email","displayName","disabled","createdAt","lastSignInAt","providers"}`.
    public var json: JSONValue {
        [
            "id": .string(id.lowercasedText),
            "email": email.map(JSONValue.string) ?? .null,
            "displayName": displayName.map(JSONValue.string) ?? .null,
            "disabled": .bool(disabled),
            "createdAt": .string(ISO8601Milliseconds.format(createdAt)),
            "lastSignInAt": lastSignInAt.map { .string(ISO8601Milliseconds.format($0)) } ?? .null,
            "providers": .array(providers.map(JSONValue.string)),
        ]
    }
}

/// Reads users for support staff from the read models.
public struct AdminUserDirectory: Sendable {
    /// Sessions listed in a user's detail, most recent first.
    public static let sessionsShown = 100

    public let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    /// Users matching `search`, oldest first, up to `limit`, after the user `after` (the previous page's `nextAfter`).
    public func search(_ search: UserSearch, after: UUID? = nil, limit: Int) async throws -> (users: [UserSummary], nextAfter: UUID?) {
        try search.validate()
        let seal = try await database.readModelSeal()
        var query: PostgresQuery = """
            SELECT u.id, u.email, u.display_name, u.disabled, u.created_at, u.last_sign_in_at,
                   (SELECT string_agg(i.provider, ',' ORDER BY i.provider) FROM identities i WHERE i.user_id = u.id) AS providers
            FROM users u WHERE TRUE
            """
        if let email = search.email {
            // An identity's whole email is one of its search words, in lower case like the user's normalised one.
            let term = try seal.searchTerm(email)
            query.append("""
                 AND (u.email_normalized = \(term)
                      OR u.id IN (SELECT i.user_id FROM identities i WHERE i.search_terms @> \(PostgresArray([term]))::text[]))
                """)
        }
        if search.provider != nil || search.uid != nil {
            query.append(" AND EXISTS (SELECT 1 FROM identities i WHERE i.user_id = u.id")
            if let provider = search.provider { query.append(" AND i.provider = \(provider)") }
            if let uid = search.uid {
                // As typed; for a password identity also in lower case, as its uid (its email) is kept. Other
                // providers' ids are exact: Apple's `a123` and `A123` are two people.
                let exact = try seal.seal(uid), lowered = try seal.seal(ExternalIdentity.normalize(uid))
                query.append(" AND (i.provider_uid = \(exact) OR (i.provider = 'password' AND i.provider_uid = \(lowered)))")
            }
            query.append(")")
        }
        if let q = search.q {
            if let id = UUID(text: q) {
                query.append(" AND u.id = \(id)")
            } else {
                let term = PostgresArray([try seal.searchTerm(q)])
                query.append("""
                     AND (u.email_terms @> \(term)::text[] OR u.name_terms @> \(term)::text[]
                          OR u.id IN (SELECT i.user_id FROM identities i WHERE i.search_terms @> \(term)::text[]))
                    """)
            }
        }
        if let after {
            let cursor = try await database.query("SELECT created_at FROM users WHERE id = \(after)")
            guard let row = cursor.first else { throw AdminError.invalidRequest("after names no user; pass the nextAfter of the previous page.") }
            let createdAt: Date = try row.decode("created_at")
            query.append(" AND (u.created_at, u.id) > (\(createdAt)::timestamptz, \(after))")
        }
        query.append(" ORDER BY u.created_at, u.id LIMIT \(limit + 1)")
        let users = try await database.query(query).map { row in
            UserSummary(
                id: try row.decode("id"), email: try row.decode("email", openedWith: seal), displayName: try row.decode("display_name", openedWith: seal),
                disabled: try row.decode("disabled"), createdAt: try row.decode("created_at"),
                lastSignInAt: try row.decode("last_sign_in_at"),
                providers: (try row.decode("providers", as: String?.self) ?? "").split(separator: ",").map(String.init))
        }
        let page = Array(users.prefix(limit))
        return (page, users.count > limit ? page.last?.id : nil)
    }

    /// The user with identities, factors and recent sessions: `{"user", "erasedAt", "validSince", "sessions",
    /// "activeSessionCount", "factors"}` (`erasedAt` null but for an erased user, whom no action changes any more).
    public func detail(_ id: UUID) async throws -> JSONValue {
        let user = try await UserBody.load(id, from: database).shownToAdmins
        let seal = try await database.readModelSeal()
        let extra = try await database.query("""
            SELECT valid_since, erased_at,
                   (SELECT count(*) FROM sessions s WHERE s.user_id = u.id AND s.ended_at IS NULL) AS active_sessions
            FROM users u WHERE u.id = \(id)
            """)
        let sessions = try await database.query("""
            SELECT id, started_at, auth_time, amr, jkt IS NOT NULL AS bound, generation, last_refreshed_at, ended_at, end_reason
            FROM sessions WHERE user_id = \(id) ORDER BY started_at DESC, id LIMIT \(Self.sessionsShown)
            """)
        let factors = try await database.query("""
            SELECT id, type, display_name, phone_hint, enrolled_at, confirmed_at FROM mfa_factors
            WHERE user_id = \(id) AND confirmed_at IS NOT NULL ORDER BY enrolled_at, id
            """)
        return [
            "user": try user.jsonValue,
            "erasedAt": Self.time(try extra.first?.decode("erased_at", as: Date?.self) ?? nil),
            "validSince": Self.time(try extra.first?.decode("valid_since", as: Date?.self) ?? nil),
            "activeSessionCount": .int(try extra.first?.decode("active_sessions") ?? 0),
            "sessions": .array(try sessions.map { row in
                [
                    "id": .string((try row.decode("id") as UUID).lowercasedText),
                    "startedAt": try Self.time(row.decode("started_at")),
                    "authTime": try Self.time(row.decode("auth_time")),
                    "amr": try JSONDecoder().decode(JSONValue.self, from: row.decode("amr", as: PostgresJSON.self).data),
                    "dpopBound": .bool(try row.decode("bound")),
                    "generation": .int(try row.decode("generation")),
                    "lastRefreshedAt": try Self.time(row.decode("last_refreshed_at")),
                    "endedAt": try Self.time(row.decode("ended_at")),
                    "endReason": (try row.decode("end_reason", as: String?.self)).map(JSONValue.string) ?? .null,
                    "active": .bool(try row.decode("ended_at", as: Date?.self) == nil),
                ]
            }),
            "factors": .array(try factors.map { row in
                [
                    "id": .string((try row.decode("id") as UUID).lowercasedText),
                    "type": .string(try row.decode("type")),
                    "displayName": (try row.decode("display_name", openedWith: seal)).map(JSONValue.string) ?? .null,
                    "phoneHint": (try row.decode("phone_hint", openedWith: seal)).map(JSONValue.string) ?? .null,
                    "enrolledAt": try Self.time(row.decode("enrolled_at")),
                    "confirmedAt": try Self.time(row.decode("confirmed_at")),
                ]
            }),
        ]
    }

    /// Whether a user row exists (an erased user's history can outlive it).
    public func exists(_ id: UUID) async throws -> Bool {
        try await !database.query("SELECT 1 FROM users WHERE id = \(id)").isEmpty
    }

    /// Whether `id` is a user's, now or before an erasure: a user row, or events in the user's own stream.
    public func knows(_ id: UUID) async throws -> Bool {
        try await !database.query(Self.knownStatement(id)).isEmpty
    }

    /// The statement whose rows are not empty exactly when ``knows(_:)``. The admin keys' records of requests
    /// about an id (a support reader's 404 included) are not the user's events: they never make an id known,
    /// or a mistyped id would answer 404 once and 200 ever after.
    public static func knownStatement(_ id: UUID) -> PostgresQuery {
        """
        SELECT 1 FROM users WHERE id = \(id)
        UNION ALL SELECT 1 FROM (SELECT 1 FROM events WHERE stream = \(StreamName.user(id).rawValue) LIMIT 1) AS own
        """
    }

    private static func time(_ date: Date?) -> JSONValue {
        date.map { .string(ISO8601Milliseconds.format($0)) } ?? .null
    }
}
