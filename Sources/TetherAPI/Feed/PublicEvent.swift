import Foundation
import TetherCore
import TetherJOSE

/// The public form of the log's account events: what the event feed (`GET /v1/admin/events`) and
/// webhooks hand to backends. It is versioned apart from the internal event types, so those can
/// change without breaking a backend; `schema/events/<type>.json` describes each type.
///
/// Each event is `{id, type, version, occurredAt, userId, surface, data}`. `id` is `evt_` and the
/// internal event's id in hex: stable, the same in the feed, in every webhook attempt and in a replay.
/// Personal members of `data` (addresses, names, pictures, provider uids, developer claims) appear only
/// for readers allowed them (admin keys, webhooks created with personal data); after an erasure they
/// are gone for everyone, because the log's copy can no longer be read.
public enum PublicEvent {
    /// The version of the public schema.
    public static let version = 1

    /// Every public type, in the order `schema/events` lists them.
    public static let types = [
        "user.created", "user.updated", "user.disabled", "user.enabled", "user.erased", "identity.linked", "identity.unlinked",
        "session.started", "session.ended", "sessions.revoked", "email.verified", "password.changed", "mfa.factor_enrolled",
        "mfa.factor_removed",
    ]

    /// The public type of an internal event type; nil for events backends do not see (sign-in steps,
    /// refreshes, second-factor challenges, mailed codes, admin reads).
    public static func type(of internalType: String) -> String? {
        switch internalType {
        case "UserRegistered": "user.created"
        case "ProfileUpdated", "EmailChanged", "CustomClaimsSet": "user.updated"
        case "UserDisabled": "user.disabled"
        case "UserEnabled": "user.enabled"
        case "UserErased": "user.erased"
        case "IdentityLinked": "identity.linked"
        case "IdentityUnlinked": "identity.unlinked"
        case "SessionStarted": "session.started"
        case "SessionEnded": "session.ended"
        case "SessionsRevoked": "sessions.revoked"
        case "EmailVerified": "email.verified"
        case "PasswordSet": "password.changed"
        case "MFAFactorConfirmed": "mfa.factor_enrolled"
        case "MFAFactorRemoved": "mfa.factor_removed"
        default: nil
        }
    }

    /// The internal types that have a public form.
    public static let internalTypes = [
        "UserRegistered", "ProfileUpdated", "EmailChanged", "CustomClaimsSet", "UserDisabled", "UserEnabled", "UserErased",
        "IdentityLinked", "IdentityUnlinked", "SessionStarted", "SessionEnded", "SessionsRevoked", "EmailVerified", "PasswordSet",
        "MFAFactorConfirmed", "MFAFactorRemoved",
    ]

    /// The public id of an internal event.
    public static func id(of eventId: UUID) -> String {
        "evt_" + eventId.lowercasedText.replacingOccurrences(of: "-", with: "")
    }

    /// The public form of `event`, with personal members when `personal`; nil for an event without one.
    public static func json(_ event: RecordedEvent, personal: Bool) -> JSONValue? {
        guard let type = type(of: event.type), let userId = event.userId,
              case .object(let payload)? = try? JSONValue(parsing: Array(event.data)) else { return nil }
        // An enrolment never confirmed was never announced (`mfa.factor_enrolled`): its end is not one either. Events
        // written before `pending` say it by their reason, which only such an enrolment's end has.
        if event.type == "MFAFactorRemoved",
           payload["pending"] == .bool(true) || [.string("superseded"), .string("too_many_attempts")].contains(payload["reason"]) {
            return nil
        }
        let sealed: [String: JSONValue] = if case .object(let members)? = payload["personal"] { members } else { [:] }
        var data: [String: JSONValue] = [:]
        /// A member that is not personal, copied under its public name.
        func plain(_ name: String, as publicName: String? = nil) {
            if let value = payload[name], value != .null { data[publicName ?? name] = value }
        }
        /// An id member, written in lowercase as every id of the API is (payloads hold Swift's uppercase form).
        func plainId(_ name: String) {
            guard let value = payload[name], value != .null else { return }
            if case .string(let text) = value, let id = UUID(text: text) { data[name] = .string(id.lowercasedText) } else { data[name] = value }
        }
        /// A personal member, copied only for readers allowed it.
        func personalMember(_ name: String, as publicName: String? = nil) {
            guard personal, let value = sealed[name], value != .null else { return }
            data[publicName ?? name] = value
        }
        /// The identity's uid, personal, for readers allowed it, and an anonymous one only as ``SecretUID`` shows it.
        func shownUID() {
            guard personal, case .string(let uid)? = payload["uid"], uid != ExternalIdentity.erasedUID else { return }
            guard case .string(let provider)? = payload["provider"] else { return }
            data["uid"] = .string(SecretUID.shown(provider: provider, uid: uid))
        }
        switch event.type {
        case "UserRegistered":
            plain("emailVerified")
            personalMember("email")
            personalMember("displayName")
            personalMember("photoURL", as: "photoUrl")
        case "ProfileUpdated":
            var changed: Set<String> = []
            if case .array(let names)? = payload["cleared"] {
                for case .string(let name) in names { changed.insert(name) }
            }
            if sealed["displayName"] != nil && sealed["displayName"] != .null { changed.insert("displayName") }
            if sealed["photoURL"] != nil && sealed["photoURL"] != .null { changed.insert("photoURL") }
            if payload["emailVerified"] != nil && payload["emailVerified"] != .null { changed.insert("emailVerified") }
            data["changed"] = .array(changed.map { $0 == "photoURL" ? "photoUrl" : $0 }.sorted().map(JSONValue.string))
            plain("emailVerified")
            personalMember("displayName")
            personalMember("photoURL", as: "photoUrl")
        case "EmailChanged":
            data["changed"] = .array(["email", "emailVerified"])
            plain("emailVerified")
            personalMember("email")
        case "CustomClaimsSet":
            data["changed"] = .array(["customClaims"])
            personalMember("customClaims")
        case "UserDisabled", "UserEnabled", "UserErased":
            plain("reason")
        case "IdentityLinked":
            plain("provider")
            plain("emailVerified")
            shownUID()
            personalMember("email")
        case "IdentityUnlinked":
            plain("provider")
            plain("reason")
            shownUID()
        case "SessionStarted":
            plainId("sessionId")
            plain("amr")
        case "SessionEnded":
            plainId("sessionId")
            plain("reason")
        case "SessionsRevoked":
            plain("validSince")
        case "EmailVerified":
            plain("provider")
            personalMember("email")
        case "MFAFactorConfirmed":
            plainId("factorId")
        case "MFAFactorRemoved":
            plainId("factorId")
            plain("reason")
        default:
            break
        }
        var body: [String: JSONValue] = [
            "id": .string(id(of: event.id)), "type": .string(type), "version": .int(version),
            "occurredAt": .string(ISO8601Milliseconds.format(event.occurredAt)), "userId": .string(userId.lowercasedText),
            "data": .object(data),
        ]
        body["surface"] = event.metadata.surface.map(JSONValue.string) ?? .null
        return .object(body)
    }
}
