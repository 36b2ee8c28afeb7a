import Foundation
import Testing
import TetherCore
import TetherCrypto
import TetherTesting

/// The v2 second-factor routes as the Firebase SDKs call them (WIRE-FACTS §6e).
@Suite("Firebase surface: v2 second factors")
struct FirebaseMFATests {
    private func v2(_ firebase: FirebaseApp, _ method: String, _ body: JSONValue) async throws -> FirebaseAnswer {
        FirebaseAnswer(try await firebase.app.client.post("/identitytoolkit.googleapis.com/v2/accounts/\(method)?key=k", json: body))
    }

    /// Marks the user's email verified, as firebase-admin's `update_user(email_verified=True)` does: Firebase
    /// enrols second factors only on a verified address.
    private func verifyEmail(_ firebase: FirebaseApp, localId: String) async throws {
        let updated = try await firebase.admin("accounts:update", .object(["localId": .string(localId), "emailVerified": true]))
        #expect(updated.status == 200, "\(updated.text)")
    }

    /// `mfaSignIn:start` then `:finalize` of a pending sign-in with a phone factor's texted code.
    private func finishWithTheTextedCode(
        _ firebase: FirebaseApp, pending: String, enrollmentId: String, phone: String
    ) async throws -> FirebaseAnswer {
        let sent = try await v2(firebase, "mfaSignIn:start", .object([
            "mfaPendingCredential": .string(pending), "mfaEnrollmentId": .string(enrollmentId),
            "phoneSignInInfo": .object(["phoneNumber": .string(phone)]),
        ]))
        guard case .object(let response)? = sent.body["phoneResponseInfo"], case .string(let challenge)? = response["sessionInfo"] else {
            return sent
        }
        return try await v2(firebase, "mfaSignIn:finalize", .object([
            "mfaPendingCredential": .string(pending),
            "phoneVerificationInfo": .object(["sessionInfo": .string(challenge), "code": .string(try await firebase.app.smsCode(to: phone))]),
        ]))
    }

    /// A malformed phone number and an eleventh factor answer the codes the SDKs map (the iOS SDK reports
    /// INVALID_ARGUMENT as an internal error).
    @Test func aMalformedNumberAndAnEleventhFactorAnswerFirebasesCodes() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "cap@example.com", "password": "cap's password"]))
            let idToken = try #require(signUp.string("idToken"))
            let unverified = try await v2(firebase, "mfaEnrollment:start", .object(["idToken": .string(idToken), "totpEnrollmentInfo": .object([:])]))
            #expect(unverified.status == 400 && unverified.errorMessage?.hasPrefix("UNVERIFIED_EMAIL") == true, "\(unverified.text)")
            try await verifyEmail(firebase, localId: try #require(signUp.string("localId")))
            for number in ["12345", "+0123456789", "+1 555 555 0100"] {
                let refused = try await v2(firebase, "mfaEnrollment:start", .object([
                    "idToken": .string(idToken), "phoneEnrollmentInfo": .object(["phoneNumber": .string(number)]),
                ]))
                #expect(refused.status == 400 && refused.errorMessage?.hasPrefix("INVALID_PHONE_NUMBER") == true, "\(number): \(refused.text)")
            }
            // The same user fills the cap on /v1.
            let v1 = try await firebase.app.signIn(firebase.app.password("cap@example.com", "cap's password")).decodeJSON(SignedIn.self)
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(v1.session.accessToken)"]
            for _ in 0..<UserAccount.maxFactors {
                try await firebase.app.enrolTOTP(accessToken: v1.session.accessToken)
            }
            let eleventh = try await v2(firebase, "mfaEnrollment:start", .object(["idToken": .string(idToken), "totpEnrollmentInfo": .object([:])]))
            #expect(eleventh.status == 400 && eleventh.errorMessage == "SECOND_FACTOR_LIMIT_EXCEEDED", "\(eleventh.text)")
        }
    }

    /// An account with a factor keeps a proved address: a password linked under another address (`accounts:signUp`
    /// with an `idToken`), which would make that address the account's, unproved, is refused before anything is
    /// written, so the address's owner is not locked out (a factor's account is never taken over).
    @Test func aPasswordLinkGivesAnAccountWithAFactorNoUnprovedAddress() async throws {
        try await FirebaseApp.run { firebase in
            let token = try await firebase.appleToken("apple-keeps-address", email: "keeper@privaterelay.appleid.com")
            let apple = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(token)")
            let start = try await v2(firebase, "mfaEnrollment:start", .object([
                "idToken": .string(try #require(apple.string("idToken"), "\(apple.text)")), "totpEnrollmentInfo": .object([:]),
            ]))
            guard case .object(let info)? = start.body["totpSessionInfo"], case .string(let secret)? = info["sharedSecretKey"],
                  case .string(let sessionInfo)? = info["sessionInfo"] else { Issue.record("\(start.text)"); return }
            let finalized = try await v2(firebase, "mfaEnrollment:finalize", .object([
                "idToken": .string(try #require(apple.string("idToken"))),
                "totpVerificationInfo": .object([
                    "sessionInfo": .string(sessionInfo), "verificationCode": .string(try TOTP(secret: try Base32.decode(secret)).code(at: Date())),
                ]),
            ]))
            let idToken = try #require(finalized.string("idToken"), "\(finalized.text)")
            let before = try await firebase.app.totalEvents()
            let linked = try await firebase.call("accounts:signUp", .object([
                "idToken": .string(idToken), "email": "owner@gmail.com", "password": "the squatter's password",
            ]))
            #expect(linked.errorMessage?.hasPrefix("UNVERIFIED_EMAIL") == true, "\(linked.text)")
            #expect(try await firebase.app.totalEvents() == before)
            let localId = JSONValue.string(try #require(apple.string("localId")))
            let moved = try await firebase.admin("accounts:update", .object(["localId": localId, "email": "keeper@example.com"]))
            #expect(moved.errorMessage?.hasPrefix("UNVERIFIED_EMAIL") == true, "an admin's move too: \(moved.text)")
            // Beside the factors' removal (firebase-admin's updateUser may send both), the move is allowed.
            let reset = try await firebase.admin("accounts:update", .object(["localId": localId, "email": "keeper@example.com", "mfa": .object([:])]))
            #expect(reset.status == 200, "\(reset.text)")
            let owner = try await firebase.app.signIn(try await firebase.app.google("google-owner", email: "owner@gmail.com"))
            #expect(owner.status == 201, "the address's owner is a new user: \(owner.bodyText)")
        }
    }

    @Test func totpEnrolmentThenASignInFinishedWithTheCode() async throws {
        try await FirebaseApp.run { firebase in
            let signUp = try await firebase.call("accounts:signUp", .object(["email": "tia@example.com", "password": "tia's password"]))
            let idToken = try #require(signUp.string("idToken"))
            try await verifyEmail(firebase, localId: try #require(signUp.string("localId")))
            let start = try await v2(firebase, "mfaEnrollment:start", .object(["idToken": .string(idToken), "totpEnrollmentInfo": .object([:])]))
            #expect(start.status == 200, "\(start.text)")
            guard case .object(let info)? = start.body["totpSessionInfo"], case .string(let secret)? = info["sharedSecretKey"],
                  case .string(let sessionInfo)? = info["sessionInfo"] else { Issue.record("\(start.text)"); return }
            #expect(info["verificationCodeLength"] == .int(6) && info["periodSec"] == .int(30))
            let totp = try TOTP(secret: try Base32.decode(secret))
            let sessionsBefore = try await firebase.app.eventCount("SessionStarted")
            let wrong = try await v2(firebase, "mfaEnrollment:finalize", .object([
                "idToken": .string(idToken), "totpVerificationInfo": .object(["sessionInfo": .string(sessionInfo), "verificationCode": "000000" == totp.code(at: Date()) ? "111111" : "000000"]),
            ]))
            #expect(wrong.errorMessage?.hasPrefix("INVALID_CODE") == true, "\(wrong.text)")
            // A factor's name longer than a user's is refused, and the factor stays unconfirmed.
            let overlong = try await v2(firebase, "mfaEnrollment:finalize", .object([
                "idToken": .string(idToken), "displayName": .string(String(repeating: "a", count: UserAccount.maximumDisplayNameLength + 1)),
                "totpVerificationInfo": .object(["sessionInfo": .string(sessionInfo), "verificationCode": .string(totp.code(at: Date()))]),
            ]))
            #expect(overlong.errorMessage?.hasPrefix("INVALID_ARGUMENT") == true, "\(overlong.text)")
            #expect(try await firebase.app.eventCount("MFAFactorConfirmed") == 0)
            // A refused code opens no session either.
            #expect(try await firebase.app.eventCount("SessionStarted") == sessionsBefore)
            let beforeFinalize = try await firebase.app.lastEventPosition()
            let finalized = try await v2(firebase, "mfaEnrollment:finalize", .object([
                "idToken": .string(idToken), "displayName": "Authenticator",
                "totpVerificationInfo": .object(["sessionInfo": .string(sessionInfo), "verificationCode": .string(totp.code(at: Date()))]),
            ]))
            #expect(finalized.status == 200, "\(finalized.text)")
            // The confirmation and the session it answers with are one command: both written, or neither.
            #expect(try await firebase.app.transactions(after: beforeFinalize) == 1)
            #expect(finalized.string("idToken") != nil && finalized.string("refreshToken") != nil)
            // The code just proved the new factor: the tokens name it, as Firebase's do.
            guard case .object(let enrolledClaims)? = finalized.idTokenClaims["firebase"] else { Issue.record("no firebase claim"); return }
            #expect(enrolledClaims["sign_in_second_factor"] == "totp")
            #expect(enrolledClaims["second_factor_identifier"] == .string(sessionInfo))
            let lookup = try await firebase.call("accounts:lookup", .object(["idToken": .string(finalized.string("idToken")!)]))
            guard case .array(let mfaInfo)? = lookup.users.first?["mfaInfo"], case .object(let factor)? = mfaInfo.first else {
                Issue.record("\(lookup.text)"); return
            }
            #expect(factor["totpInfo"] == .object([:]))
            #expect(factor["displayName"] == "Authenticator", "the name given at finalize")
            guard case .string(let enrollmentId)? = factor["mfaEnrollmentId"] else { Issue.record("no enrollment id"); return }
            let adminLookup = try await firebase.admin("accounts:lookup", .object(["localId": .array([.string(try #require(signUp.string("localId")))])]))
            guard case .array(let adminInfo)? = adminLookup.users.first?["mfaInfo"], case .object(let adminFactor)? = adminInfo.first else {
                Issue.record("\(adminLookup.text)"); return
            }
            #expect(adminFactor["displayName"] == "Authenticator")

            let first = try await firebase.call("accounts:signInWithPassword", .object(["email": "tia@example.com", "password": "tia's password"]))
            #expect(first.status == 200)
            #expect(first.body["idToken"] == nil)
            guard case .array(let hints)? = first.body["mfaInfo"], case .object(let hint)? = hints.first else { Issue.record("\(first.text)"); return }
            #expect(hint["displayName"] == "Authenticator")
            let pending = try #require(first.string("mfaPendingCredential"))
            #expect(try await v2(firebase, "mfaSignIn:finalize", .object(["totpVerificationInfo": .object(["verificationCode": "123456"])])).errorMessage
                    == "MISSING_MFA_PENDING_CREDENTIAL")
            #expect(try await v2(firebase, "mfaSignIn:finalize", .object([
                "mfaPendingCredential": "forged", "mfaEnrollmentId": .string(enrollmentId), "totpVerificationInfo": .object(["verificationCode": "123456"]),
            ])).errorMessage?.hasPrefix("INVALID_MFA_PENDING_CREDENTIAL") == true)
            let done = try await v2(firebase, "mfaSignIn:finalize", .object([
                "mfaPendingCredential": .string(pending), "mfaEnrollmentId": .string(enrollmentId),
                "totpVerificationInfo": .object(["verificationCode": .string(totp.code(at: Date().addingTimeInterval(30)))]),
            ]))
            #expect(done.status == 200, "\(done.text)")
            guard case .object(let fb)? = done.idTokenClaims["firebase"] else { Issue.record("no firebase claim"); return }
            #expect(fb["sign_in_second_factor"] == "totp")
            #expect(fb["second_factor_identifier"] == .string(enrollmentId))
            #expect(fb["sign_in_provider"] == "password")
            let refreshed = try await firebase.refresh(done.string("refreshToken")!)
            #expect(refreshed.status == 200)
            guard case .object(let refreshedClaims)? = refreshed.idTokenClaims["firebase"] else { Issue.record("no firebase claim"); return }
            #expect(refreshedClaims["sign_in_second_factor"] == "totp")
            #expect(refreshedClaims["second_factor_identifier"] == .string(enrollmentId), "a refresh keeps the session's second factor")

            // An admin removes the factors (firebase-admin's `multiFactor: {enrolledFactors: null}`); a list of them,
            // or factors given at a create or an import, are refused, never answered 200 with nothing done.
            let localId = try #require(signUp.string("localId"))
            let listed = try await firebase.admin("accounts:update", .object([
                "localId": .string(localId), "mfa": .object(["enrollments": .array([.object(["phoneInfo": "+15555550100"])])]),
            ]))
            #expect(listed.errorMessage?.hasPrefix("OPERATION_NOT_ALLOWED") == true, "\(listed.text)")
            #expect(try await firebase.call("accounts:update", .object(["idToken": .string(idToken), "mfa": .object([:])])).status == 403)
            #expect(try await firebase.app.eventCount("MFAFactorRemoved") == 0)
            let cleared = try await firebase.admin("accounts:update", .object(["localId": .string(localId), "mfa": .object([:])]))
            #expect(cleared.status == 200, "\(cleared.text)")
            let after = try await firebase.admin("accounts:lookup", .object(["localId": .array([.string(localId)])]))
            #expect(after.users.first?["mfaInfo"] == nil, "\(after.text)")
            let plain = try await firebase.call("accounts:signInWithPassword", .object(["email": "tia@example.com", "password": "tia's password"]))
            #expect(plain.string("idToken") != nil, "no second factor left: \(plain.text)")
            let given: JSONValue = .array([.object(["phoneInfo": "+15555550101"])])
            let created = try await firebase.admin("accounts", .object(["email": "mfa-given@example.com", "mfaInfo": given]))
            #expect(created.errorMessage?.hasPrefix("OPERATION_NOT_ALLOWED") == true, "\(created.text)")
            let imported = try await firebase.admin("accounts:batchCreate", .object(["users": .array([
                .object(["localId": "imported-mfa", "email": "mfa-import@example.com", "mfaInfo": given]),
            ])]))
            #expect(imported.text.contains("OPERATION_NOT_ALLOWED"), "\(imported.text)")
            #expect(try await firebase.admin("accounts:lookup", .object(["email": .array(["mfa-given@example.com", "mfa-import@example.com"])])).users.isEmpty)
        }
    }

    @Test func phoneEnrolmentThenAnIdPSignInFinishedWithTheTextedCodeAndWithdrawal() async throws {
        try await FirebaseApp.run { firebase in
            // Apple proves the address it gives.
            let signIn = try await firebase.signInWithIdp(
                "providerId=apple.com&id_token=\(try await firebase.appleToken("apple-mfa", email: "mfa@privaterelay.appleid.com"))")
            let idToken = try #require(signIn.string("idToken"))
            let phone = "+15555550177"
            let start = try await v2(firebase, "mfaEnrollment:start", .object([
                "idToken": .string(idToken), "phoneEnrollmentInfo": .object(["phoneNumber": .string(phone)]),
            ]))
            guard case .object(let info)? = start.body["phoneSessionInfo"], case .string(let sessionInfo)? = info["sessionInfo"] else {
                Issue.record("\(start.text)"); return
            }
            let finalized = try await v2(firebase, "mfaEnrollment:finalize", .object([
                "idToken": .string(idToken), "displayName": "Work phone",
                "phoneVerificationInfo": .object(["sessionInfo": .string(sessionInfo), "code": .string(try await firebase.app.smsCode(to: phone))]),
            ]))
            #expect(finalized.status == 200, "\(finalized.text)")
            // The caller's session stays, as Firebase's refresh tokens do: a client whose answer was lost is not signed out.
            #expect(try await firebase.refresh(try #require(signIn.string("refreshToken"))).status == 200)

            let twice = try await v2(firebase, "mfaEnrollment:start", .object([
                "idToken": .string(try #require(finalized.string("idToken"))), "phoneEnrollmentInfo": .object(["phoneNumber": .string(phone)]),
            ]))
            #expect(twice.errorMessage == "SECOND_FACTOR_EXISTS")
            let anonymous = try await firebase.call("accounts:signUp", .object([:]))
            #expect(try await v2(firebase, "mfaEnrollment:start", .object([
                "idToken": .string(try #require(anonymous.string("idToken"))), "totpEnrollmentInfo": .object([:]),
            ])).errorMessage == "UNSUPPORTED_FIRST_FACTOR")

            let again = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(try await firebase.appleToken("apple-mfa"))")
            let pending = try #require(again.string("mfaPendingCredential"))
            guard case .array(let hints)? = again.body["mfaInfo"], case .object(let hint)? = hints.first,
                  case .string(let enrollmentId)? = hint["mfaEnrollmentId"] else { Issue.record("\(again.text)"); return }
            #expect(hint["phoneInfo"] == .string("+*******0177"))
            #expect(hint["displayName"] == "Work phone")
            let unnamed = try await v2(firebase, "mfaSignIn:start", .object([
                "mfaPendingCredential": .string(pending), "phoneSignInInfo": .object(["phoneNumber": .string(phone)]),
            ]))
            #expect(unnamed.errorMessage == "MISSING_MFA_ENROLLMENT_ID", "\(unnamed.text)")
            let unknownFactor = try await v2(firebase, "mfaSignIn:start", .object([
                "mfaPendingCredential": .string(pending), "mfaEnrollmentId": "not-an-id",
            ]))
            #expect(unknownFactor.errorMessage == "MFA_ENROLLMENT_NOT_FOUND", "\(unknownFactor.text)")
            let done = try await finishWithTheTextedCode(firebase, pending: pending, enrollmentId: enrollmentId, phone: phone)
            #expect(done.status == 200, "\(done.text)")
            guard case .object(let fb)? = done.idTokenClaims["firebase"] else { Issue.record("no firebase claim"); return }
            #expect(fb["sign_in_second_factor"] == "phone")
            #expect(fb["second_factor_identifier"] == .string(enrollmentId))

            // Another device passes the same factor.
            let other = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(try await firebase.appleToken("apple-mfa"))")
            let otherDone = try await finishWithTheTextedCode(
                firebase, pending: try #require(other.string("mfaPendingCredential")), enrollmentId: enrollmentId, phone: phone)
            #expect(otherDone.status == 200, "\(otherDone.text)")

            let beforeWithdrawal = try await firebase.app.lastEventPosition()
            let withdrawn = try await v2(firebase, "mfaEnrollment:withdraw", .object([
                "idToken": .string(try #require(done.string("idToken"))), "mfaEnrollmentId": .string(enrollmentId),
            ]))
            #expect(withdrawn.status == 200, "\(withdrawn.text)")
            // The withdrawal and the session it answers with are one command.
            #expect(try await firebase.app.transactions(after: beforeWithdrawal) == 1)
            // The sessions that passed the factor stand, and their next tokens no longer name it.
            for refreshToken in [try #require(done.string("refreshToken")), try #require(otherDone.string("refreshToken"))] {
                let refreshed = try await firebase.refresh(refreshToken)
                #expect(refreshed.status == 200, "\(refreshed.text)")
                guard case .object(let claims)? = refreshed.idTokenClaims["firebase"] else { Issue.record("no firebase claim"); return }
                #expect(claims["second_factor_identifier"] == nil, "\(claims)")
            }
            #expect(withdrawn.string("idToken") != nil && withdrawn.string("refreshToken") != nil)
            guard case .object(let after)? = withdrawn.idTokenClaims["firebase"] else { Issue.record("no firebase claim"); return }
            #expect(after["second_factor_identifier"] == nil, "the withdrawn factor is not named: \(after)")
            let plain = try await firebase.signInWithIdp("providerId=apple.com&id_token=\(try await firebase.appleToken("apple-mfa"))")
            #expect(plain.string("idToken") != nil, "no second factor any more: \(plain.text)")
        }
    }
}
