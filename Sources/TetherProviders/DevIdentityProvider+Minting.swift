import TetherCore
import Foundation
import TetherCrypto
import TetherJOSE

extension DevIdentityProvider {
    /// A signed token for `provider` (`apple`, `facebook` Limited Login or `google`) as `request` describes.
    public func mintToken(_ provider: ProviderName, _ request: DevTokenRequest) throws -> String {
        let defaults = ProvidersConfiguration()
        let now = clock.now().timeIntervalSince1970.rounded(.down)
        let issuedAt = request.iat ?? now
        var claims = JOSEObject()
        let issuer: String, audience: String, lifetime: Double, subject: String
        switch provider {
        case .apple:
            (issuer, audience, lifetime) = (defaults.apple.issuer, Self.appleClientID, 600)
            subject = request.sub ?? "\(Self.digits(6)).\(SecureRandom.bytes(count: 16).hexString).\(Self.digits(4))"
        case .facebook:
            (issuer, audience, lifetime) = (defaults.facebook.limitedLoginIssuer, Self.facebookAppID, 3600)
            subject = request.sub ?? request.userId ?? Self.digits(16)
        default:
            (issuer, audience, lifetime) = (defaults.google.issuer, Self.googleClientID, 3600)
            subject = request.sub ?? Self.digits(21)
        }
        claims["iss"] = .string(request.iss ?? issuer)
        claims["aud"] = request.aud.map(JOSEValue.init) ?? .string(request.appId ?? audience)
        if provider == .google { claims["azp"] = claims["aud"]?.stringValue.map(JOSEValue.string) }
        claims["sub"] = .string(subject)
        claims["iat"] = .number(issuedAt)
        // Expiry counts from now, not from `iat`, so a test can make a token too old yet unexpired.
        claims["exp"] = .number(request.exp ?? now + (request.expiresIn ?? lifetime))
        switch provider {
        case .apple:
            claims["auth_time"] = .number(issuedAt)
            claims["nonce_supported"] = true
        case .facebook:
            claims["jti"] = .string(request.jti ?? UUID.random().lowercasedText)
        default:
            break
        }
        claims["nonce"] = (request.nonce ?? request.rawNonce.map(IDTokenVerifier.hexDigest)).map(JOSEValue.string)
        claims["email"] = request.email.map(JOSEValue.string)
        if provider != .facebook, request.email != nil || request.emailVerified != nil {
            // Facebook never says whether an email is verified; Apple and Google do.
            claims["email_verified"] = request.emailVerified.map(JOSEValue.init) ?? true
        }
        claims["is_private_email"] = request.isPrivateEmail.map(JOSEValue.init)
        claims["real_user_status"] = request.realUserStatus.map { .number(Double($0)) }
        claims["name"] = request.name.map(JOSEValue.string)
        claims["given_name"] = request.givenName.map(JOSEValue.string)
        claims["family_name"] = request.familyName.map(JOSEValue.string)
        claims["picture"] = request.picture.map(JOSEValue.string)
        claims["events"] = request.events.map(JOSEValue.init)
        for (name, value) in request.claims ?? [:] {
            // JOSEValue is nil-literal expressible, so a bare `nil` here would store JSON null, not remove the claim.
            claims[name] = value == .null ? Optional<JOSEValue>.none : JOSEValue(value)
        }
        return try sign(claims, provider: provider, request: request)
    }

    private func sign(_ claims: JOSEObject, provider: ProviderName, request: DevTokenRequest) throws -> String {
        let key = try keys.ring(provider).current
        var header = JOSEObject()
        for (name, value) in request.header ?? [:] { header[name] = JOSEValue(value) }
        // Apple's identity tokens carry no `typ`; Facebook's and Google's say JWT.
        let type: String? = provider == .apple ? nil : "JWT"
        switch request.forge {
        case nil:
            return try JWTSigner(key: key).sign(claims: claims, type: type, header: header)
        case .badSignature?:
            var parts = try JWTSigner(key: key).sign(claims: claims, type: type, header: header).split(separator: ".").map(String.init)
            var signature = try Base64URL.decode(parts[2])
            signature[0] ^= 0x01
            parts[2] = Base64URL.encode(signature)
            return parts.joined(separator: ".")
        case .hs256PublicKey?:
            let secret = Array(try key.publicKey!.pemEncoded().utf8)
            let confused = try JWK(material: .symmetric(secret), keyID: key.keyID, algorithm: .hs256)
            return try JWTSigner(key: confused).sign(claims: claims, type: type, header: header)
        case .algNone?:
            var unsigned: JOSEObject = ["alg": "none"]
            if let type { unsigned["typ"] = .string(type) }
            unsigned["kid"] = key.keyID.map(JOSEValue.string)
            for member in header.members { unsigned[member.name] = member.value }
            return Base64URL.encode(unsigned.jsonBytes) + "." + Base64URL.encode(claims.jsonBytes) + "."
        }
    }

    /// `count` random decimal digits, the first not zero (the shape of Facebook, Google and Apple user ids).
    static func digits(_ count: Int) -> String {
        let bytes = SecureRandom.bytes(count: count)
        return String(bytes.enumerated().map { index, byte in
            Character(String(index == 0 ? 1 + Int(byte) % 9 : Int(byte) % 10))
        })
    }

    /// `POST /facebook/access-token`.
    public func mintAccessToken(_ request: DevAccessTokenRequest) -> String {
        let now = clock.now()
        let lifetime = request.expiresIn ?? 60 * 86_400
        return graph.issue(DevGraphTokens.Record(
            userID: request.userId, profileID: request.profileId ?? request.userId, appID: request.appId ?? Self.facebookAppID, email: request.email, name: request.name,
            firstName: request.firstName, lastName: request.lastName, picture: request.picture,
            type: request.type ?? "USER", isValid: request.isValid ?? true, issuedAt: now,
            expiresAt: lifetime == 0 ? nil : now.addingTimeInterval(lifetime), isSessionInfo: false,
            fault: request.graphFault))
    }
}
