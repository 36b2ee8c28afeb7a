import Foundation
import Testing
import TetherTesting
import TetherCrypto
import TetherJOSE

@Suite("RFC 7515, 7638, 8037 and 9449 examples")
struct RFCVectorTests {
    /// RFC 7515 Appendix A payload: {"iss":"joe",\r\n "exp":1300819380,\r\n "http://example.com/is_root":true}
    static let payload = "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    /// Just before the examples' `exp`.
    static let clock = ManualClock(Date(timeIntervalSince1970: 1_300_819_000))
    static let rsaModulus = "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"

    static func verifier(_ algorithm: JWSAlgorithm) -> JWTVerifier {
        JWTVerifier(configuration: .init(allowedAlgorithms: [algorithm], issuer: "joe"), clock: clock)
    }

    static func keys(_ json: String) throws -> JWKSet {
        JWKSet(keys: [try JWK(parsing: Array(json.utf8))])
    }

    @Test func appendixA1HS256Verifies() throws {
        let keys = try Self.keys(#"{"kty":"oct","k":"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"}"#)
        let token = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.\(Self.payload).dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        let verified = try Self.verifier(.hs256).verify(token, keys: keys)
        #expect(verified.claims.issuer == "joe")
        #expect(verified.claims["http://example.com/is_root"] == true)
        #expect(verified.claims.expiresAt == Date(timeIntervalSince1970: 1_300_819_380))
    }

    @Test func appendixA2RS256Verifies() throws {
        let keys = try Self.keys(#"{"kty":"RSA","n":"\#(Self.rsaModulus)","e":"AQAB"}"#)
        let token = "eyJhbGciOiJSUzI1NiJ9.\(Self.payload).cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
        #expect(try Self.verifier(.rs256).verify(token, keys: keys).claims.issuer == "joe")
        // The same key pinned to PS256 must not accept the RS256 token.
        #expect(throws: JOSEError.algorithm) { try Self.verifier(.ps256).verify(token, keys: keys) }
    }

    @Test func appendixA3ES256Verifies() throws {
        let keys = try Self.keys(#"{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#)
        let token = "eyJhbGciOiJFUzI1NiJ9.\(Self.payload).DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
        #expect(try Self.verifier(.es256).verify(token, keys: keys).claims.issuer == "joe")
    }

    @Test func appendixA4ES512IsRejectedAsUnsupported() {
        let key = #"{"kty":"EC","crv":"P-521","x":"AekpBQ8ST8a8VcfVOTNl353vSrDCLLJXmPk06wTjxrrjcBpXp5EOnYG_NjFZ6OvLFV1jSfS9tsz4qUxcWceqwQGk","y":"ADSmRA43Z1DSNx_RvcLI87cdL07l6jQyyBXMoxVg_l2Th-x3S1WDhjDly79ajL4Kkd0AZMaZmh9ubmf63e3kyMj2"}"#
        let token = "eyJhbGciOiJFUzUxMiJ9.UGF5bG9hZA.AdwMgeerwtHoh-l192l60hp9wAHZFVJbLfD_UxMi70cwnZOYaRI1bKPWROc-mZZqwqT2SI-KGDKB34XO0aw_7XdtAG8GaSwFKdCAPZgoXD2YBJZCPEX3xKpRwcdOO8KpEHwJjyqOgzDO7iKvU8vcnwNrmxYbSW9ERBXukOXolLzeO_Jn"
        #expect(throws: JOSEError.key) { try JWK(parsing: Array(key.utf8)) }
        #expect(throws: JOSEError.algorithm) { try CompactJWS(parsing: token) }
    }

    @Test func appendixA5UnsecuredJWSIsRejected() throws {
        let keys = try Self.keys(#"{"kty":"oct","k":"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"}"#)
        #expect(throws: JOSEError.algorithm) { try Self.verifier(.hs256).verify("eyJhbGciOiJub25lIn0.\(Self.payload).", keys: keys) }
    }

    @Test func rfc7638ThumbprintOfTheExampleRSAKey() throws {
        let key = try JWK(parsing: Array(#"{"kty":"RSA","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB","alg":"RS256","kid":"2011-04-29"}"#.utf8))
        #expect(key.thumbprint() == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    }

    @Test func rfc8037EdDSAExampleVerifiesAndHasThePublishedThumbprint() throws {
        let key = try JWK(parsing: Array(#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#.utf8))
        #expect(key.thumbprint() == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k")
        let jws = try CompactJWS(parsing: "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg")
        try jws.verifySignature(with: key, allowedAlgorithms: [.edDSA])
        #expect(String(decoding: jws.payload, as: UTF8.self) == "Example of Ed25519 signing")
    }

    @Test func rfc9449ThumbprintAndAccessTokenHash() throws {
        let key = try JWK(parsing: Array(#"{"kty":"EC","x":"l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs","y":"9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA","crv":"P-256"}"#.utf8))
        #expect(key.thumbprint() == "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
        let accessTokenHash = Base64URL.encode(DigestAlgorithm.sha256.hash(Array("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU".utf8)))
        #expect(accessTokenHash == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
    }

    @Test func rfc9449TokenRequestProofVerifiesAndYieldsTheJKT() async throws {
        let proof = "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwieCI6Imw4dEZyaHgtMzR0VjNoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCRnMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5VERWclUwQ2R2R1JEQSIsImNydiI6IlAtMjU2In19.eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIjoiUE9TVCIsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwiaWF0IjoxNTYyMjYyNjE2fQ.2-GxA6T8lP4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg"
        let clock = ManualClock(Date(timeIntervalSince1970: 1_562_262_620))
        let verifier = DPoPVerifier(replayStore: InMemoryDPoPReplayStore(clock: clock), clock: clock)
        let verified = try await verifier.verify(proof, method: "POST", url: "https://server.example.com/token")
        #expect(verified.thumbprint == "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
        #expect(verified.claims.jwtID == "-BwC3ESc6acc2lTc")
    }
}
