import TetherCore
import Foundation

/// A Facebook profile as the app fetched it from Graph `/me` (client-asserted).
public struct FacebookProfile: Sendable, Hashable {
    /// The Facebook user id; must match the user of the session-info token.
    public var id: String
    /// The full name.
    public var name: String?
    /// The email (never treated as verified).
    public var email: String?
    /// `first_name`.
    public var firstName: String?
    /// `last_name`.
    public var lastName: String?
    /// `picture.data.url` (or a plain URL string).
    public var pictureURL: URL?
    /// The profile object exactly as sent, for the record.
    public var raw: [String: JSONValue]

    /// A profile from its parts.
    public init(
        id: String, name: String? = nil, email: String? = nil, firstName: String? = nil, lastName: String? = nil,
        pictureURL: URL? = nil, raw: [String: JSONValue] = [:]
    ) {
        self.id = id
        self.name = name
        self.email = email
        self.firstName = firstName
        self.lastName = lastName
        self.pictureURL = pictureURL
        self.raw = raw
    }
}
