import Foundation

/// What an admin key may do on `/v1/admin`.
public enum AdminRole: String, Sendable, Hashable, CaseIterable {
    /// Reads: search, user detail, history.
    case support
    /// Reads and acts: disable, enable, revoke sessions.
    case admin

    /// Whether a key of this role may call a route that requires `required`.
    public func allows(_ required: AdminRole) -> Bool {
        self == .admin || required == .support
    }
}

/// An admin key as `admin_keys` records it; the key itself is never stored.
public struct AdminKey: Sendable, Hashable {
    public var id: UUID
    /// The operator's label, if one was given.
    public var name: String?
    public var role: AdminRole
    public var createdAt: Date
    /// When it stopped working, if it was revoked.
    public var revokedAt: Date?
    /// When a request last used it (read from its stream); nil in authentication results.
    public var lastUsedAt: Date?

    public init(id: UUID, name: String?, role: AdminRole, createdAt: Date, revokedAt: Date? = nil, lastUsedAt: Date? = nil) {
        self.id = id
        self.name = name
        self.role = role
        self.createdAt = createdAt
        self.revokedAt = revokedAt
        self.lastUsedAt = lastUsedAt
    }

    /// Whether the key has been revoked.
    public var isRevoked: Bool { revokedAt != nil }
}
