import Foundation
import TetherCore
import TetherProviders

/// The `authData` member of a Parse request: per provider, an object of strings, or `null` to unlink.
///
/// The Parse SDKs decode authData as `[String: [String: String]?]`, so anything else (numbers, nested
/// objects) is refused before a provider is asked. `mfa` is not a provider: it carries second-factor
/// enrolments and codes, and is read apart.
struct ParseAuthData: Sendable {
    /// A provider's entry: its fields, or nil when the request unlinks it.
    struct Entry: Sendable {
        var provider: String
        var fields: [String: String]?
    }

    var entries: [Entry]
    /// `authData.mfa`, when present and not null.
    var mfa: [String: String]?
    /// `"mfa": null`: every second factor is to be removed.
    var removesMFA = false

    init(_ value: JSONValue) throws(ParseError) {
        guard case .object(let members) = value else { throw ParseError.unsupported }
        var entries: [Entry] = []
        var mfa: [String: String]?
        for (provider, member) in members.sorted(by: { $0.key < $1.key }) {
            let fields: [String: String]?
            switch member {
            case .null:
                fields = nil
            case .object(let inner):
                var strings: [String: String] = [:]
                for (name, field) in inner {
                    guard case .string(let text) = field else {
                        throw ParseError(ParseError.invalidJSON, "authData.\(provider).\(name) must be a string.")
                    }
                    guard text.utf8.count <= ProviderCredential.maximumFieldLength else {
                        throw ParseError(ParseError.invalidJSON, "authData.\(provider).\(name) is too long.")
                    }
                    strings[name] = text
                }
                fields = strings
            default:
                throw ParseError(ParseError.invalidJSON, "authData.\(provider) must be an object of strings, or null.")
            }
            if provider == "mfa" {
                removesMFA = fields == nil
                // The SDKs echo what reads show, `{"status": "enabled"}`: that changes nothing.
                mfa = fields.flatMap { Set($0.keys) == ["status"] ? nil : $0 }
            } else {
                entries.append(Entry(provider: provider, fields: fields))
            }
        }
        self.entries = entries
        self.mfa = mfa
    }

    /// The entries that name an identity (`id` present), as the credential each stands for. Beside one that does
    /// (or a `null`), an entry without its `id` is refused as its provider's credential (101; an unknown provider's,
    /// 252), as Parse Server's adapters refuse it: every provider named is verified, never passed over. Alone, it
    /// names nothing, which the surface answers 252 (WIRE-FACTS §1a).
    var identities: [ClaimedIdentity] {
        get throws(ParseError) {
            let namesSome = entries.contains { $0.fields.map { !($0["id"] ?? "").isEmpty } ?? true }
            var claimed: [ClaimedIdentity] = []
            for entry in entries {
                guard let fields = entry.fields else { continue }
                guard let id = fields["id"], !id.isEmpty else {
                    guard namesSome else { continue }
                    _ = try Self.credential(entry.provider, fields)  // an unknown provider is 252 whatever it holds
                    throw ParseError.refusedCredential(provider: entry.provider)
                }
                claimed.append(ClaimedIdentity(provider: entry.provider, id: id, credential: try Self.credential(entry.provider, fields)))
            }
            return claimed
        }
    }

    /// The credential of one provider's fields, in Parse's names: Apple `{id, token, code?}`, Facebook
    /// `{id, access_token}` (classic) or `{id, token}` (Limited Login), Google `{id, id_token}`,
    /// anonymous `{id}`. An optional `nonce` is the raw nonce of a token that carries one.
    static func credential(_ provider: String, _ fields: [String: String]) throws(ParseError) -> ProviderCredential {
        let nonce = fields["nonce"].flatMap { $0.isEmpty ? nil : $0 }
        func required(_ name: String) throws(ParseError) -> String {
            guard let value = fields[name], !value.allSatisfy(\.isWhitespace) else {
                throw ParseError.refusedCredential(provider: provider)
            }
            return value
        }
        switch ProviderName(rawValue: provider) {
        case .apple?:
            return .apple(
                identityToken: try required("token"), rawNonce: nonce, fullName: nil,
                authorizationCode: fields["code"].flatMap { $0.isEmpty ? nil : $0 })
        case .facebook?:
            if fields["access_token"] != nil { return .facebookAccessToken(try required("access_token")) }
            return .facebookLimitedLogin(authenticationToken: try required("token"), rawNonce: nonce)
        case .google?:
            // Parse's Google adapter also takes a bare access token; Tether verifies the signed ID token only.
            return .google(idToken: try required("id_token"), rawNonce: nonce)
        case .anonymous?:
            return .anonymous(id: try required("id"))
        case .password?, .custom?, nil:
            throw ParseError.unsupported
        }
    }
}

/// An identity a request claims: `authData.<provider>.id` and the credential that must prove it.
struct ClaimedIdentity: Sendable {
    var provider: String
    var id: String
    var credential: ProviderCredential
}
