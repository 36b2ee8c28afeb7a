import Foundation

/// How `tether history` names a user: `USER` (their id), `EMAIL`, or `PROVIDER:UID`.
public enum UserReference: Sendable, Hashable, CustomStringConvertible {
    case id(UUID)
    case email(String)
    case identity(provider: String, uid: String)

    /// Reads a reference: a UUID is an id; `name:rest` with a lowercase provider name is an identity
    /// (`password:ada@example.com` included); anything else with an `@` is an email.
    public init(parsing text: String) throws(AdminError) {
        let text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let id = UUID(text: text) {
            self = .id(id)
            return
        }
        if let colon = text.firstIndex(of: ":") {
            let provider = text[..<colon]
            let uid = text[text.index(after: colon)...]
            let isProviderName = !provider.isEmpty && provider.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "." || $0 == "-" }
            if isProviderName && !uid.isEmpty {
                self = .identity(provider: String(provider), uid: String(uid))
                return
            }
        }
        guard let at = text.firstIndex(of: "@"), at != text.startIndex, text.index(after: at) != text.endIndex else {
            throw .invalidRequest("\"\(text)\" is not a user id, an email or PROVIDER:UID")
        }
        self = .email(text)
    }

    public var description: String {
        switch self {
        case .id(let id): "id \(id.lowercasedText)"
        case .email(let email): "email \(email)"
        case .identity(let provider, let uid): "\(provider) uid \(uid)"
        }
    }

    /// The user it names; an id is taken as given (an erased user's history outlives their row).
    ///
    /// Throws ``AdminError/noSuchUser(_:)`` when no user matches, and when an email
    /// matches several (possible under `allow-duplicate-emails`), naming them.
    public func resolve(in directory: AdminUserDirectory) async throws -> UUID {
        let search: UserSearch
        switch self {
        case .id(let id): return id
        case .email(let email): search = UserSearch(email: email)
        case .identity(let provider, let uid): search = UserSearch(provider: provider, uid: uid)
        }
        let found = try await directory.search(search, limit: 5).users
        guard let first = found.first else { throw AdminError.noSuchUser("no user has the \(self)") }
        guard found.count == 1 else {
            let ids = found.map { $0.id.lowercasedText }.joined(separator: ", ")
            throw AdminError.noSuchUser("\(found.count < 5 ? "\(found.count)" : "5 or more") users have the \(self) (\(ids)); name one by id")
        }
        return first.id
    }
}
