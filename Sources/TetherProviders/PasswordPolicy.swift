import Foundation

/// The rules a new password must meet, and the normal form every password is hashed in.
///
/// Length is counted in Unicode code points of the NFKC form, as NIST SP 800-63B
/// suggests, so the same password typed on different keyboards (composed or
/// decomposed accents, full-width digits) counts and hashes the same.
public struct PasswordPolicy: Sendable, Hashable {
    /// The fewest characters a new password may have.
    public var minimumLength: Int
    /// The most characters a password may have; also bounds the work one sign-in can cause.
    public var maximumLength: Int

    /// 8 to 128 characters.
    public init(minimumLength: Int = 8, maximumLength: Int = 128) {
        self.minimumLength = minimumLength
        self.maximumLength = maximumLength
    }

    /// The NFKC form of `password`: what is hashed and counted.
    public static func normalized(_ password: String) -> String {
        password.precomposedStringWithCompatibilityMapping
    }

    /// Checks a new password.
    ///
    /// - Throws: `invalid_request` pointing at `pointer`, saying how long a password must be.
    public func validate(_ password: String, pointer: String = "/password") throws(ProviderError) {
        let length = Self.normalized(password).unicodeScalars.count
        guard (minimumLength...maximumLength).contains(length) else {
            throw ProviderError.invalidRequest(
                "The password must be \(minimumLength) to \(maximumLength) characters long.", pointer: pointer)
        }
    }
}
