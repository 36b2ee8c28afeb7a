/// Counts the requests every route answers, by method, route pattern and status.
///
/// The route is the pattern as registered (`/v1/admin/users/{id}`), never the raw
/// path, so the number of series stays bounded. Requests that match no route
/// (404, 405) and answers the server gives itself (413, deadline 503) are not counted.
public struct RequestMetrics: Sendable {
    /// `tether_http_requests_total{method, route, status}`.
    public let requests: Counter

    /// Registers the counter in `registry`.
    public init(registry: MetricsRegistry) {
        requests = registry.counter(
            "tether_http_requests_total", help: "HTTP requests answered, by method, route pattern and status.",
            labels: ["method", "route", "status"])
    }

    /// `router` with every handler counted; a thrown error counts under the status it is answered with.
    public func instrument(_ router: Router) -> Router {
        router.wrappingHandlers { [requests] method, pattern, handler in
            { request in
                do {
                    let response = try await handler(request)
                    requests.increment(method, pattern, String(response.status))
                    return response
                } catch {
                    requests.increment(method, pattern, String(Problem(converting: error)?.status ?? 500))
                    throw error
                }
            }
        }
    }
}
