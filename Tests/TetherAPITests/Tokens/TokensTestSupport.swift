import Foundation
import Synchronization
import TetherAPI
import TetherCrypto
import TetherJOSE
import TetherPostgres
import TetherTesting

/// A migrated database with a service-role pool, closed by `close()`.
struct TokensDatabase {
    let database: TestDatabase
    /// Acts as `tether_service`, like the server.
    let client: PostgresClient

    static func make(maxConnections: Int = 8) async throws -> TokensDatabase {
        let database = try await TestDatabase.make()
        return TokensDatabase(database: database, client: database.client(maxConnections: maxConnections))
    }

    /// Runs `query` as the superuser, for looking behind the service role's back.
    @discardableResult
    func adminQuery(_ query: PostgresQuery) async throws -> PostgresRows {
        let admin = database.client(asServiceRole: false, maxConnections: 1)
        defer { admin.shutdown() }
        return try await admin.query(query)
    }

    func close() async throws {
        client.shutdown()
        try await database.drop()
    }
}

/// Compact-JWS surgery for forged tokens.
enum TokensForgery {
    /// A token with exactly `header` and `claims`, signed over the signing input by `sign`.
    static func token(header: JOSEObject, claims: JOSEObject, sign: ([UInt8]) throws -> [UInt8]) rethrows -> String {
        let input = Base64URL.encode(header.jsonBytes) + "." + Base64URL.encode(claims.jsonBytes)
        return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
    }

    /// The parts of a compact JWS: header and claims decoded, signature raw.
    static func parts(of token: String) throws -> (header: JOSEObject, claims: JOSEObject, signature: String) {
        let pieces = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        return (try JOSEObject(parsing: Base64URL.decode(pieces[0])), try JOSEObject(parsing: Base64URL.decode(pieces[1])), pieces[2])
    }

    /// The private key behind a store's signing key.
    static func privateKey(of key: SigningKey) throws -> PrivateKey {
        guard case .privateKey(let privateKey) = key.signer.key.material else { throw TokensTestFailure("signing key has no private half") }
        return privateKey
    }
}

struct TokensTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
