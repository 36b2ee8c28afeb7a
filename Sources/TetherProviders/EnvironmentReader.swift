import Foundation
import TetherCore

/// Reads and checks provider variables, failing with one line that names the variable.
struct EnvironmentReader {
    private let environment: [String: String]

    init(_ environment: [String: String]) {
        self.environment = environment
    }

    /// The trimmed value, or nil when unset or blank.
    func value(_ name: String) -> String? {
        guard let text = environment[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty else { return nil }
        return text
    }

    /// A comma-separated list; set but without any entry is an error, not "disabled".
    func list(_ name: String) throws(ProvidersConfiguration.Invalid) -> [String]? {
        guard let text = environment[name] else { return nil }
        let entries = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !entries.isEmpty else {
            throw ProvidersConfiguration.Invalid(name, "empty list; give comma-separated ids, or unset it to disable the provider")
        }
        guard entries.allSatisfy({ !$0.contains(where: \.isWhitespace) }) else {
            throw ProvidersConfiguration.Invalid(name, "ids must not contain spaces")
        }
        return entries
    }

    /// An `https` URL, or `http` on loopback (tests and the dev identity provider).
    ///
    /// Plain `http` elsewhere would let anyone on the path swap the keys that
    /// decide who may sign in, or read the Facebook app secret.
    func url(_ name: String) throws(ProvidersConfiguration.Invalid) -> URL? {
        guard let text = value(name) else { return nil }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = url.host, !host.isEmpty else {
            throw ProvidersConfiguration.Invalid(name, "not an http(s) URL")
        }
        guard url.hasUsablePort else {
            throw ProvidersConfiguration.Invalid(name, "the port must be from 1 to 65535")
        }
        guard scheme == "https" || Self.isLoopback(host) else {
            throw ProvidersConfiguration.Invalid(name, "must be https (plain http only on loopback)")
        }
        return url
    }

    /// An issuer identifier: any non-blank text without spaces (compared exactly with `iss`).
    func issuer(_ name: String) throws(ProvidersConfiguration.Invalid) -> String? {
        guard let text = value(name) else { return nil }
        guard !text.contains(where: \.isWhitespace) else { throw ProvidersConfiguration.Invalid(name, "must not contain spaces") }
        return text
    }

    /// A secret: unset means none, but set and blank is a mistake worth stopping for.
    func secret(_ name: String) throws(ProvidersConfiguration.Invalid) -> String? {
        guard environment[name] != nil else { return nil }
        guard let value = value(name) else { throw ProvidersConfiguration.Invalid(name, "empty; unset it or give the secret") }
        return value
    }

    /// `<prefix>_CLIENT_IDS`, `<prefix>_JWKS_URL` and `<prefix>_ISSUER` over `defaults`.
    func tokenIssuer(
        _ prefix: String, defaults: ProvidersConfiguration.TokenIssuer
    ) throws(ProvidersConfiguration.Invalid) -> ProvidersConfiguration.TokenIssuer {
        ProvidersConfiguration.TokenIssuer(
            clientIDs: try list("\(prefix)_CLIENT_IDS") ?? defaults.clientIDs,
            jwksURL: try url("\(prefix)_JWKS_URL") ?? defaults.jwksURL,
            issuer: try issuer("\(prefix)_ISSUER") ?? defaults.issuer, maximumTokenAge: defaults.maximumTokenAge)
    }

    /// The loopback hosts ``JWKSCache`` also accepts plain `http` for, so the two never disagree.
    static func isLoopback(_ host: String) -> Bool {
        ["127.0.0.1", "::1", "[::1]", "localhost"].contains(host.lowercased())
    }
}
