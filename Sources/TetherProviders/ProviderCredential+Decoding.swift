import TetherCore
import Foundation

extension ProviderCredential {
    /// The longest token or nonce accepted; larger values are refused before any parsing.
    public static let maximumFieldLength = 16 * 1024

    /// Decodes the credential object of a sign-in or link request for `provider`.
    ///
    /// - Parameters:
    ///   - provider: `apple`, `facebook`, `google`, `password` or `anonymous`.
    ///   - credential: the credential object of the request body (for `anonymous`: `{}` or null).
    ///   - pointer: where the credential object sits in the request body, for error pointers.
    /// - Throws: `unsupported_provider` for an unknown provider; `invalid_request`
    ///   naming the member (as an RFC 6901 pointer) that is missing, of the wrong type or empty.
    public init(provider: String, credential: JSONValue, pointer: String = "/credential") throws(ProviderError) {
        var credential = credential
        guard let name = ProviderName(rawValue: provider) else {
            throw ProviderError.unsupportedProvider.with(provider: provider).with(detail: "unknown provider \(provider)")
        }
        if credential == .null {
            guard name == .anonymous else {
                throw ProviderError.invalidRequest("The member '\(pointer)' is required.", pointer: pointer)
            }
            credential = .object([:])
        }
        guard case .object(let members) = credential else {
            throw ProviderError.invalidRequest("The member '\(pointer)' must be an object.", pointer: pointer)
        }
        let reader = CredentialReader(members: members, pointer: pointer)
        switch name {
        case .apple:
            self = .apple(
                identityToken: try reader.string("identityToken"), rawNonce: try reader.optionalString("rawNonce"),
                fullName: try reader.name("fullName"), authorizationCode: try reader.optionalString("authorizationCode"))
        case .facebook:
            self = try Self.facebook(reader)
        case .google:
            self = .google(idToken: try reader.string("idToken"), rawNonce: try reader.optionalString("rawNonce"))
        case .password:
            let email = try reader.string("email").trimmingCharacters(in: .whitespaces)
            // Control characters (NUL above all, which PostgreSQL refuses in text) are no address.
            guard email.contains("@"), email.count <= 320,
                  !email.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw ProviderError.invalidRequest("The member '\(pointer)/email' must be an email address.", pointer: pointer + "/email")
            }
            self = .password(email: email, password: try reader.string("password", trims: false))
        case .anonymous:
            // Each anonymous sign-in makes a new user: an id chosen by the client would be a bearer
            // secret anyone could guess, so `/v1` takes none (Parse's surface passes its own).
            guard members.isEmpty else {
                throw ProviderError.invalidRequest("An anonymous credential takes no members: send {} or leave it out.", pointer: pointer)
            }
            self = .anonymous(id: nil)
        case .custom:
            throw ProviderError.unsupportedProvider.with(provider: provider)
                .with(detail: "custom tokens are signed in at the Firebase surface's accounts:signInWithCustomToken")
        }
    }

    /// Decodes a credential from the JSON text of its object.
    public init(provider: String, json: some Collection<UInt8>, pointer: String = "") throws(ProviderError) {
        let value: JSONValue
        do {
            value = try CompactJSONDecoder(refusesDuplicateNames: true).decode(JSONValue.self, from: Array(json))
        } catch {
            throw ProviderError.invalidRequest("The credential is not valid JSON.")
        }
        try self.init(provider: provider, credential: value, pointer: pointer)
    }

    private static func facebook(_ reader: CredentialReader) throws(ProviderError) -> ProviderCredential {
        let forms = ["accessToken", "authenticationToken", "sessionInfoToken"].filter(reader.isPresent)
        guard forms.count == 1 else {
            throw ProviderError.invalidRequest(
                forms.isEmpty
                    ? "A Facebook credential needs one of accessToken, authenticationToken or sessionInfoToken."
                    : "A Facebook credential takes only one of \(forms.joined(separator: ", ")).",
                pointer: reader.pointer)
        }
        switch forms[0] {
        case "accessToken":
            return .facebookAccessToken(try reader.string("accessToken"))
        case "authenticationToken":
            return .facebookLimitedLogin(
                authenticationToken: try reader.string("authenticationToken"), rawNonce: try reader.optionalString("rawNonce"))
        default:
            return .facebookSessionInfo(sessionInfoToken: try reader.string("sessionInfoToken"), profile: try reader.profile("profile"))
        }
    }
}

/// Reads members of a credential object, failing with the member's pointer.
private struct CredentialReader {
    let members: [String: JSONValue]
    let pointer: String

    func isPresent(_ name: String) -> Bool {
        if let value = members[name], value != .null { true } else { false }
    }

    func fail(_ name: String, _ problem: String) -> ProviderError {
        ProviderError.invalidRequest("The member '\(pointer)/\(name)' \(problem).", pointer: "\(pointer)/\(name)")
    }

    /// A required, non-empty string of bounded length.
    func string(_ name: String, trims: Bool = true) throws(ProviderError) -> String {
        guard let value = members[name], value != .null else { throw fail(name, "is required") }
        guard case .string(let text) = value else { throw fail(name, "must be a string") }
        // Blank when every character is white space (it stops at the first that is not: a token's first).
        guard !(trims ? text.allSatisfy(\.isWhitespace) : text.isEmpty) else { throw fail(name, "must not be empty") }
        guard text.utf8.count <= ProviderCredential.maximumFieldLength else { throw fail(name, "is too long") }
        return text
    }

    /// An optional string; absent or null gives nil, present must be non-empty.
    func optionalString(_ name: String) throws(ProviderError) -> String? {
        isPresent(name) ? try string(name) : nil
    }

    /// An optional string that may also be empty (profile fields).
    func lenientString(_ name: String) throws(ProviderError) -> String? {
        guard let value = members[name], value != .null else { return nil }
        guard case .string(let text) = value else { throw fail(name, "must be a string") }
        guard text.utf8.count <= 4096 else { throw fail(name, "is too long") }
        return text.isEmpty ? nil : text
    }

    func object(_ name: String) throws(ProviderError) -> CredentialReader? {
        guard let value = members[name], value != .null else { return nil }
        guard case .object(let inner) = value else { throw fail(name, "must be an object") }
        return CredentialReader(members: inner, pointer: "\(pointer)/\(name)")
    }

    /// Apple's `fullName`: an object with optional `givenName` and `familyName`.
    func name(_ name: String) throws(ProviderError) -> PersonName? {
        guard let inner = try object(name) else { return nil }
        let person = PersonName(givenName: try inner.lenientString("givenName"), familyName: try inner.lenientString("familyName"))
        return person.formatted == nil ? nil : person
    }

    /// A Graph-shaped profile: `id` required, snake_case or camelCase names, `picture` as URL or `{data:{url}}`.
    func profile(_ name: String) throws(ProviderError) -> FacebookProfile {
        guard let inner = try object(name) else { throw fail(name, "is required") }
        var picture: URL?
        switch inner.members["picture"] {
        case .string(let text)?: picture = URL.httpURL(text)
        case .object?: picture = try inner.object("picture")?.object("data")?.lenientString("url").flatMap(URL.httpURL)
        default: picture = nil
        }
        let firstName = try inner.lenientString("first_name")
        let lastName = try inner.lenientString("last_name")
        return FacebookProfile(
            id: try inner.string("id"), name: try inner.lenientString("name"), email: try inner.lenientString("email"),
            firstName: firstName != nil ? firstName : try inner.lenientString("firstName"),
            lastName: lastName != nil ? lastName : try inner.lenientString("lastName"),
            pictureURL: picture, raw: inner.members)
    }
}
