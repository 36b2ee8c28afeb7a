import COpenSSL

extension SignatureAlgorithm {
    /// Applies the RSA padding mode (and PSS salt/MGF1) to a sign or verify context.
    func configurePadding(_ context: OpaquePointer) -> Bool {
        switch self {
        case .rsaPKCS1v15:
            return EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1
        case .rsaPSS(let digest):
            // JWS fixes the salt to the hash length (RFC 7518 §3.5); "auto" would accept other salts.
            return EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PSS_PADDING) == 1
                && EVP_PKEY_CTX_set_rsa_pss_saltlen(context, RSA_PSS_SALTLEN_DIGEST) == 1
                && EVP_PKEY_CTX_set_rsa_mgf1_md(context, digest.evpMD) == 1
        case .ecdsaP256SHA256, .ed25519:
            return true
        }
    }
}
