import Foundation

/// How Tether treats an email that two accounts might share (`TETHER_EMAIL_POLICY`).
public enum EmailPolicy: String, Sendable, CaseIterable {
    /// Firebase's default: one account per email, trusted providers take over unverified owners.
    case oneAccountPerEmail = "one-account-per-email"
    /// Parse's rules: link only what the client says; emails may repeat.
    case allowDuplicateEmails = "allow-duplicate-emails"

    /// The normalized email that `identity` claims and that no other account may hold, if any.
    ///
    /// Commands about it are serialised on it, and an account already holding it decides how a
    /// sign-in with an unknown identity goes (``SignInRoute``).
    public func exclusiveEmail(of identity: ExternalIdentity) -> String? {
        self == .oneAccountPerEmail ? identity.normalizedEmail : nil
    }
}

/// Which way a first-factor sign-in goes, decided from what the log says about the identity and its email.
public enum SignInRoute: Sendable, Hashable {
    /// The identity is linked to a user already: that user signs in.
    case returning(UUID)
    /// No one holds the identity, but an account with an unverified email (or with no way in left) holds its
    /// address, and the identity's provider vouches for that address: the account is taken over (SEMANTICS §2).
    case takeOver(UUID)
    /// No one holds the identity or its address: a new user.
    case register

    /// Routes a sign-in with `identity`.
    ///
    /// - Parameters:
    ///   - owner: the user the identity is linked to, if any.
    ///   - emailOwner: the oldest account holding the identity's exclusive email (``EmailPolicy/exclusiveEmail(of:)``), if any.
    /// - Throws: ``AccountError/accountExistsWithDifferentCredential(email:signInMethods:owner:)`` when the address
    ///   belongs to an account this identity cannot take over: its email is verified, or the provider does not
    ///   vouch for the address (Facebook never does).
    public static func route(
        _ identity: ExternalIdentity, owner: UserAccount?, emailOwner: UserAccount?
    ) throws(AccountError) -> SignInRoute {
        if let owner { return .returning(owner.id) }
        // A password is made by a sign-up, never by a sign-in: one whose account went while it was being verified
        // (erased, or moved to another address) signs in to nothing.
        guard identity.provider != "password" else { throw .invalidCredential }
        guard let emailOwner, let email = identity.normalizedEmail else { return .register }
        // An account left with no way in (its last provider unlinked by the provider itself, as Apple's
        // consent-revoked does, or by an admin) is reached by whoever proves its address, as a reset would
        // reach it: a provider that vouches for the address takes it over, verified or not.
        guard identity.isTrustedForEmail, !emailOwner.isEmailVerified || emailOwner.signInMethods.isEmpty else {
            throw .accountExistsWithDifferentCredential(email: email, signInMethods: emailOwner.signInMethods, owner: emailOwner.id)
        }
        return .takeOver(emailOwner.id)
    }
}
