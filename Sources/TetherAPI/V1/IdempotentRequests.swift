import Foundation
import TetherCore
import TetherCrypto
import TetherHTTP
import TetherPostgres

/// Gives a retried request (same `Idempotency-Key`) the first answer back, and changes nothing.
///
/// The stored answer is the only thing that recognises a retry: every request is
/// a new command with a random id, so a key that comes back after its answer
/// expired (or after a 5xx) is simply a new request, never the first one's
/// command again. The answer is sealed with AES-GCM under a key derived from
/// the key *and* the request body: the database holds no usable token, and
/// only the same request can open the answer. A second hash of the same inputs
/// (under another label) tells a true retry from a different request reusing
/// the key, which is refused with 422; a retry while the first request is
/// still running gets 409. Answers to client mistakes are kept like successes;
/// server failures, 429 and 503 are not, so a retry runs the request again.
struct IdempotentRequests: Sendable {
    let database: PostgresClient
    /// How long an answer is kept.
    static let lifetime = "24 hours"
    /// After this long a request still marked as running is taken to have died with its process.
    static let abandonedAfter = "60 seconds"
    /// How long an answer that hands a session to a caller who had none (a sign-in, a refresh, a Parse log-in) is
    /// replayed: long enough for a client's retry of an answer it lost, short beside a day, so that a captured
    /// request with its key is no credential (a spent nonce or a rotated refresh token refuses its rerun).
    static let sessionReplayWindow = "10 minutes"
    static let replayHeader = "Idempotent-Replayed"
    /// Headers of the first answer that a replay repeats (none of them carries a secret).
    static let keptHeaders = ["Retry-After", "WWW-Authenticate", "Location"]

    /// Runs `handler` once per key; a retry with the key gets the stored answer.
    ///
    /// - Parameters:
    ///   - principal: the caller: the session of a signed-in user (so a stored answer, which may carry a
    ///     secret such as recovery codes, is only ever replayed to the session that asked), or the admin key;
    ///     nil for sign-in and refresh, whose body carries the credential.
    ///   - subject: the user the answer is about when the principal is no session of theirs (an admin's
    ///     action): the answer is theirs, and goes when they are erased.
    ///   - proofKey: the key thumbprint of the request's DPoP proof, verified (nil without one): asked only when a kept
    ///     answer hands out a session bound to a key, which is given again only to a fresh proof by that key
    ///     (RFC 9449 §5), as the request itself would need; without it, such an answer is not given again.
    func respond(
        to request: HTTPRequest, principal: UUID?, subject: UUID? = nil, proofKey: (() async throws -> String?)? = nil,
        _ handler: () async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        guard let key = request.headers["idempotency-key"] else { return try await handler() }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw AccountError.invalidRequest("Idempotency-Key must be 1 to 255 visible ASCII characters.")
        }
        let derived = Derived(request: request, principal: principal, key: key)
        // An answer that opened or rotated a session is replayed only while its refresh token is still the
        // session's: once the client refreshed past it, or the session ended, the answer is dropped and the
        // request runs again as a new one, claimed and kept like any, so a used refresh token is refused as
        // reuse whatever key comes with it. A retry that claimed the key first answers for both.
        if let stored = try await reserve(derived, subject: subject) {
            let kept = try stored.get()
            if kept.mayReplay, case .current(let boundTo) = try await Self.keptSession(kept.response, in: database) {
                // Refused, not run again: the request's refresh token is spent, and running it would end the session as reuse.
                if let boundTo, try await proofKey?() != boundTo { throw AccountError.invalidDPoPProof }
                return kept.response
            }
            try await discard(derived)
            if let claimedFirst = try await reserve(derived, subject: subject) { return try claimedFirst.get().response }
        }
        do {
            let response = try await handler()
            await keep(response, for: derived)
            return response
        } catch {
            if let problem = Self.keptProblem(for: error) {
                await keep(problem.response(), for: derived)
            } else {
                try? await forget(derived)
            }
            throw error
        }
    }

    /// Runs `handler` once per `key` for a surface whose answers are already responses (Parse's
    /// `X-Parse-Request-Id`): answers below 500 (but 429) are kept and replayed; a retry while the
    /// first is still running waits for its answer, since the Parse SDKs report a 409 as a failure
    /// of a write that may have succeeded; a different request reusing the key gets `conflict`, and so
    /// does a retry of a log-in past ``sessionReplayWindow`` (Parse Server's answer to any repeat).
    ///
    /// A kept answer that `stillHolds` no longer (a session token it hands out has ended since) is dropped and the
    /// request runs again, as ``respond(to:principal:subject:_:)`` does with a session's refresh token: a disabled
    /// user's retried log-in must not be told it signed in, with a token that no longer works.
    func respondOnce(
        to request: HTTPRequest, key: String, principal: UUID?, conflict: () -> HTTPResponse,
        stillHolds: (HTTPResponse) async throws -> Bool = { _ in true }, _ handler: () async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        let derived = Derived(request: request, principal: principal, key: key)
        for _ in 0..<Self.waitsForRunningRequest {
            switch try await reserve(derived) {
            case nil:
                let response: HTTPResponse
                do {
                    response = try await handler()
                } catch {
                    try? await forget(derived)
                    throw error
                }
                if response.status < 500, response.status != 429 {
                    await keep(response, for: derived)
                } else {
                    try? await forget(derived)
                }
                return response
            case .success(let kept):
                guard kept.mayReplay else { return conflict() }
                if try await stillHolds(kept.response) { return kept.response }
                try await discard(derived)
            case .failure(let problem) where problem.code == "idempotency_key_reused":
                return conflict()
            case .failure(let problem) where problem.code == "idempotency_key_in_use":
                try await Task.sleep(for: .milliseconds(50))
            case .failure(let problem):
                throw problem
            }
        }
        throw Problem.serviceUnavailable(detail: "A request with this id is still being answered; retry shortly.")
    }

    /// Whether a kept answer may be given again for the session it hands out.
    enum KeptSession {
        /// It hands out none, or one whose refresh token is still the live session's current token (bound to the key
        /// of thumbprint `boundTo`, if any).
        case current(boundTo: String?)
        /// The session has ended, or been refreshed past the answer's token.
        case movedOn
    }

    /// What `response` hands out (`session.refreshToken`), as ``KeptSession`` says.
    static func keptSession(_ response: HTTPResponse, in database: PostgresClient) async throws -> KeptSession {
        guard (200..<300).contains(response.status), case .object(let session)? = members(of: response)?["session"],
              case .string(let refreshToken)? = session["refreshToken"]
        else { return .current(boundTo: nil) }
        let hash = RefreshTokens.hash(refreshToken)
        let rows = try await database.query("""
            SELECT s.jkt FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id
            WHERE r.token_hash = \(hash) AND s.refresh_token_hash = \(hash) AND s.ended_at IS NULL
            """)
        guard let row = rows.first else { return .movedOn }
        return .current(boundTo: try row.decode("jkt"))
    }

    /// How many times (50 ms apart) a retry waits for the first request of its key: 20 s, the most a request may run.
    static let waitsForRunningRequest = 400

    /// Drops a kept answer of `derived` that may no longer be replayed, so the request can claim its key again.
    /// Two stale retries racing can both get here; the second may then drop the first's new answer and run
    /// again (a window of one round trip, left as it is).
    private func discard(_ derived: Derived) async throws {
        _ = try await database.query("""
            DELETE FROM idempotent_responses WHERE scope = \(derived.scope) AND request_hash = \(derived.requestHash) AND status IS NOT NULL
            """)
    }

    /// Where the answer to `request` with `key` from `principal` is kept: a command that deletes a user's kept
    /// answers (an erasure) leaves its own request's claim, so that a retry gets the answer.
    static func scope(of request: HTTPRequest, principal: UUID?, key: String) -> String {
        Derived(request: request, principal: principal, key: key).scope
    }

    /// Drops the claim of a request whose answer is not kept, so its retry runs again.
    private func forget(_ derived: Derived) async throws {
        _ = try await database.query("DELETE FROM idempotent_responses WHERE scope = \(derived.scope) AND status IS NULL")
    }

    /// The values derived from one request: where its answer is kept, how it is matched and sealed.
    private struct Derived {
        let scope: String
        let requestHash: String
        let sealingKey: [UInt8]
        /// The caller's session (or admin key): a session names the user whose answer this is.
        let principal: UUID?

        init(request: HTTPRequest, principal: UUID?, key: String) {
            self.principal = principal
            let caller = principal?.lowercasedText ?? "-"
            // The target, query included: a request whose credentials ride in the query (Parse's
            // log-in by query) must never be answered with another request's answer.
            let parts = [request.method, request.target, caller, key]
            let body = Self.canonical(request.body)
            scope = Self.hash("scope", parts, body: []).hexString
            requestHash = Self.hash("match", parts, body: body).hexString
            sealingKey = Self.hash("seal", parts, body: body)
        }

        /// A JSON body with its members sorted, so that a client re-encoding the same request
        /// (members in another order, other spacing) is still recognised; other bodies as they are.
        private static func canonical(_ body: [UInt8]) -> [UInt8] {
            // A body naming a member twice is not canonical JSON: compared as its bytes, it matches only itself.
            guard !body.isEmpty, let value = try? CompactJSONDecoder(refusesDuplicateNames: true).decode(JSONValue.self, from: body) else { return body }
            // The bytes `JSONEncoder` wrote here with sorted keys and unescaped slashes, so hashes
            // stored before stay valid.
            return (try? value.jsonBytes()) ?? body
        }

        /// SHA-256 over a label, length-prefixed parts and the body, so no two inputs collide by concatenation.
        private static func hash(_ label: String, _ parts: [String], body: [UInt8]) -> [UInt8] {
            var input = Array("tether idempotency \(label)".utf8)
            for part in parts {
                input += Array("\(part.utf8.count):".utf8) + Array(part.utf8)
            }
            input += body
            return DigestAlgorithm.sha256.hash(input)
        }
    }

    /// Claims the key for this request, or answers with what an earlier request with the key got.
    ///
    /// - Returns: nil when this request is the first (the caller runs it); otherwise the
    ///   stored answer, or a thrown problem for a conflicting or still-running request.
    private func reserve(_ derived: Derived, subject: UUID? = nil) async throws -> Result<KeptAnswer, Problem>? {
        for _ in 0..<3 {
            let claimed = try await database.query("""
                INSERT INTO idempotent_responses (scope, request_hash, user_id)
                VALUES (\(derived.scope), \(derived.requestHash),
                        coalesce(\(subject)::uuid, (SELECT user_id FROM sessions WHERE id = \(derived.principal))))
                ON CONFLICT (scope) DO UPDATE SET request_hash = excluded.request_hash, status = NULL, content_type = NULL,
                    headers = NULL, body = NULL, user_id = excluded.user_id, created_at = now()
                WHERE idempotent_responses.created_at < now() - \(Self.lifetime)::interval
                   OR (idempotent_responses.status IS NULL AND idempotent_responses.created_at < now() - \(Self.abandonedAfter)::interval)
                RETURNING scope
                """)
            if !claimed.isEmpty { return nil }
            guard let stored = try await stored(derived) else { continue } // removed by a failed first attempt: claim again
            return stored
        }
        throw Problem.serviceUnavailable(detail: "The Idempotency-Key could not be claimed; retry shortly.")
    }

    /// What the table holds for `derived`: the answer, a problem (another request's key, or one still
    /// running), or nil when nothing is kept.
    private func stored(_ derived: Derived) async throws -> Result<KeptAnswer, Problem>? {
        let rows = try await database.query("""
            SELECT request_hash, status, content_type, headers, body,
                   created_at > now() - \(Self.sessionReplayWindow)::interval AS recent
            FROM idempotent_responses WHERE scope = \(derived.scope) AND created_at > now() - \(Self.lifetime)::interval
            """)
        guard let row = rows.first else { return nil }
        let requestHash: String = try row.decode("request_hash")
        guard ConstantTime.isEqual(Array(requestHash.utf8), Array(derived.requestHash.utf8)) else {
            return .failure(Problem(
                status: 422, code: "idempotency_key_reused", title: "Idempotency-Key reused",
                detail: "This Idempotency-Key was used for a different request; use a new key for a new request."))
        }
        guard let status: Int = try row.decode("status"), let sealed: [UInt8] = try row.decode("body") else {
            var problem = Problem(
                status: 409, code: "idempotency_key_in_use", title: "Request in progress",
                detail: "A request with this Idempotency-Key is still being answered; retry shortly.")
            problem.headers["Retry-After"] = "1"
            return .failure(problem)
        }
        let body = try AESGCM.open(try AESGCM.SealedBox(combined: sealed), key: derived.sealingKey,
                                   authenticating: Array(derived.scope.utf8))
        var headers: HTTPHeaders = [Self.replayHeader: "true"]
        if let contentType: String = try row.decode("content_type") { headers["Content-Type"] = contentType }
        if let kept = try row.decode("headers", as: PostgresJSON?.self) {
            for pair in try kept.decode([[String]].self) where pair.count == 2 {
                headers.add(name: pair[0], value: pair[1])
            }
        }
        return .success(KeptAnswer(response: HTTPResponse(status: status, headers: headers, body: body), isRecent: try row.decode("recent")))
    }

    /// An answer kept for retries, and whether it was given within ``sessionReplayWindow``.
    struct KeptAnswer {
        let response: HTTPResponse
        let isRecent: Bool

        /// Whether a retry may have it: an answer handing out a session only within the window, whoever asks (a
        /// captured request with its key is no credential, even when it came with a session: that session may
        /// have ended since, and a log-in sent with a live one hands out another).
        var mayReplay: Bool {
            isRecent || !IdempotentRequests.handsOutSession(response)
        }
    }

    /// Whether a successful answer carries a session's secret: `/v1`'s `session`, Parse's `sessionToken`,
    /// Firebase's `refreshToken`.
    static func handsOutSession(_ response: HTTPResponse) -> Bool {
        guard (200..<300).contains(response.status), let members = members(of: response) else { return false }
        return members["session"] != nil || members["sessionToken"] != nil || members["refreshToken"] != nil
    }

    /// What ``storedAnswer(to:key:principal:stillHolds:)`` found.
    enum StoredAnswer {
        /// The answer to replay.
        case answer(HTTPResponse)
        /// An answer handing out a session, given longer ago than ``sessionReplayWindow``: the request is a duplicate.
        case pastWindow
    }

    /// The kept answer of an earlier request with `key`, without claiming anything, while it may be replayed and
    /// `stillHolds` it: for a retry whose caller no longer holds a live session because the first request ended it
    /// (a Parse password change). Nil when nothing is kept, or what is kept does not hold.
    func storedAnswer(
        to request: HTTPRequest, key: String, principal: UUID?, stillHolds: (HTTPResponse) async throws -> Bool
    ) async throws -> StoredAnswer? {
        guard case .success(let kept)? = try await stored(Derived(request: request, principal: principal, key: key)) else { return nil }
        guard kept.mayReplay else { return .pastWindow }
        return try await stillHolds(kept.response) ? .answer(kept.response) : nil
    }

    /// What a retry gets when the request it repeats ended the session it came with (a sign-out): that request's
    /// kept answer, 409 while it is still being answered, nil when nothing is kept for it.
    func answerForEndedSession(to request: HTTPRequest, key: String, session: UUID) async throws -> HTTPResponse? {
        switch try await stored(Derived(request: request, principal: session, key: key)) {
        case .success(let kept)?: kept.response
        case .failure(let problem)? where problem.code == "idempotency_key_in_use": problem.response()
        default: nil
        }
    }

    /// Keeps the answer of a request that ran for its retries. What the request did has committed, so its answer
    /// goes to the client even when the copy cannot be kept: the key then stays claimed, and a retry gets 409
    /// until the claim counts as abandoned (``abandonedAfter``), rather than running the request a second time
    /// at once or the client being told that a change it made failed.
    private func keep(_ response: HTTPResponse, for derived: Derived) async {
        try? await store(response, for: derived)
    }

    private func store(_ response: HTTPResponse, for derived: Derived) async throws {
        let sealed = try AESGCM.seal(response.body, key: derived.sealingKey, authenticating: Array(derived.scope.utf8))
        let kept = Self.keptHeaders.flatMap { name in response.headers.values(for: name).map { [name, $0] } }
        // An answer that shows a user (a sign-in's, made before anyone was signed in) is theirs: it goes when they are erased.
        try await database.query("""
            UPDATE idempotent_responses SET status = \(response.status), content_type = \(response.headers["Content-Type"]),
                headers = \(try PostgresJSON(encoding: kept))::jsonb, body = \(sealed.combined),
                user_id = coalesce(user_id, \(Self.answeredUser(response))::uuid)
            WHERE scope = \(derived.scope) AND status IS NULL
            """)
    }

    /// The user an answer shows (`user.id`), if it shows one.
    static func answeredUser(_ response: HTTPResponse) -> UUID? {
        if let subject = response.subject { return subject }
        guard case .object(let user)? = members(of: response)?["user"], case .string(let id)? = user["id"] else { return nil }
        return UUID(text: id)
    }

    /// The members of an answer whose body is a JSON object.
    private static func members(of response: HTTPResponse) -> [String: JSONValue]? {
        guard case .object(let members)? = try? CompactJSONDecoder().decode(JSONValue.self, from: response.body) else { return nil }
        return members
    }

    /// Deletes up to `limit` answers past their lifetime (the server's housekeeping loop calls it, so
    /// no request pays for a sweep); answers how many went. An expired answer is never replayed
    /// before it goes: a key that comes back after its lifetime is a new request either way.
    static func sweepExpired(in database: PostgresClient, limit: Int = 1000) async throws -> Int {
        let rows = try await database.query("""
            DELETE FROM idempotent_responses WHERE scope IN (
                SELECT scope FROM idempotent_responses WHERE created_at < now() - \(Self.lifetime)::interval
                ORDER BY created_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            RETURNING 1 AS gone
            """)
        return rows.count
    }

    /// The problem a client mistake is answered with, which a retry gets again; nil for failures worth retrying,
    /// and for a refused DPoP proof: a proof is made for one request, and the retry comes with a new one.
    private static func keptProblem(for error: any Error) -> Problem? {
        let problem: Problem? = switch error {
        case let problem as Problem: problem
        case let convertible as any ProblemConvertible: convertible.problem
        default: nil
        }
        guard let problem, problem.status < 500, problem.status != 429, problem.status != 409 || problem.code != "idempotency_key_in_use",
              problem.code != TokenError.invalidDPoPProof.reason
        else { return nil }
        return problem
    }
}
