import Foundation
import TetherCore
import TetherHTTP

/// The second-factor routes of `/v1`: enrolment under `/v1/users/me/mfa`, the sign-in challenge under `/v1/mfa`.
extension V1Routes {
    func registerMFA(on router: inout Router) {
        router.post("/v1/users/me/mfa/totp") { request in
            try await once(request) { claims in
                let body = request.body.isEmpty ? EnrolBody() : try request.decodeJSON(EnrolBody.self)
                let enrolment = try await accounts.enrolTOTP(
                    userId: claims.userId, authTime: claims.authTime, displayName: try UserAccount.factorDisplayName(body.displayName),
                    context: context(request, claims.userId))
                return try HTTPResponse.json(
                    TOTPEnrolmentBody(factorId: enrolment.factorId, secret: enrolment.secret, otpauthUri: enrolment.otpauthURI),
                    status: 201)
            }
        }
        router.post("/v1/users/me/mfa/phone") { request in
            try await once(request) { claims in
                let body = try request.decodeJSON(PhoneEnrolBody.self)
                let factorId = try await accounts.enrolPhone(
                    userId: claims.userId, authTime: claims.authTime, phoneNumber: body.phoneNumber,
                    displayName: try UserAccount.factorDisplayName(body.displayName), sms: try smsSender(), context: context(request, claims.userId))
                return try HTTPResponse.json(["factorId": factorId.lowercasedText], status: 201)
            }
        }
        for (path, type) in [("/v1/users/me/mfa/totp/verify", MFAFactorType.totp), ("/v1/users/me/mfa/phone/verify", .phone)] {
            router.post(path) { request in
                try await once(request) { claims in
                    let body = try request.decodeJSON(ConfirmBody.self)
                    let confirmed = try await accounts.confirmFactor(
                        userId: claims.userId, factorId: try Self.factorId(body.factorId), type: type, code: body.code,
                        context: context(request, claims.userId))
                    let factor = FactorBody(
                        id: confirmed.factor.id, type: confirmed.factor.type.rawValue, displayName: confirmed.factor.displayName,
                        enrolledAt: ISO8601Milliseconds.format(confirmed.factor.enrolledAt),
                        phoneHint: confirmed.factor.phoneNumber.map(PhoneNumber.hint))
                    return try HTTPResponse.json(ConfirmedBody(factor: factor, recoveryCodes: confirmed.recoveryCodes))
                }
            }
        }
        router.delete("/v1/users/me/mfa/{factorId}") { request in
            try await once(request) { claims in
                let account = try await accounts.removeFactors(
                    userId: claims.userId, factorIds: [try Self.factorId(request.pathParameters["factorId"] ?? "")],
                    authTime: claims.authTime, context: context(request, claims.userId))
                return HTTPResponse.json(UserAnswer(user: UserBody(account)))
            }
        }
        router.post("/v1/users/me/mfa/recovery-codes") { request in
            try await once(request) { claims in
                let codes = try await accounts.regenerateRecoveryCodes(
                    userId: claims.userId, authTime: claims.authTime, context: context(request, claims.userId))
                return try HTTPResponse.json(["recoveryCodes": codes], status: 201)
            }
        }
        router.post("/v1/mfa/challenge") { request in
            try await idempotency.respond(to: request, principal: nil) {
                let body = try request.decodeJSON(ChallengeBody.self)
                let pending = try await pendingCredentials.read(body.mfaPendingCredential)
                let factorId = try Self.factorId(body.factorId)
                let factor = try await accounts.sendChallengeCode(
                    userId: pending.userId, challengeId: pending.challengeId, factorId: factorId,
                    presentedJKT: try await proofKey(of: request), sms: sms,
                    context: context(request, pending.userId))
                return try HTTPResponse.json(ChallengeSentBody(
                    factorId: factorId.lowercasedText, phoneHint: factor.phoneNumber.map(PhoneNumber.hint)))
            }
        }
        router.post("/v1/mfa/verify") { request in
            try await handingOutSession(request) {
                let body = try request.decodeJSON(VerifyBody.self)
                let pending = try await pendingCredentials.read(body.mfaPendingCredential)
                let jkt = try await proofKey(of: request)
                let (session, refreshToken) = newSession(amr: [], jkt: jkt)
                let (started, account) = try await accounts.verifyChallenge(
                    userId: pending.userId, challengeId: pending.challengeId, factorId: try body.factorId.map(Self.factorId),
                    code: body.code, recoveryCode: body.recoveryCode, session: session, context: context(request, pending.userId))
                let access = try await issuer.issue(
                    userId: pending.userId, sessionId: started.id, authTime: started.authTime, amr: started.amr, jkt: started.jkt)
                return HTTPResponse.json(RefreshResponse(
                    user: UserBody(account),
                    session: SessionBody(id: started.id, accessToken: access.token, isBound: started.jkt != nil,
                                         expiresIn: access.expiresIn, refreshToken: refreshToken)))
            }
        }
    }

    /// 401 `mfa_required`: the first factor was right; the sign-in completes at `POST /v1/mfa/verify`.
    /// The `mfa_required` problem: the pending credential and the factors to choose from.
    static func mfaRequired(userId: UUID, pendingCredential: String, factors: [MFAState.Factor]) -> Problem {
        var problem = Problem(
            status: 401, code: "mfa_required", title: "Second factor required",
            detail: "Complete the sign-in with one of the user's second factors at POST /v1/mfa/verify.",
            extensions: [
                "mfaPendingCredential": .string(pendingCredential),
                "factors": .array(factors.map { factor in
                    var entry: [String: JSONValue] = [
                        "id": .string(factor.id.lowercasedText), "type": .string(factor.type.rawValue),
                        "displayName": factor.displayName.map(JSONValue.string) ?? .null,
                    ]
                    if let phoneNumber = factor.phoneNumber { entry["phoneHint"] = .string(PhoneNumber.hint(phoneNumber)) }
                    return .object(entry)
                }),
            ])
        // A copy kept for a retry (`Idempotency-Key`) shows their factors: it is theirs, and goes when they are erased.
        problem.subject = userId
        return problem
    }

    private func smsSender() throws -> any SMSSender {
        guard let sms else { throw AccountService.noSMSSender }
        return sms
    }

    private static func factorId(_ text: String) throws(AccountError) -> UUID {
        guard let id = UUID(text: text) else { throw .mfaFactorNotFound }
        return id
    }

    private struct EnrolBody: Decodable {
        var displayName: String?
    }

    private struct PhoneEnrolBody: Decodable {
        var phoneNumber: String
        var displayName: String?
    }

    private struct ConfirmBody: Decodable {
        var factorId: String
        var code: String
    }

    private struct ChallengeBody: Decodable {
        var mfaPendingCredential: String
        var factorId: String
    }

    private struct VerifyBody: Decodable {
        var mfaPendingCredential: String
        var factorId: String?
        var code: String?
        var recoveryCode: String?
    }

    private struct TOTPEnrolmentBody: Encodable {
        var factorId: UUID
        var secret: String
        var otpauthUri: String

        func encode(to encoder: any Encoder) throws {
            enum Keys: String, CodingKey { case factorId, secret, otpauthUri }
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(factorId.lowercasedText, forKey: .factorId)
            try container.encode(secret, forKey: .secret)
            try container.encode(otpauthUri, forKey: .otpauthUri)
        }
    }

    private struct ConfirmedBody: Encodable {
        var factor: FactorBody
        var recoveryCodes: [String]?
    }

    private struct ChallengeSentBody: Encodable {
        var factorId: String
        var phoneHint: String?
    }
}
