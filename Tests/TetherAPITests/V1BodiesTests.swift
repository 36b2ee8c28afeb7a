import Foundation
import Testing
@testable import TetherAPI
import TetherCore

/// The /v1 answers write their own JSON text (``JSONTextWritable``): it must be the text of the same
/// value written as a ``JSONValue`` (members sorted, nothing escaped but what JSON requires), member
/// for member as API.md's `User` and `Session` name them.
@Suite("The /v1 answers written as text")
struct V1BodiesTests {
    static let factor = FactorBody(
        id: UUID(uuidString: "6F1D2C7E-0B7A-4C1E-9D7E-3A1B2C3D4E5F")!, type: "phone", displayName: "Ada's \"work\" phone",
        enrolledAt: "2026-12-05T10:00:00.000Z", phoneHint: "+44 •••• ••12")

    static func user(complete: Bool) -> UserBody {
        UserBody(
            id: UUID(uuidString: "0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D")!,
            email: complete ? "ada@example.com" : nil, emailVerified: complete, displayName: complete ? "Ada \\ Lovelace\n" : nil,
            photoUrl: complete ? "https://example.com/a/b.png" : nil, disabled: !complete, createdAt: "2026-12-01T08:00:00.123Z",
            lastSignInAt: complete ? "2026-12-05T09:59:59.999Z" : nil,
            identities: complete
                ? [
                    .init(provider: "apple", uid: "001234.abcd", email: "x@privaterelay.appleid.com", emailVerified: true,
                          displayName: nil, linkedAt: "2026-12-01T08:00:00.123Z", emailForwarding: true),
                    .init(provider: "facebook", uid: "10215241773831025", email: nil, emailVerified: false,
                          displayName: "Ada L.", linkedAt: "2026-12-02T08:00:00.000Z", emailForwarding: nil),
                ]
                : [.init(provider: "anonymous", uid: "anon-1", email: nil, emailVerified: false, displayName: nil,
                         linkedAt: "2026-12-01T08:00:00.123Z", emailForwarding: nil)],
            mfa: complete ? [factor, FactorBody(id: factor.id, type: "totp", displayName: nil, enrolledAt: factor.enrolledAt, phoneHint: nil)] : [])
    }

    static func value(_ factor: FactorBody) -> JSONValue {
        var members: [String: JSONValue] = [
            "id": .string(factor.id.lowercasedText), "type": .string(factor.type),
            "displayName": factor.displayName.map(JSONValue.string) ?? .null, "enrolledAt": .string(factor.enrolledAt),
        ]
        if let hint = factor.phoneHint { members["phoneHint"] = .string(hint) }
        return .object(members)
    }

    static func value(_ user: UserBody) -> JSONValue {
        .object([
            "id": .string(user.id.lowercasedText), "email": user.email.map(JSONValue.string) ?? .null,
            "emailVerified": .bool(user.emailVerified), "displayName": user.displayName.map(JSONValue.string) ?? .null,
            "photoUrl": user.photoUrl.map(JSONValue.string) ?? .null, "disabled": .bool(user.disabled),
            "isAnonymous": .bool(user.isAnonymous), "createdAt": .string(user.createdAt),
            "lastSignInAt": user.lastSignInAt.map(JSONValue.string) ?? .null,
            "identities": .array(user.identities.map { identity in
                var members: [String: JSONValue] = [
                    "provider": .string(identity.provider), "uid": .string(identity.uid), "email": identity.email.map(JSONValue.string) ?? .null,
                    "emailVerified": .bool(identity.emailVerified), "displayName": identity.displayName.map(JSONValue.string) ?? .null,
                    "linkedAt": .string(identity.linkedAt),
                ]
                if let forwarding = identity.emailForwarding { members["emailForwarding"] = .bool(forwarding) }
                return .object(members)
            }),
            "mfa": .array(user.mfa.map(value)),
        ])
    }

    @Test(arguments: [true, false])
    func aUserIsWrittenAsTheValueItHolds(complete: Bool) throws {
        let user = Self.user(complete: complete)
        #expect(String(decoding: user.jsonText, as: UTF8.self) == String(decoding: try Self.value(user).jsonBytes(), as: UTF8.self))
        #expect(try user.jsonValue == Self.value(user))
        #expect(user.isAnonymous == !complete)
    }

    @Test(arguments: [true, false])
    func signInAndRefreshAnswersHoldTheSessionAndTheUser(isBound: Bool) throws {
        let user = Self.user(complete: true)
        let session = SessionBody(
            id: UUID(uuidString: "11111111-2222-4333-8444-555555555555")!, accessToken: "eyJ.a\"b.c", isBound: isBound, expiresIn: 900,
            refreshToken: "rt_abc/def")
        let sessionValue: JSONValue = [
            "id": "11111111-2222-4333-8444-555555555555", "accessToken": "eyJ.a\"b.c", "tokenType": .string(isBound ? "DPoP" : "Bearer"),
            "expiresIn": 900, "refreshToken": "rt_abc/def",
        ]
        let signIn = SignInResponse(user: user, isNewUser: isBound, session: session)
        #expect(signIn.jsonText == (try JSONValue.object(["user": Self.value(user), "isNewUser": .bool(isBound), "session": sessionValue]).jsonBytes()))
        #expect(RefreshResponse(user: user, session: session).jsonText == (try JSONValue.object(["user": Self.value(user), "session": sessionValue]).jsonBytes()))
        #expect(UserAnswer(user: user).jsonText == (try JSONValue.object(["user": Self.value(user)]).jsonBytes()))
    }

    /// A factor is also a member of `Encodable` answers (enrolment, challenges): encoded, it is the value it writes.
    @Test func aFactorEncodedByAnEncoderIsTheValueItWrites() throws {
        for factor in [Self.factor, FactorBody(id: Self.factor.id, type: "totp", displayName: nil, enrolledAt: "x", phoneHint: nil)] {
            #expect(factor.jsonText == (try Self.value(factor).jsonBytes()))
            let encoded = try CompactJSONEncoder(dates: .iso8601Seconds).encode(["factor": factor])
            #expect(encoded == (try JSONValue.object(["factor": Self.value(factor)]).jsonBytes()))
            #expect(try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(factor)) == Self.value(factor))
        }
    }
}
