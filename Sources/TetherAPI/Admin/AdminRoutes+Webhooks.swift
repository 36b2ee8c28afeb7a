import Foundation
import TetherCore
import TetherHTTP

/// `/v1/admin/webhooks` (role admin): the subscriptions that push the public event feed to backends.
/// Each request is recorded in the admin key's stream (`AdminActionRequested`, action `webhooks.<what>`).
extension AdminRoutes {
    private struct CreateBody: Decodable {
        var url: String
        var events: [String]?
        var personal: Bool?
        var from: String?

        init(from decoder: any Decoder) throws {
            let members = try BodyMember.members(of: decoder, only: ["url", "events", "personal", "from"], of: "a webhook")
            url = try members.decode(String.self, forKey: BodyMember("url"))
            events = try members.decodeIfPresent([String].self, forKey: BodyMember("events"))
            personal = try members.decodeIfPresent(Bool.self, forKey: BodyMember("personal"))
            from = try members.decodeIfPresent(String.self, forKey: BodyMember("from"))
        }
    }

    private struct ReplayBody: Decodable {
        var from: String

        init(from decoder: any Decoder) throws {
            from = try BodyMember.members(of: decoder, only: ["from"], of: "a replay").decode(String.self, forKey: BodyMember("from"))
        }
    }

    func registerWebhooks(on router: inout Router, webhooks: WebhookStore) {
        router.get("/v1/admin/webhooks") { request in
            try await webhookAction("list", request) { _ in
                try HTTPResponse.json(["webhooks": .array(try await webhooks.list().map(\.json))] as JSONValue)
            }
        }
        router.post("/v1/admin/webhooks") { request in
            try await webhookAction("create", request, takesBody: true) { _ in
                let body = try request.decodeJSON(CreateBody.self)
                guard let start = WebhookStore.Start(parsing: body.from ?? "now") else {
                    throw AdminError.invalidRequest("from takes now, start or a cursor (the feed's nextAfter).")
                }
                do {
                    let (made, secret) = try await webhooks.create(
                        url: body.url, eventTypes: body.events ?? ["*"], personal: body.personal ?? true, from: start)
                    return try HTTPResponse.json(["webhook": made.json, "secret": .string(secret)] as JSONValue, status: 201)
                } catch let refusal as WebhookStore.Refusal {
                    throw AdminError.invalidRequest(refusal.description)
                }
            }
        }
        router.get("/v1/admin/webhooks/{id}") { request in
            try await webhookAction("get", request) { id in
                try HTTPResponse.json(["webhook": try Self.found(try await webhooks.subscription(id)).json] as JSONValue)
            }
        }
        router.delete("/v1/admin/webhooks/{id}") { request in
            try await webhookAction("delete", request) { id in
                guard try await webhooks.delete(id) else { throw Self.noSuchWebhook }
                return .noContent()
            }
        }
        for (action, enabled) in [("disable", false), ("enable", true)] {
            router.post("/v1/admin/webhooks/{id}/\(action)") { request in
                try await webhookAction(action, request) { id in
                    try HTTPResponse.json(["webhook": try Self.found(try await webhooks.setEnabled(enabled, id)).json] as JSONValue)
                }
            }
        }
        router.post("/v1/admin/webhooks/{id}/rotate-secret") { request in
            try await webhookAction("rotate-secret", request) { id in
                guard let (secret, rotated) = try await webhooks.rotateSecret(id) else { throw Self.noSuchWebhook }
                return try HTTPResponse.json(["secret": .string(secret), "webhook": rotated.json] as JSONValue)
            }
        }
        router.post("/v1/admin/webhooks/{id}/replay") { request in
            try await webhookAction("replay", request, takesBody: true) { id in
                let body = try request.decodeJSON(ReplayBody.self)
                guard let cursor = WebhookStore.Start(parsing: body.from).map({ start -> EventFeed.Cursor in
                    if case .cursor(let cursor) = start { return cursor }
                    return EventFeed.Cursor(.start)
                }), body.from != "now" else {
                    throw AdminError.invalidRequest("from takes start or a cursor (the feed's nextAfter).")
                }
                do {
                    return try HTTPResponse.json(["webhook": try Self.found(try await webhooks.replay(id, from: cursor)).json] as JSONValue)
                } catch let refusal as WebhookStore.Refusal {
                    throw AdminError.invalidRequest(refusal.description)
                }
            }
        }
        router.get("/v1/admin/webhooks/{id}/deliveries") { request in
            try await webhookAction("deliveries", request, accepting: ["limit"]) { id in
                let query = try AdminQuery(request, accepting: ["limit"])
                let limit = try query.limit(standard: 100, maximum: 500)
                _ = try Self.found(try await webhooks.subscription(id))
                return try HTTPResponse.json(["deliveries": .array(try await webhooks.deliveries(id, limit: limit).map(\.json))] as JSONValue)
            }
        }
    }

    /// Runs a webhook route for an admin key, refusing query parameters but `accepting` and, unless it `takesBody`,
    /// a body other than `{}` (so that a body meant for another route, or none at all, does not pass for a bodiless
    /// change), and records it with its status.
    private func webhookAction(
        _ action: String, _ request: HTTPRequest, accepting: Set<String> = [], takesBody: Bool = false,
        _ body: @escaping (UUID) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        let record = { (status: Int) in
            AdminEvent.actionRequested(.init(userId: nil, action: "webhooks." + action, reason: request.pathParameters["id"], status: status))
        }
        let reads: Set<String> = ["list", "get", "deliveries"]
        let run = {
            try await audited(request, requires: .admin, failure: record, changesState: !reads.contains(action)) { _ in
                _ = try AdminQuery(request, accepting: accepting)
                if !takesBody, !request.body.isEmpty { _ = try request.decodeJSON(NoBody.self) }
                var id = UUID.random()
                if let text = request.pathParameters["id"] {
                    guard let parsed = UUID(text: text) else { throw AdminError.invalidRequest("'\(text)' is not a webhook id (a UUID).") }
                    id = parsed
                }
                let response = try await body(id)
                return (response, record(response.status))
            }
        }
        guard !reads.contains(action), request.headers["idempotency-key"] != nil else { return try await run() }
        // A retried change gets its first answer (a new subscription's secret included, to the key that made it)
        // instead of a second subscription or a second rotation.
        return try await once(request) { try await run() }
    }

    private static var noSuchWebhook: Problem { .notFound(detail: "No webhook subscription has this id.") }

    /// The body of a route that takes none, when one is sent: `{}`, nothing more.
    private struct NoBody: Decodable {
        init(from decoder: any Decoder) throws {
            _ = try BodyMember.members(of: decoder, only: [], of: "this route")
        }
    }

    private static func found(_ subscription: WebhookSubscription?) throws -> WebhookSubscription {
        guard let subscription else { throw noSuchWebhook }
        return subscription
    }
}
