import Foundation
import TetherCore
import TetherHTTP
import TetherProviders

/// The Identity Toolkit's email actions (WIRE-FACTS §3a–c): `accounts:sendOobCode` for PASSWORD_RESET,
/// VERIFY_EMAIL and VERIFY_AND_CHANGE_EMAIL (with `returnOobLink` for admins, which firebase-admin's
/// `generate_password_reset_link` and `generate_email_verification_link` send), `accounts:resetPassword`
/// (with a code only, it names the code's purpose without spending it), and `accounts:update` with an
/// `oobCode`. Unlike the emulator, codes expire (`EXPIRED_OOB_CODE`) and are bound to their address.
///
/// A client's PASSWORD_RESET answers `{kind, email}` whatever the address, as Firebase does with email
/// enumeration protection on; an admin is told `EMAIL_NOT_FOUND`.
extension FirebaseRoutes {
    func registerEmail(on router: inout Router) {
        let v1 = Self.identityToolkit
        router.post("\(v1)/projects/{projectId}/accounts:sendOobCode") { request in try await answer(request, admin: true, sendOobCode) }
    }

    /// `tether dev`'s list of pending codes, which asks for no credential: registered outside the cross-origin
    /// policy, so that a page of another origin cannot read the codes of the developer's local server.
    func registerEmulatorRoutes(on router: inout Router) {
        router.get("/emulator/v1/projects/{projectId}/oobCodes") { request in
            try await answer(request, admin: false) { _ in
                guard PublicBase.isFromThisMachine(request) else { throw FirebaseError("NOT_FOUND", "Not Found", status: 404) }
                return try await oobCodes()
            }
        }
    }

    /// `accounts:sendOobCode`.
    func sendOobCode(_ request: FirebaseRequest) async throws -> JSONValue {
        let body = request.body
        guard let type = try body.string("requestType"), !type.isEmpty else { throw FirebaseError("MISSING_REQ_TYPE") }
        let returnLink = try body.bool("returnOobLink") ?? false
        if returnLink, request.admin == nil { throw FirebaseError.insufficientPermission }
        if let continueURL = try body.string("continueUrl"), URL(string: continueURL)?.scheme == nil || URL(string: continueURL)?.host == nil {
            throw FirebaseError("INVALID_CONTINUE_URI", "((expected an absolute URI with valid scheme and host))")
        }
        let email = try body.email().flatMap { $0.isEmpty ? nil : $0 }
        let flows = try self.flows(generatingLinks: returnLink)
        var answer: [String: JSONValue] = ["kind": "identitytoolkit#GetOobConfirmationCodeResponse"]
        let purpose: EmailCodePurpose
        switch type {
        case "PASSWORD_RESET": purpose = .passwordReset
        case "VERIFY_EMAIL": purpose = .verifyEmail
        case "VERIFY_AND_CHANGE_EMAIL": purpose = .changeEmail
        case "EMAIL_SIGNIN": throw FirebaseError("OPERATION_NOT_ALLOWED", "Email link sign-in is not offered by this server.")
        default: throw FirebaseError("INVALID_REQ_TYPE", "requestType takes PASSWORD_RESET, VERIFY_EMAIL or VERIFY_AND_CHANGE_EMAIL.")
        }
        let newEmail = try body.email("newEmail").flatMap { $0.isEmpty ? nil : $0 }
        if purpose == .changeEmail {
            guard let newEmail else { throw FirebaseError("MISSING_NEW_EMAIL") }
            guard AccountCommands.isEmail(newEmail) else { throw FirebaseError("INVALID_EMAIL") }
        }
        do {
            if request.admin != nil, body.members["idToken"] == nil {
                // An admin names the account by its address.
                guard let email else { throw FirebaseError("MISSING_EMAIL") }
                guard AccountCommands.isEmail(email) else { throw FirebaseError("INVALID_EMAIL") }
                answer["email"] = .string(email)
                if returnLink {
                    let link = try await flows.generateLink(purpose, email: email, newEmail: newEmail, emailRequest(request))
                    answer["oobCode"] = .string(link.code)
                    answer["oobLink"] = .string(link.link)
                } else if purpose == .changeEmail {
                    throw FirebaseError("INVALID_ARGUMENT", "An admin changes an address with accounts:update, or returnOobLink for a link.")
                } else {
                    try await flows.mailCode(purpose, toOwnerOf: email, revealing: true, emailRequest(request))
                }
                return .object(answer)
            }
            switch purpose {
            case .passwordReset:
                guard let email else { throw FirebaseError("MISSING_EMAIL") }
                guard AccountCommands.isEmail(email) else { throw FirebaseError("INVALID_EMAIL") }
                try await flows.requestPasswordReset(email: email, emailRequest(request))
                answer["email"] = .string(email)
            case .verifyEmail:
                let (account, _) = try await authenticate(idToken: try body.string("idToken"))
                guard let address = account.email else { throw FirebaseError("MISSING_EMAIL") }
                do {
                    try await flows.sendVerification(userId: account.id, emailRequest(request, user: account.id))
                } catch let error as AccountError where error.reason == .emailAlreadyVerified {
                    // Nothing to prove: the SDKs call this without looking first.
                }
                answer["email"] = .string(address)
            case .changeEmail, .undoEmailChange:
                let (account, claims) = try await authenticate(idToken: try body.string("idToken"))
                try await flows.requestEmailChange(
                    userId: account.id, to: newEmail ?? "", authTime: claims.authTime, emailRequest(request, user: account.id))
                if let address = account.email { answer["email"] = .string(address) }
                answer["newEmail"] = .string(newEmail ?? "")
            }
        } catch let error as AccountError {
            // An admin's VERIFY_EMAIL of an unknown address is USER_NOT_FOUND (firebase-admin's UserNotFoundError);
            // only PASSWORD_RESET's is EMAIL_NOT_FOUND (WIRE-FACTS §3a).
            if error.reason == .notFound, purpose == .verifyEmail { throw FirebaseError.userNotFound }
            // Only a reset's limit has a code of its own; the SDKs map neither to the other's (WIRE-FACTS §6b).
            if error.reason == .rateLimited, purpose != .passwordReset { throw FirebaseError("TOO_MANY_ATTEMPTS_TRY_LATER", error.detail) }
            throw Self.oobError(error)
        }
        return .object(answer)
    }

    /// `accounts:resetPassword`: with `newPassword` it resets; with the code alone it names the code's
    /// purpose and address without spending it.
    func resetPassword(_ request: FirebaseRequest) async throws -> JSONValue {
        guard let code = try request.body.string("oobCode"), !code.isEmpty else { throw FirebaseError("MISSING_OOB_CODE") }
        let flows = try self.flows(generatingLinks: true)
        var answer: [String: JSONValue] = ["kind": "identitytoolkit#ResetPasswordResponse"]
        do {
            if let newPassword = try request.body.string("newPassword") {
                do { try commands.checkPassword(newPassword) } catch { throw Self.weakPassword(error) }
                let account = try await flows.resetPassword(code: code, newPassword: newPassword, context: context(request))
                answer["requestType"] = "PASSWORD_RESET"
                if let email = account.email { answer["email"] = .string(email) }
            } else {
                let (account, found) = try await flows.inspect(code: code, context: context(request))
                answer["requestType"] = .string(Self.requestType(found.purpose))
                switch found.purpose {
                case .changeEmail:
                    if let email = account.email { answer["email"] = .string(email) }
                    if let email = found.email { answer["newEmail"] = .string(email) }
                case .passwordReset, .verifyEmail, .undoEmailChange:
                    if let email = found.email { answer["email"] = .string(email) }
                }
            }
        } catch let error as AccountError {
            throw Self.oobError(error)
        }
        return .object(answer)
    }

    /// `accounts:update` with `oobCode`: a verification, an email change or its undo. No new tokens; the
    /// answer is the account after it. An `idToken` beside the code must be the code's own user's.
    func applyOobCode(_ code: String, _ request: FirebaseRequest) async throws -> JSONValue {
        let flows = try self.flows(generatingLinks: true)
        let caller = try request.body.string("idToken").flatMap { $0.isEmpty ? nil : $0 }
        let callerId = caller == nil ? nil : try await authenticate(idToken: caller).account.id
        let account: UserAccount
        do {
            // A confirmed change voids earlier tokens, as Firebase's does (the client signs in again).
            account = try await flows.confirm(
                code: code, purposes: [.verifyEmail, .changeEmail, .undoEmailChange], caller: callerId, emailRequest(request, user: callerId))
        } catch let error as AccountError {
            throw Self.oobError(error)
        }
        var answer: [String: JSONValue] = [
            "kind": "identitytoolkit#SetAccountInfoResponse", "localId": .string(Self.localId(of: account)),
            "emailVerified": .bool(account.isEmailVerified), "providerUserInfo": .array(FirebaseUserRecord.providerUserInfo(account)),
        ]
        if let email = account.email { answer["email"] = .string(email) }
        if let name = account.displayName { answer["displayName"] = .string(name) }
        if let photo = account.photoURL { answer["photoUrl"] = .string(photo) }
        if account.identities[ProviderName.password.rawValue] != nil { answer["passwordHash"] = .string(FirebaseUserRecord.redactedHash) }
        return .object(answer)
    }

    /// `GET /emulator/v1/projects/{projectId}/oobCodes` under `tether dev`: every code mailed or handed to an
    /// admin that can still be used, oldest first, as the emulator lists them (it deletes a code once used;
    /// Tether keeps the code in the user's history, and leaves used, expired and withdrawn ones out here).
    func oobCodes() async throws -> JSONValue {
        guard let outbox = emailFlows.devOutbox else {
            throw FirebaseError("NOT_FOUND", "Not Found", status: 404)
        }
        var users: [UUID: UserAccount] = [:]
        var pending: [(mail: DevMailOutbox.Entry, user: UserAccount)] = []
        for mail in outbox.mails() {
            guard let userId = EmailCodeFormat.userId(of: mail.code) else { continue }
            if users[userId] == nil { users[userId] = try await accounts.read(userId) }
            let hash = EmailCodeFormat.hash(mail.code)
            if let user = users[userId], let code = user.emailCodes.values.first(where: { $0.codeHash == hash }), !code.isSpent,
               code.expiresAt > Date() {
                pending.append((mail, user))
            }
        }
        let entries: [JSONValue] = pending.map { mail, user in
            var entry: [String: JSONValue] = [
                "email": .string(mail.to), "requestType": .string(Self.requestType(mail.template.purpose)),
                "oobCode": .string(mail.code), "oobLink": .string(mail.link),
            ]
            // As the emulator lists a change: under the user's address, with the one it moves to beside it.
            if mail.template == .changeEmail {
                entry["newEmail"] = .string(mail.to)
                if let current = user.email { entry["email"] = .string(current) }
            }
            return .object(entry)
        }
        return .object(["oobCodes": .array(entries)])
    }

    // MARK: Pieces

    /// The flows, when they can serve the request: a mail sender, or (for links an admin is handed, and
    /// codes that are used) none needed.
    private func flows(generatingLinks: Bool) throws(FirebaseError) -> EmailFlows {
        guard generatingLinks || emailFlows.sendsMail else {
            throw FirebaseError("OPERATION_NOT_ALLOWED", "This server sends no mail.")
        }
        return emailFlows
    }

    private func emailRequest(_ request: FirebaseRequest, user: UUID? = nil) -> EmailFlows.Request {
        EmailFlows.Request(
            context: context(request, user: user), locale: request.http.headers["x-firebase-locale"] ?? request.http.headers["accept-language"],
            style: .firebase, host: request.http.headers["host"])
    }

    /// Identity Toolkit's names of the purposes.
    static func requestType(_ purpose: EmailCodePurpose) -> String {
        switch purpose {
        case .passwordReset: "PASSWORD_RESET"
        case .verifyEmail: "VERIFY_EMAIL"
        case .changeEmail: "VERIFY_AND_CHANGE_EMAIL"
        case .undoEmailChange: "RECOVER_EMAIL"
        }
    }

    /// The Identity Toolkit's codes for the email flows' refusals.
    static func oobError(_ error: AccountError) -> FirebaseError {
        switch error.reason {
        case .invalidCode: error == .expiredCode ? FirebaseError("EXPIRED_OOB_CODE") : FirebaseError("INVALID_OOB_CODE")
        case .invalidRequest where error == EmailCodeFormat.malformed: FirebaseError("INVALID_OOB_CODE")
        case .notFound: FirebaseError("EMAIL_NOT_FOUND")
        case .emailAlreadyInUse: .emailExists
        case .rateLimited: FirebaseError("RESET_PASSWORD_EXCEED_LIMIT", error.detail)
        default: FirebaseError(converting: error)
        }
    }
}
