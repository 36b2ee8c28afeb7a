/// A person's name as an app reports it (Apple's `fullName`).
public struct PersonName: Sendable, Hashable, Codable {
    /// The given name, if the user shared it.
    public var givenName: String?
    /// The family name, if the user shared it.
    public var familyName: String?

    /// A name from its parts.
    public init(givenName: String? = nil, familyName: String? = nil) {
        self.givenName = givenName
        self.familyName = familyName
    }

    /// Given and family name joined by a space, or nil when both are absent.
    public var formatted: String? {
        let parts = [givenName, familyName].compactMap { $0 }.filter { !$0.isEmpty }
        return parts.isEmpty ? nil : parts.joined(separator: " ")
    }
}
