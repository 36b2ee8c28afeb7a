import TetherHTTP
import TetherJOSE

/// Adds `GET <path>` (`/.well-known/jwks.json` by default): the public keys that verify the tokens `keys`
/// signs (Tether's access tokens; Firebase ID tokens at `/.well-known/firebase-jwks.json`).
///
/// Cached by clients for five minutes; the key store publishes a successor
/// longer than that before it signs, so a cached set never misses a live key.
public func registerJWKSRoute(on router: inout Router, keys: SigningKeyStore, path: String = "/.well-known/jwks.json") {
    router.get(path) { _ in
        let document = try await keys.publishedKeys().publicJSONObject()
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/json", "Cache-Control": "public, max-age=300"],
                            body: document.jsonBytes)
    }
}
