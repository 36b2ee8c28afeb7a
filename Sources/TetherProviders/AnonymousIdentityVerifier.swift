import Foundation
import TetherCore

/// "Verifies" anonymous credentials: there is nothing to check but the shape of the id a client keeps.
///
/// A credential with no id gets a new random one, so each such sign-in makes a new user. The id of
/// Parse's `authData.anonymous` is the client's own (a lowercased UUID from the SDKs); whoever holds
/// it signs in as that user, as on Parse Server, so it must be long enough not to be guessed.
public struct AnonymousIdentityVerifier: IdentityVerifier {
    /// Ids shorter than this are refused: an anonymous id is the user's only secret.
    public static let minimumIDLength = 16

    public init() {}

    public func verify(_ credential: ProviderCredential) async throws -> VerifiedIdentity {
        guard case .anonymous(let id) = credential else {
            throw ProviderError.invalidRequest("The anonymous verifier was handed a \(credential.provider.rawValue) credential.")
        }
        let uid = id ?? UUID.random().lowercasedText
        guard (Self.minimumIDLength...ExternalIdentity.maximumUIDLength).contains(uid.utf8.count),
              uid.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else {
            throw ProviderError.invalidCredential(.malformed).with(detail: "An anonymous id is \(Self.minimumIDLength) to \(ExternalIdentity.maximumUIDLength) visible ASCII characters.")
        }
        return VerifiedIdentity(provider: ProviderName.anonymous.rawValue, credentialForm: .anonymous, uid: uid)
    }
}
