import Foundation
import TetherCore
import TetherHTTP

/// What the Parse JavaScript SDK sends, and what a browser asks first (Parse Server's `allowCrossDomain`
/// and `allowMethodOverride`, and its `handleParseHeaders` reading keys from the body).
///
/// The JS SDK sends every request as a `POST` with `Content-Type: text/plain` (a request a browser sends
/// without a preflight): the application id, keys and session token ride in the body as `_ApplicationId`,
/// `_JavaScriptKey`, `_SessionToken`, … and any other method as `_method`. Those members become the headers
/// the other SDKs send, and the request goes to the route of its method. Every answer under `/parse`
/// allows any origin: Parse's credentials are headers and bodies, never cookies.
extension ParseRoutes {
    /// Parse Server's `allowCrossDomain`: any origin, the headers its SDKs send, a preflight answered 200.
    static let crossOrigin = CrossOriginPolicy(
        allowedMethods: "GET,PUT,POST,DELETE,OPTIONS",
        allowedHeaders: .list("""
            X-Parse-Master-Key, X-Parse-REST-API-Key, X-Parse-Javascript-Key, X-Parse-Client-Key, X-Parse-Application-Id, X-Parse-Client-Version, \
            X-Parse-Session-Token, X-Requested-With, X-Parse-Revocable-Session, X-Parse-Request-Id, X-Parse-Installation-Id, \
            Content-Type, Pragma, Cache-Control
            """),
        exposedHeaders: "X-Parse-Job-Status-Id, X-Parse-Push-Status-Id")

    /// The body members the JS SDK sends in place of headers, and the header each stands for.
    static let envelopeMembers: [(member: String, header: String)] = [
        ("_ApplicationId", "X-Parse-Application-Id"), ("_JavaScriptKey", "X-Parse-Javascript-Key"), ("_ClientKey", "X-Parse-Client-Key"),
        ("_MasterKey", "X-Parse-Master-Key"), ("_SessionToken", "X-Parse-Session-Token"), ("_InstallationId", "X-Parse-Installation-Id"),
        ("_RevocableSession", "X-Parse-Revocable-Session"), ("_ClientVersion", "X-Parse-Client-Version"), ("_RequestId", "X-Parse-Request-Id"),
    ]

    /// Members of the envelope that say nothing Tether uses.
    static let ignoredEnvelopeMembers: Set<String> = ["_ContentType", "_context"]

    /// `request` with the JS SDK's envelope taken out of its body: its members as headers (a header the
    /// request carries wins), the rest of the body as JSON, and the method `_method` names, if any. A request
    /// that is not a `POST` of a JSON object with such members is answered as it is.
    static func unwrappingEnvelope(_ request: HTTPRequest) -> (request: HTTPRequest, method: String?) {
        // Only a body with a member named `_…` is parsed here (a token's base64url holds `_` too, never `"_`).
        guard request.method == "POST", request.body.indices.dropLast().contains(where: {
                  request.body[$0] == UInt8(ascii: "\"") && request.body[$0 + 1] == UInt8(ascii: "_")
              }),
              case .object(var members)? = try? CompactJSONDecoder(refusesDuplicateNames: true).decode(JSONValue.self, from: request.body)
        else { return (request, nil) }
        var unwrapped = request
        var found = false
        for (member, header) in envelopeMembers {
            guard let value = members.removeValue(forKey: member) else { continue }
            found = true
            let text: String? = switch value {
            case .string(let text): text
            case .bool(let flag): flag ? "1" : "0"
            default: nil
            }
            if let text, unwrapped.headers[header] == nil { unwrapped.headers.add(name: header, value: text) }
        }
        var method: String?
        if case .string(let named)? = members.removeValue(forKey: "_method") {
            method = named.uppercased()
            found = true
        }
        guard found else { return (request, nil) }
        for member in ignoredEnvelopeMembers { members[member] = nil }
        unwrapped.body = (try? JSONValue.object(members).jsonBytes()) ?? Array("{}".utf8)
        unwrapped.headers.replaceOrAdd(name: "Content-Type", value: "application/json")
        return (unwrapped, method)
    }

    /// Every route of `parse` registered on `router` as a browser and the JS SDK need it: the envelope taken
    /// out of each request, a `POST` that names another method sent to that method's route, an `OPTIONS`
    /// answered for each path, and every answer allowing any origin. The pages under `/parse/apps/` are
    /// registered as they are.
    static func registerForBrowsers(_ parse: Router, on router: inout Router) {
        var handlers: [String: [String: HTTPHandler]] = [:]
        _ = parse.wrappingHandlers { method, pattern, handler in
            handlers[pattern, default: [:]][method] = handler
            return handler
        }
        for (pattern, byMethod) in handlers {
            // The reset and verification pages are pages a browser opens, not calls of an SDK.
            guard !pattern.hasPrefix("/parse/apps/") else {
                for (method, handler) in byMethod { router.add(method, pattern, handler) }
                continue
            }
            let table = byMethod
            for (method, handler) in byMethod where method != "POST" {
                router.add(method, pattern) { request in crossOrigin.allowing(try await handler(request)) }
            }
            router.post(pattern) { request in
                let (unwrapped, named) = unwrappingEnvelope(request)
                // The method `_method` names, or the POST itself; never the POST in place of a method the path lacks.
                guard let handler = table[named ?? "POST"] else {
                    throw Problem.methodNotAllowed(allowed: (table.keys + ["OPTIONS"]).sorted())
                }
                var routed = unwrapped
                routed.method = named ?? "POST"
                return crossOrigin.allowing(try await handler(routed))
            }
            router.add("OPTIONS", pattern) { request in crossOrigin.preflight(request) }
        }
    }
}
