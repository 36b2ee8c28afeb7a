import Foundation

/// A person as an identity provider (or a password sign-up) describes them, after verification.
public struct ExternalIdentity: Sendable, Hashable, Codable {
    /// `apple`, `facebook`, `google`, `password` or `anonymous`.
    public var provider: String
    /// The provider's stable id for the person (for `password`, the normalised email).
    public var uid: String
    public var email: String?
    /// Whether the provider vouches for the email (never for Facebook).
    public var isEmailVerified: Bool
    public var displayName: String?
    public var photoURL: String?

    /// The provider of anonymous users: an identity whose uid is a random id the client holds.
    public static let anonymousProvider = "anonymous"

    /// What an identity event's `uid` reads as once its user was erased (the key that sealed it is gone).
    public static let erasedUID = "(erased)"

    /// The nonce its verification spent, to give back if the command then fails on the server's side.
    public var spentNonce: UsedNonce?
    /// The provider token its verification obtained (Apple's refresh token for a redeemed authorization
    /// code, the Facebook access token presented), stored with the identity by the command.
    public var providerGrant: ProviderGrant?
    /// Why an authorization code that came with the credential was not redeemed (`provider_unavailable`,
    /// `not_configured`); the command records it, and the sign-in goes on with the identity token alone.
    public var codeNotRedeemed: String?
    /// For a password, the stored hash its verification matched, checked again under the user's lock
    /// (``UserAccount/signIn(with:session:now:)``): a verification takes a while (scrypt), and the password,
    /// or the account, may be gone by the time the command runs.
    public var verifiedPasswordHash: String?

    public init(
        provider: String, uid: String, email: String? = nil, isEmailVerified: Bool = false,
        displayName: String? = nil, photoURL: String? = nil
    ) {
        self.provider = provider
        self.uid = uid
        self.email = email
        self.isEmailVerified = isEmailVerified
        self.displayName = displayName
        self.photoURL = photoURL
    }

    /// The longest user id, in UTF-8 bytes, Tether takes from any provider. Apple's, Google's and Facebook's
    /// are under 64; an anonymous id is the client's, a lowercased UUID from the SDKs.
    public static let maximumUIDLength = 1024
    /// The longest email, in UTF-8 bytes: RFC 5321's limit on a path (256, with its angle brackets).
    public static let maximumEmailLength = 254
    /// The longest name (full, given or family) of an identity, in UTF-8 bytes.
    public static let maximumNameLength = 512

    /// Why an identity with these members cannot be stored, when one is longer than Tether keeps (nil when
    /// none is).
    ///
    /// The id, the email and the names' words are keys of the identities' indexes, whose rows hold about
    /// 2.7 KB: a longer one failed its command inside PostgreSQL, as a server error (after a verification
    /// had spent the token's nonce). No real provider sends these lengths.
    public static func oversizedMember(uid: String, email: String?, names: [String?]) -> String? {
        if uid.utf8.count > maximumUIDLength { return "The provider's user id is longer than \(maximumUIDLength) bytes." }
        if let email, email.utf8.count > maximumEmailLength { return "The email is longer than \(maximumEmailLength) bytes." }
        if names.contains(where: { ($0?.utf8.count ?? 0) > maximumNameLength }) {
            return "A name is longer than \(maximumNameLength) bytes."
        }
        return nil
    }

    /// The email in the form used to compare addresses (trimmed, lowercased).
    public var normalizedEmail: String? { email.map(Self.normalize) }

    /// Trims and lowercases an address. One that begins and ends with printable ASCII other than a space (every
    /// address a provider sends) has nothing to trim, and skips Foundation's trim, which bridges to `NSString`:
    /// a replay normalizes every identity's address.
    public static func normalize(_ email: String) -> String {
        if let first = email.utf8.first, let last = email.utf8.last, (0x21...0x7E).contains(first), (0x21...0x7E).contains(last) {
            return email.lowercased()
        }
        return email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }

    /// True when this provider may be trusted for this email's domain (Firebase's rule):
    /// Apple for its relay and iCloud addresses, Google for Gmail.
    public var isTrustedForEmail: Bool {
        guard isEmailVerified, let email = normalizedEmail, let at = email.lastIndex(of: "@") else { return false }
        let domain = email[email.index(after: at)...]
        switch provider {
        case "apple": return ["privaterelay.appleid.com", "icloud.com", "me.com", "mac.com"].contains(domain)
        case "google": return ["gmail.com", "googlemail.com"].contains(domain)
        default: return false
        }
    }
}
