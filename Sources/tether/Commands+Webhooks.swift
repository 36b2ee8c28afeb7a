import Foundation
import TetherAPI
import TetherCore
import TetherPostgres

/// `tether webhooks`: the subscriptions that push the public event feed, on the database directly.
extension Commands {
    static func webhooks(_ arguments: [String]) async throws {
        let options = try Arguments(arguments, valueFlags: ["config", "url", "events", "from"], switchFlags: ["json", "no-personal"])
        let actions = "create, list, disable, enable, delete, rotate-secret or replay"
        guard let action = options.positionals.first else { throw UsageError("tether webhooks needs an action: \(actions)") }
        guard ["create", "list", "disable", "enable", "delete", "rotate-secret", "replay"].contains(action) else {
            throw UsageError("unknown action \"\(action)\" (\(actions))")
        }
        if ["create", "list"].contains(action), options.positionals.count > 1 {
            throw UsageError("tether webhooks \(action) takes no arguments besides its options")
        }
        let taken: [String: Set<String>] = ["create": ["url", "events", "from", "no-personal"], "list": ["json"], "replay": ["from"]]
        try options.refusingOptions(but: taken[action] ?? [], of: "tether webhooks \(action)")
        // Everything the call says is checked before the database is opened: a mistake is a usage error (2) whatever
        // the database's state.
        var id = UUID.random()
        if !["create", "list"].contains(action) {
            guard options.positionals.count == 2 else {
                throw UsageError("tether webhooks \(action) needs one subscription id (see tether webhooks list)")
            }
            guard let given = UUID(text: options.positionals[1]) else {
                throw UsageError("\"\(options.positionals[1])\" is not a subscription id: tether webhooks list shows them")
            }
            id = given
        }
        var start = WebhookStore.Start.now
        switch action {
        case "create":
            guard options["url"] != nil else { throw UsageError("tether webhooks create needs --url URL") }
            guard let parsed = WebhookStore.Start(parsing: options["from"] ?? "now") else {
                throw UsageError("--from takes now, start or a cursor (the event feed's nextAfter)")
            }
            start = parsed
        case "replay":
            guard let text = options["from"], text != "now", let parsed = WebhookStore.Start(parsing: text) else {
                throw UsageError("tether webhooks replay needs --from start or --from CURSOR")
            }
            start = parsed
        default:
            break
        }
        let configuration = try loadConfiguration(options)
        let policy = WebhookTargetPolicy(allowsHTTP: configuration.webhookAllowsHTTP, allowedHosts: configuration.webhookAllowedHosts)
        func found(_ subscription: WebhookSubscription?, _ id: UUID) throws -> WebhookSubscription {
            guard let subscription else { throw CommandFailure("no webhook subscription has the id \(id.lowercasedText)") }
            return subscription
        }
        // Every action but delete writes or reads a subscription's secret (an enable or disable answers the subscription,
        // secret and all, after its change): the key that wraps it is checked before anything changes.
        try await withDatabase(options, for: "tether webhooks", storingSecrets: action != "delete") { database in
            let store = WebhookStore(database: database, policy: policy)
            switch action {
            case "create":
                let events = (options["events"] ?? "*").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                do {
                    let (made, secret) = try await store.create(url: options["url"] ?? "", eventTypes: events, personal: !options.has("no-personal"), from: start)
                    print("created webhook \(made.id.lowercasedText) to \(made.url) for \(made.eventTypes.joined(separator: ",")) from \(made.cursor)")
                    print("store its signing secret now: it is shown this once")
                    print(secret)
                    try await requireShown("webhook \(made.id.lowercasedText)", undoneBy: "deleted") { _ = try await store.delete(made.id) }
                } catch let refusal as WebhookStore.Refusal {
                    throw CommandFailure(refusal.description)
                }
            case "list":
                let subscriptions = try await store.list()
                if options.has("json") {
                    print(try jsonText(JSONValue.array(subscriptions.map(\.json))))
                } else {
                    print(WebhookTable.render(subscriptions), terminator: "")
                }
            case "disable", "enable":
                let changed = try found(try await store.setEnabled(action == "enable", id), id)
                print("webhook \(id.lowercasedText) is \(changed.status.rawValue)")
            case "delete":
                guard try await store.delete(id) else { throw CommandFailure("no webhook subscription has the id \(id.lowercasedText)") }
                print("deleted webhook \(id.lowercasedText) and its delivery records")
            case "rotate-secret":
                guard let (secret, _) = try await store.rotateSecret(id) else {
                    throw CommandFailure("no webhook subscription has the id \(id.lowercasedText)")
                }
                print("the old secret of webhook \(id.lowercasedText) signs too for 24 h; store the new one now:")
                print(secret)
                // The rotation stands (the old secret keeps signing for its 24 h): the operator rotates again.
                if let failure = standardOutputFailure() {
                    throw CommandFailure("\(failure); webhook \(id.lowercasedText)'s secret was rotated but nobody saw the new one: rotate it again")
                }
            case "replay":
                let cursor: EventFeed.Cursor = if case .cursor(let cursor) = start { cursor } else { EventFeed.Cursor(.start) }
                let changed: WebhookSubscription
                do {
                    changed = try found(try await store.replay(id, from: cursor), id)
                } catch let refusal as WebhookStore.Refusal {
                    throw CommandFailure(refusal.description)
                }
                if changed.status == .disabled {
                    print("webhook \(id.lowercasedText) will deliver again from \(changed.cursor) once enabled: it is disabled (tether webhooks enable ID)")
                } else {
                    print("webhook \(id.lowercasedText) delivers again from \(changed.cursor)")
                }
            default:
                throw UsageError("unknown action \"\(action)\" (\(actions))")
            }
        }
    }
}
