import Foundation
import TetherCore
import TetherCrypto

/// An identity's uid as support and admin readers see it (the user detail, history, exports, the event
/// feed and webhooks). An anonymous identity's uid is the only secret of its user (Parse signs in with
/// `authData.anonymous.id` alone), so those readers get a fingerprint of it (`sha256:` and the first 16 hex
/// digits of its SHA-256), which tells two apart and signs nobody in; every other uid is shown as it is.
enum SecretUID {
    static func shown(provider: String, uid: String) -> String {
        guard provider == ExternalIdentity.anonymousProvider, uid != ExternalIdentity.erasedUID else { return uid }
        return "sha256:" + DigestAlgorithm.sha256.hash(Array(uid.utf8)).hexString.prefix(16)
    }

    /// `payload` (an IdentityLinked or IdentityUnlinked event's) with its uid as ``shown(provider:uid:)`` has it.
    static func shown(_ payload: [String: JSONValue]) -> [String: JSONValue] {
        guard case .string(let provider)? = payload["provider"], case .string(let uid)? = payload["uid"] else { return payload }
        var shown = payload
        shown["uid"] = .string(Self.shown(provider: provider, uid: uid))
        return shown
    }
}

extension UserBody {
    /// The user as support and admin readers see them: each identity's uid as ``SecretUID`` shows it.
    var shownToAdmins: UserBody {
        var shown = self
        for index in shown.identities.indices {
            shown.identities[index].uid = SecretUID.shown(provider: shown.identities[index].provider, uid: shown.identities[index].uid)
        }
        return shown
    }
}
