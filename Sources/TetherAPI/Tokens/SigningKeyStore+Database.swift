import Foundation
import TetherCrypto
import TetherJOSE
import TetherPostgres

extension SigningKeyStore {
    /// The advisory lock that serialises key creation and rotation of one algorithm across processes
    /// ("tethkeys", and "tethkeyr" for RS256).
    static func rotationLockID(_ algorithm: JWSAlgorithm) -> Int64 {
        algorithm == .es256 ? 0x7465_7468_6B65_7973 : 0x7465_7468_6B65_7972
    }

    /// The keys not yet retired at `now`, after making or pre-publishing a key if the rules call for it.
    ///
    /// The common case is one `SELECT` (and an `UPDATE` that usually touches
    /// nothing). Only when a key is due does it take the lock and decide again on
    /// rows read under it, so a process that waited behind another's rotation
    /// finds the work done instead of repeating it.
    static func loadRing(
        client: PostgresClient, configuration: Configuration, algorithm: JWSAlgorithm, now: Date
    ) async throws -> SigningKeyRing {
        let masterKeys = client.configuration.masterKeys
        let ring = try await client.withConnection { connection in
            try await eraseRetiredPrivateKeys(connection, now: now)
            return try await fetchRing(connection, algorithm: algorithm, now: now, masterKeys: masterKeys)
        }
        guard ring.rotationStep(at: now, configuration: configuration) != .none else { return ring }
        return try await client.withTransaction { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(rotationLockID(algorithm))::bigint)")
            let locked = try await fetchRing(connection, algorithm: algorithm, now: now, masterKeys: masterKeys)
            switch locked.rotationStep(at: now, configuration: configuration) {
            case .none:
                return locked
            case .activateNow:
                try await insertNewKey(connection, algorithm: algorithm, activatedAt: now, now: now, masterKeys: masterKeys)
            case .prepublish(let activation):
                try await insertNewKey(connection, algorithm: algorithm, activatedAt: activation, now: now, masterKeys: masterKeys)
                let retirement = activation.addingTimeInterval(configuration.retention)
                try await connection.query("""
                    UPDATE signing_keys SET retired_at = \(retirement)
                    WHERE retired_at IS NULL AND activated_at < \(activation) AND algorithm = \(algorithm.rawValue)
                    """)
            }
            return try await fetchRing(connection, algorithm: algorithm, now: now, masterKeys: masterKeys)
        }
    }

    /// Nothing may sign with a retired key again, so its private half has no reason to exist.
    private static func eraseRetiredPrivateKeys(_ connection: PostgresConnection, now: Date) async throws {
        try await connection.query("""
            UPDATE signing_keys SET private_key_pem = NULL
            WHERE retired_at <= \(now) AND private_key_pem IS NOT NULL
            """)
    }

    /// What a stored private key is bound to when wrapped: its row.
    static func wrappingContext(_ keyID: String) -> String { "signing_keys:" + keyID }

    private static func fetchRing(
        _ connection: PostgresConnection, algorithm: JWSAlgorithm, now: Date, masterKeys: MasterKeyRing?
    ) async throws -> SigningKeyRing {
        let rows = try await connection.query("""
            SELECT kid, private_key_pem, created_at, activated_at, retired_at FROM signing_keys
            WHERE (retired_at IS NULL OR retired_at > \(now)) AND algorithm = \(algorithm.rawValue)
            """)
        return SigningKeyRing(keys: try rows.map { row in
            let keyID: String = try row.decode("kid")
            let pem = try (row.decode("private_key_pem") as String?).map { try masterKeys.unwrapText($0, context: wrappingContext(keyID)) }
            return try signingKey(keyID: keyID, pem: pem, algorithm: algorithm,
                           createdAt: row.decode("created_at"), activatedAt: row.decode("activated_at"), retiredAt: row.decode("retired_at"))
        })
    }

    private static func insertNewKey(
        _ connection: PostgresConnection, algorithm: JWSAlgorithm, activatedAt: Date, now: Date, masterKeys: MasterKeyRing?
    ) async throws {
        let privateKey = try PrivateKey.generate(algorithm == .rs256 ? .rsa : .ecP256, rsaBitCount: 2048)
        let keyID = try JWK(material: .privateKey(privateKey)).thumbprint()
        let pem = try privateKey.pemEncoded()
        let key = try signingKey(keyID: keyID, pem: pem, algorithm: algorithm, createdAt: now, activatedAt: activatedAt, retiredAt: nil)
        let publicJWK = PostgresJSON(data: Data(try key.publicJWK.jsonObject().jsonBytes))
        // A random key colliding with a stored thumbprint is not a case to handle; the lock already prevents doubles.
        try await connection.query("""
            INSERT INTO signing_keys (kid, algorithm, private_key_pem, public_jwk, created_at, activated_at)
            VALUES (\(keyID), \(algorithm.rawValue), \(try masterKeys.wrapText(pem, context: wrappingContext(keyID))), \(publicJWK)::jsonb, \(now), \(activatedAt))
            """)
    }

    /// Rebuilds a key from its row, refusing a PEM that is not the key its `kid` names.
    private static func signingKey(keyID: String, pem: String?, algorithm: JWSAlgorithm, createdAt: Date, activatedAt: Date,
                                   retiredAt: Date?) throws -> SigningKey {
        guard let pem else { throw SigningKeyError.corruptKey.with(detail: "\(keyID) has no private key but is not retired") }
        let jwk: JWK
        do {
            jwk = try JWK(material: .privateKey(PrivateKey(pem: pem)), keyID: keyID, algorithm: algorithm, use: "sig")
        } catch {
            throw SigningKeyError.corruptKey.with(detail: "\(keyID): \(error)")
        }
        guard jwk.thumbprint() == keyID, let publicJWK = jwk.publicJWK else {
            throw SigningKeyError.corruptKey.with(detail: "\(keyID) does not match its private key")
        }
        return SigningKey(keyID: keyID, signer: try JWTSigner(key: jwk), publicJWK: publicJWK, createdAt: createdAt,
                          activatedAt: activatedAt, retiredAt: retiredAt)
    }
}
