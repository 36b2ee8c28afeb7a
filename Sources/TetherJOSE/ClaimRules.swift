import Foundation

/// The time and identity checks on a claim set, shared by JWT and DPoP verification.
struct ClaimRules {
    var issuer: String?
    var audiences: Set<String> = []
    var leeway: TimeInterval
    var maximumAge: TimeInterval?
    /// Sorted once, so the first missing claim reported is stable.
    var requiredClaims: [String] = []

    init(issuer: String? = nil, audiences: Set<String> = [], leeway: TimeInterval, maximumAge: TimeInterval?,
         requiredClaims: Set<String>) {
        self.issuer = issuer
        self.audiences = audiences
        self.leeway = leeway
        self.maximumAge = maximumAge
        self.requiredClaims = requiredClaims.sorted()
    }

    init(configuration: JWTVerifier.Configuration) {
        self.init(issuer: configuration.issuer, audiences: configuration.audiences, leeway: configuration.leeway,
                  maximumAge: configuration.maximumAge, requiredClaims: configuration.requiredClaims)
    }

    func check(_ claims: JWTClaims, now date: Date) throws {
        let now = date.timeIntervalSince1970
        for name in requiredClaims where claims[name] == nil {
            throw JOSEError.missingClaim.with(detail: name)
        }
        if let issuer {
            guard let value = claims["iss"] else { throw JOSEError.missingClaim.with(detail: "iss") }
            guard value.stringValue == issuer else { throw JOSEError.issuer }
        }
        if !audiences.isEmpty {
            guard let value = claims["aud"] else { throw JOSEError.missingClaim.with(detail: "aud") }
            let isAccepted: Bool
            switch value {
            case .string(let audience):
                isAccepted = audiences.contains(audience)
            case .array(let entries) where entries.allSatisfy({ $0.stringValue != nil }):
                // OpenID Connect Core §3.1.3.7: an ID token naming an audience this client does not trust is refused,
                // and one of several audiences says which of them it was issued to (`azp`), one of ours.
                let trusted = !entries.isEmpty && entries.allSatisfy { audiences.contains($0.stringValue!) }
                isAccepted = trusted && (entries.count == 1 || claims["azp"]?.stringValue.map(audiences.contains) == true)
            default:
                throw JOSEError.malformed.with(detail: "aud must be a string or an array of strings")
            }
            guard isAccepted else { throw JOSEError.audience }
        }
        if let expiresAt = try numericDate(claims, "exp"), now >= expiresAt + leeway {
            throw JOSEError.expired
        }
        if let notBefore = try numericDate(claims, "nbf"), now + leeway < notBefore {
            throw JOSEError.notYetValid
        }
        let issuedAt = try numericDate(claims, "iat")
        if let issuedAt, issuedAt > now + leeway {
            throw JOSEError.issuedInFuture
        }
        if let maximumAge {
            guard let issuedAt else { throw JOSEError.missingClaim.with(detail: "iat") }
            guard now - issuedAt <= maximumAge + leeway else { throw JOSEError.tooOld }
        }
    }

    private func numericDate(_ claims: JWTClaims, _ name: String) throws -> Double? {
        guard let value = claims[name] else { return nil }
        guard let seconds = value.numberValue else { throw JOSEError.malformed.with(detail: "\(name) must be a NumericDate") }
        return seconds
    }
}
