import Foundation
import TetherCore
import TetherHTTP
import TetherJOSE
import TetherPostgres

/// The one-line account of an event that `tether history` and the support API show.
///
/// One switch over event types: a new type gets a case here; a type without one
/// is shown generically (its plain members, secrets left out). Payloads are read
/// as loose JSON, not through the event codecs, so that an event whose personal
/// part has been erased (absent, or no longer a readable object) still renders,
/// with `(erased)` where personal data stood.
public struct EventSummary: Sendable, Hashable {
    /// The line itself.
    public var text: String
    /// True when the event carried personal data that can no longer be read.
    public var isPersonalDataErased: Bool

    /// What stands in for personal data that has been erased.
    public static let erased = "(erased)"

    /// Describes one stored event.
    public static func describe(type: String, data: Data) -> EventSummary {
        // Read with the JOSE parser as it is, without a JSONValue tree: a history page summarises every event.
        describe(type: type, payload: (try? JOSEObject(parsing: data)) ?? JOSEObject())
    }

    /// ``describe(type:data:)`` of a payload already parsed.
    public static func describe(type: String, payload members: JOSEObject) -> EventSummary {
        let payload = Payload(members)
        let text: String
        switch type {
        case "UserRegistered":
            var parts = [payload.personal("email").map { "email \($0)\(payload.verification("emailVerified"))" } ?? "no email"]
            if let name = payload.personal("displayName") { parts.append("name \(name)") }
            text = "registered: " + parts.joined(separator: ", ")
        case "IdentityLinked":
            let email = payload.personal("email").map { ": email \($0)\(payload.verification("emailVerified"))" } ?? ""
            text = "linked \(payload["provider"]) \(payload.uid)\(email)"
        case "IdentityUnlinked":
            text = "unlinked \(payload["provider"]) \(payload.uid) (\(payload["reason"]))"
        case "EmailVerified":
            text = "email verified by \(payload["provider"])" + (payload.personal("email").map { ": \($0)" } ?? "")
        case "PasswordSet":
            text = "password set"
        case "SignedIn":
            text = "signed in with \(payload["provider"]) (\(payload["outcome"])), session \(payload.shortID("sessionId"))"
        case "SessionStarted":
            let amr = payload.strings("amr").joined(separator: ",")
            let bound = payload.text("jkt") == nil ? "" : ", DPoP-bound"
            text = "session \(payload.shortID("sessionId")) started (amr \(amr.isEmpty ? "-" : amr)\(bound))"
        case "SessionRefreshed":
            text = "session \(payload.shortID("sessionId")) refreshed (generation \(payload["generation"]))"
        case "SessionEnded":
            text = "session \(payload.shortID("sessionId")) ended (\(payload["reason"]))"
        case "SessionsRevoked":
            text = "every session revoked; tokens issued before \(payload["validSince"]) are void"
        case "UserErased":
            text = "user erased: everything personal in the log is now unreadable" + (payload.text("reason").map { " (\($0))" } ?? "")
        case "UserDisabled", "UserEnabled":
            text = (type == "UserDisabled" ? "user disabled" : "user enabled") + (payload.text("reason").map { ": \($0)" } ?? "")
        case "AdminUserViewed":
            text = payload.statusNote.isEmpty ? "viewed the user's detail" : "asked for the user's detail" + payload.statusNote
        case "AdminHistoryViewed":
            let after = payload.text("after").map { " after position \($0)" } ?? ""
            text = payload.statusNote.isEmpty
                ? "viewed the history (\(payload["returned"]) events\(after))" : "asked for the history" + payload.statusNote
        case "ProviderEmailStatusChanged":
            text = "\(payload["provider"]) " + (payload.text("forwarding") == "false" ? "stopped forwarding mail to its address" : "forwards mail to its address again")
        case "ProviderTokenStored":
            text = payload.text("source") == "authorization_code"
                ? "\(payload["provider"]) authorization code redeemed; its refresh token kept (to revoke and check the grant)"
                : "\(payload["provider"]) \(payload["kind"]) kept (to revoke and check the grant)"
        case "ProviderCodeNotRedeemed":
            text = "\(payload["provider"]) authorization code not redeemed (\(payload["reason"])); signed in on the identity token alone"
        case "ProviderGrantChecked":
            let outcome = switch payload.text("result") {
            case "valid": "still stands"
            case "revoked": "is gone: the session ends"
            default: "could not be checked (provider unreachable); the session goes on"
            }
            text = "\(payload["provider"]) grant of session \(payload.shortID("sessionId")) \(outcome)"
        case "ProviderTokenRevoked":
            text = "\(payload["provider"]) grant revoked at the provider (attempt \(payload["attempt"]))"
        case "ProviderRevocationFailed":
            text = "revoking the \(payload["provider"]) grant failed (attempt \(payload["attempt"]): \(payload["error"])); retried at \(payload["retryAt"])"
        case "ProviderRevocationAbandoned":
            text = "gave up revoking the \(payload["provider"]) grant after \(payload["attempt"]) attempts (\(payload["error"]))"
        case "UserDataExported":
            text = "everything held about the user was exported (by the \(payload["by"]))"
        case "AdminEventsRead":
            text = payload.statusNote.isEmpty
                ? "read the event feed (\(payload["returned"]) events after \(payload.text("after") ?? "0"))" : "asked for the event feed" + payload.statusNote
        case "AdminActionRequested":
            // What the action was about beyond the user: the session it ended, the provider it unlinked.
            let item = payload.text("sessionId") == nil ? payload.text("provider") : payload.shortID("sessionId")
            text = "asked to \(payload["action"])" + (item.map { " \($0)" } ?? "") + (payload.text("reason").map { ": \($0)" } ?? "")
                + payload.statusNote
        case "AdminUsersSearched":
            text = "searched users (\(payload.text("resultCount") ?? "0") found)" + payload.statusNote
        case "AdminKeyCreated":
            text = "admin key created (role \(payload["role"]))"
        case "AdminKeyRevoked":
            text = "admin key revoked"
        case "SignInFailed":
            text = "sign-in with \(payload["provider"]) refused (\(payload["reason"]))"
        case "SignInFailuresCounted":
            text = "\(payload["total"]) sign-ins of no known account refused or throttled in the minute from \(payload["minute"])"
        case "SignInThrottled":
            text = "sign-ins from this \(payload["scope"]) refused for \(payload["retryAfterSeconds"]) s after repeated failures"
        case "MFAFactorEnrolled":
            let name = payload.personal("displayName").map { " \"\($0)\"" } ?? ""
            // An erased number has no hint to give: its placeholder is shown as it is.
            let phone = payload.personal("phoneNumber").map { " for \($0 == EventSummary.erased ? $0 : PhoneNumber.hint($0))" } ?? ""
            text = "\(payload["type"]) factor \(payload.shortID("factorId"))\(name)\(phone) enrolment started"
        case "MFAFactorConfirmed":
            text = "factor \(payload.shortID("factorId")) confirmed"
        case "MFAFactorRemoved":
            text = "factor \(payload.shortID("factorId")) removed (\(payload["reason"]))"
        case "MFARecoveryCodesIssued":
            text = "\(payload.strings("codeHashes").count) recovery codes issued"
        case "MFAChallengeIssued":
            text = "second factor required after \(payload["firstFactor"]) (challenge \(payload.shortID("challengeId")))"
        case "MFACodeSent":
            text = "SMS code sent for factor \(payload.shortID("factorId"))"
                + (payload.text("challengeId") == nil ? " (enrolment)" : " (challenge \(payload.shortID("challengeId")))")
        case "MFACodeDeliveryFailed":
            text = "SMS code for factor \(payload.shortID("factorId")) could not be sent"
        case "MFACodeAccepted":
            text = "\(payload["method"]) code accepted (challenge \(payload.shortID("challengeId"))), session \(payload.shortID("sessionId"))"
        case "MFACodeRejected":
            let scope = payload.text("challengeId") == nil ? "enrolment" : "challenge \(payload.shortID("challengeId"))"
            text = "\(payload["method"]) code rejected: \(payload["reason"]), attempt \(payload["attempt"]) of \(UserAccount.maxCodeAttempts) (\(scope))"
        case "MFARecoveryCodeUsed":
            text = "recovery code used (challenge \(payload.shortID("challengeId")))"
        case "MFAChallengeEnded":
            text = "challenge \(payload.shortID("challengeId")) ended (\(payload["reason"]))"
        case "EmailCodeIssued":
            let to = payload.personal("email").map { " to \($0)" } ?? ""
            text = "\(payload["purpose"]) code \(payload.shortID("codeId")) mailed\(to), expires \(payload["expiresAt"])"
        case "EmailCodeUsed":
            text = "\(payload["purpose"]) code \(payload.shortID("codeId")) used"
        case "EmailCodeExpired":
            text = payload.text("reason") == "superseded"
                ? "\(payload["purpose"]) code \(payload.shortID("codeId")) withdrawn (superseded)"
                : "\(payload["purpose"]) code \(payload.shortID("codeId")) presented after it expired"
        case "EmailCodeRefused":
            let code = payload.text("codeId") == nil ? "a code" : "code \(payload.shortID("codeId"))"
            text = "\(code) refused for \(payload["presentedFor"]) (\(payload["reason"]))"
        case "EmailCodeDeliveryFailed":
            text = "the mail of code \(payload.shortID("codeId")) could not be sent (\(payload["reason"]))"
        default:
            text = payload.generic
        }
        return EventSummary(text: oneLine(text), isPersonalDataErased: payload.isPersonalPartErased)
    }

    /// One line, whatever a payload holds (a reason typed with line breaks, say): each control and
    /// format character (Unicode categories Cc and Cf, as `CharacterSet.controlCharacters`) becomes a space.
    static func oneLine(_ text: String) -> String {
        func isControl(_ scalar: Unicode.Scalar) -> Bool {
            // Below U+007F only C0 controls qualify; testing the byte first spares the property lookup.
            if scalar.value < 0x7F { return scalar.value < 0x20 }
            let category = scalar.properties.generalCategory
            return category == .control || category == .format
        }
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var line = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            line.append(isControl(scalar) ? " " : scalar)
        }
        return String(line)
    }
}

/// A payload read leniently: a member that is missing or of another shape reads as `?`, never as a failure.
///
/// A class only so that ``personal(_:)`` can note, for the summary's flag, that a
/// case asked for personal data and found it erased; it never leaves `describe`.
private final class Payload {
    let members: JOSEObject
    /// The `personal` member when it is a readable object.
    let personalMembers: JOSEObject?
    /// A case asked for personal data that could not be read, or a `personal` member is there but unreadable.
    private(set) var isPersonalPartErased: Bool

    init(_ members: JOSEObject) {
        self.members = members
        if members[PersonalDataVault.erasedMarker] == .bool(true) {
            // Its user was erased: the key that sealed the personal part is gone.
            personalMembers = nil
            isPersonalPartErased = true
        } else if case .object(let personal)? = members["personal"] {
            personalMembers = personal
            isPersonalPartErased = false
        } else {
            personalMembers = nil
            isPersonalPartErased = members["personal"] != nil
        }
    }

    /// A member as text, or `?` when it is missing.
    subscript(_ key: String) -> String { text(key) ?? "?" }

    /// The identity's `uid` as support may see it (``SecretUID``).
    var uid: String { SecretUID.shown(provider: self["provider"], uid: self["uid"]) }

    /// A scalar member as text.
    func text(_ key: String) -> String? {
        Self.scalarText(members[key])
    }

    /// A personal member: its text, nil when absent, `(erased)` when the personal part cannot be read.
    ///
    /// Every type with personal data always writes its personal part, so a missing one was erased.
    func personal(_ key: String) -> String? {
        guard let personalMembers else {
            isPersonalPartErased = true
            return EventSummary.erased
        }
        return Self.scalarText(personalMembers[key])
    }

    /// ` (verified)` or ` (unverified)` from a Boolean member; empty when the member is missing.
    func verification(_ key: String) -> String {
        guard case .bool(let isVerified)? = members[key] else { return "" }
        return isVerified ? " (verified)" : " (unverified)"
    }

    /// The first eight characters of an id member (enough to tell sessions apart in one history).
    func shortID(_ key: String) -> String {
        let short = self[key].prefix(8)
        // Ids are written in lower case: only one with an upper-case or non-ASCII byte is lowered (a new string).
        return short.utf8.contains { $0 >= 0x80 || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) } ? short.lowercased() : String(short)
    }

    /// An array member of strings.
    func strings(_ key: String) -> [String] {
        guard case .array(let values)? = members[key] else { return [] }
        return values.compactMap { Self.scalarText($0) }
    }

    /// ` (answered N)` for a request that did not succeed.
    var statusNote: String {
        guard let status = text("status"), let code = Int(status), !(200..<300).contains(code) else { return "" }
        return " (answered \(code))"
    }

    /// `name=value, …` of the plain members, secrets and the personal part left out.
    var generic: String {
        let secretWords = ["hash", "secret", "token", "code", "password", "key"]
        var parts: [String] = []
        for (key, value) in members.members.sorted(by: { $0.name < $1.name }) where key != "personal" {
            let lowered = key.lowercased()
            guard !secretWords.contains(where: lowered.contains), let text = Self.scalarText(value) else { continue }
            parts.append("\(key)=\(text)")
        }
        if members["personal"] != nil {
            parts.append(personalMembers == nil ? "personal data \(EventSummary.erased)" : "personal data not shown")
        }
        return parts.isEmpty ? "-" : parts.joined(separator: ", ")
    }

    /// A scalar as text; numbers read as `JSONValue` reads them (whole ones as integers).
    private static func scalarText(_ value: JOSEValue?) -> String? {
        switch value.map(JSONValue.init) {
        case .string(let text): text
        case .int(let number): String(number)
        case .double(let number): String(number)
        case .bool(let flag): String(flag)
        default: nil
        }
    }
}
