/// Opaque refresh tokens: `rt_` followed by 256 random bits in base64url; only their SHA-256 is stored.
///
/// The format is fixed (46 characters, canonical base64url), so anything else
/// is refused before a database lookup (see ``OpaqueSecretFormat``).
public enum RefreshTokens: Sendable {
    /// What every refresh token starts with.
    public static let prefix = "rt_"
    static let format = OpaqueSecretFormat(prefix: prefix)
    /// `rt_` plus 43 base64url characters.
    public static let length = format.length

    /// A new token from the system's secure random generator.
    public static func generate() -> String {
        format.generate()
    }

    /// The storage form of `token`: SHA-256 of its UTF-8, lowercase hex (64 characters).
    public static func hash(_ token: String) -> String {
        format.hash(token)
    }

    /// The storage hash to look a presented token up by, or `invalid_token` when it is not a refresh token at all.
    public static func lookupHash(of presented: String) throws(TokenError) -> String {
        guard isWellFormed(presented) else { throw TokenError.invalidToken.with(detail: "The refresh token is malformed.") }
        return hash(presented)
    }

    /// Whether `presented` hashes to `storedHash`, compared in constant time.
    public static func matches(_ presented: String, storedHash: String) -> Bool {
        format.matches(presented, storedHash: storedHash)
    }

    /// Whether `token` has the exact shape `generate()` produces; timing reveals nothing about which character was wrong.
    public static func isWellFormed(_ token: String) -> Bool {
        format.isWellFormed(token)
    }
}
