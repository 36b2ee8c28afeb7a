import TetherHTTP
import TetherJOSE

/// Adds `GET /.well-known/jwks.json`: the public keys that verify Tether's access tokens.
///
/// Cached by clients for five minutes; the key store publishes a successor
/// longer than that before it signs, so a cached set never misses a live key.
public func registerJWKSRoute(on router: inout Router, keys: SigningKeyStore) {
    router.get("/.well-known/jwks.json") { _ in
        let document = try await keys.publishedKeys().publicJSONObject()
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/json", "Cache-Control": "public, max-age=300"],
                            body: document.jsonBytes)
    }
}
