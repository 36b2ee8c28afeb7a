import Foundation
import TetherCore

/// Who a provider says the holder of a credential is, after every check passed.
///
/// Fields marked client-asserted came from the app, not from a signature or
/// the provider's API: Apple's name (sent by the app on first sign-in only)
/// and the profile of a Facebook session-info exchange. The accounts layer
/// may store them, but never trusts them for linking decisions.
public struct VerifiedIdentity: Sendable, Codable, Hashable {
    /// Why the identity cannot be stored (``ExternalIdentity/oversizedMember(uid:email:names:)``), or nil.
    public var oversizedMember: String? {
        ExternalIdentity.oversizedMember(uid: uid, email: email, names: [displayName, givenName, familyName])
    }

    /// `apple`, `facebook`, `google` or `password` (see ``ProviderName``).
    public var provider: String
    /// The token's nonce, recorded as used by this verification (nil when it carried none).
    public var spentNonce: UsedNonce?
    /// How the identity was proven, for the record (see ``CredentialForm``).
    public var credentialForm: CredentialForm
    /// The provider's stable user id (`sub`, Facebook user id, or the email for passwords).
    public var uid: String
    /// The email the provider gave, if any.
    public var email: String?
    /// Whether the provider vouches that `email` belongs to the user (never for Facebook).
    public var isEmailVerified: Bool
    /// Whether `email` is an Apple private relay address.
    public var isPrivateEmail: Bool
    /// The full name, if known.
    public var displayName: String?
    /// The given name, if known.
    public var givenName: String?
    /// The family name, if known.
    public var familyName: String?
    /// A profile picture, if known (http or https only).
    public var photoURL: URL?
    /// Whether the names came from the client rather than the provider (Apple's `fullName`).
    public var isNameClientAsserted: Bool
    /// Whether the whole profile came from the client (Facebook session-info exchange).
    public var isProfileClientAsserted: Bool
    /// The verified token claims or Graph fields, kept for the record.
    public var rawClaims: [String: JSONValue]
    /// The client id or app id the credential was issued to.
    public var audience: String?
    /// When the presented token stops being valid, if it says so.
    public var tokenExpiresAt: Date?
    /// Apple's `real_user_status`: 0 unsupported, 1 unknown, 2 likely real.
    public var realUserStatus: Int?
    /// The token for the person's grant the verification obtained: Apple's refresh token for a redeemed
    /// authorization code, or the Facebook access token presented.
    public var providerGrant: ProviderGrant?
    /// Why an authorization code that came with the credential was not redeemed.
    public var codeNotRedeemed: String?
    /// For a password, the stored hash it was verified against: the sign-in goes on only while the account
    /// still has that password (a reset or a change meanwhile, or the account gone, refuses it).
    public var verifiedPasswordHash: String?

    /// An identity from its parts; optional facts default to unknown, trust flags to false.
    public init(
        provider: String, credentialForm: CredentialForm, uid: String, email: String? = nil,
        isEmailVerified: Bool = false, isPrivateEmail: Bool = false, displayName: String? = nil,
        givenName: String? = nil, familyName: String? = nil, photoURL: URL? = nil, isNameClientAsserted: Bool = false,
        isProfileClientAsserted: Bool = false, rawClaims: [String: JSONValue] = [:], audience: String? = nil,
        tokenExpiresAt: Date? = nil, realUserStatus: Int? = nil
    ) {
        self.provider = provider
        self.credentialForm = credentialForm
        self.uid = uid
        self.email = email
        self.isEmailVerified = isEmailVerified
        self.isPrivateEmail = isPrivateEmail
        self.displayName = displayName
        self.givenName = givenName
        self.familyName = familyName
        self.photoURL = photoURL
        self.isNameClientAsserted = isNameClientAsserted
        self.isProfileClientAsserted = isProfileClientAsserted
        self.rawClaims = rawClaims
        self.audience = audience
        self.tokenExpiresAt = tokenExpiresAt
        self.realUserStatus = realUserStatus
    }
}
