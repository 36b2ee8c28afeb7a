import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherCrypto
import TetherPostgres
import TetherTesting

/// What the log keeps about no known person is sealed with a day key that is destroyed after 30 days (an
/// admin's search terms), or is only a count (failed sign-ins of accounts no one holds).
@Suite("Records about no one expire with their day keys")
struct ExpiringRecordsTests {
    /// How many rows of `events` hold `needle` anywhere in clear (stream, payload or metadata).
    private static func clearCount(_ needle: String, in service: SupportHarness) async throws -> Int {
        try await service.owner.query("""
            SELECT count(*)::int AS n FROM events
            WHERE strpos(lower(stream || data::text || metadata::text), lower(\(needle))) > 0
            """)[0].decode("n")
    }

    /// Makes every live key of `purpose` expire now, as 30 days would.
    private static func expire(_ purpose: String, in service: SupportHarness) async throws {
        try await service.owner.query("""
            UPDATE expiring_keys SET expires_at = now() - interval '1 second' WHERE name LIKE \(purpose + "/%") AND key IS NOT NULL
            """)
    }

    @Test func searchTermsAreSealedAndUnreadableOnceTheirKeyExpires() async throws {
        try await SupportHarness.run { service in
            let support = try await service.adminKey(.support)
            let searched = try await service.adminGet(
                "/v1/admin/users?email=needle.person%40example.com&uid=needle-uid-7&q=Needlewoman", key: support.secret)
            #expect(searched.status == 200)
            for term in ["needle.person", "needle-uid-7", "Needlewoman"] {
                #expect(try await Self.clearCount(term, in: service) == 0, "\(term) is in the log in clear")
            }
            let names: [String] = try await service.owner.query(
                "SELECT name FROM expiring_keys WHERE key IS NOT NULL ORDER BY name").map { try $0.decode("name") }
            #expect(names.count == 1 && names[0].hasPrefix("search-terms/"), "one day key of search terms: \(names)")

            func records() async throws -> [AdminEvent.UsersSearched] {
                try await service.events(inStream: .adminKey(support.key.id)).compactMap { event in
                    if case .usersSearched(let payload)? = try AdminEventCodec.decode(event) { payload } else { nil }
                }
            }
            // While the key lives, the record reads back whole.
            let live = try await records()
            #expect(live.map(\.personal) == [.init(email: "needle.person@example.com", uid: "needle-uid-7", q: "Needlewoman")])
            #expect(live.first?.resultCount == 0)

            // Once it expired, the terms read as erased (the rest of the record stays), and the next
            // search destroys the key and keeps no terms of its own.
            try await Self.expire("search-terms", in: service)
            #expect(try await records().map(\.personal) == [.init()])
            #expect(try await service.adminGet("/v1/admin/users?q=Needlewoman", key: support.secret).status == 200)
            let after = try await records()
            #expect(after.map(\.personal) == [.init(), .init()])
            #expect(after.map(\.status) == [200, 200])
            let destroyed: Int = try await service.owner.query("""
                SELECT count(*)::int AS n FROM expiring_keys WHERE name LIKE 'search-terms/%' AND key IS NULL AND destroyed_at IS NOT NULL
                """)[0].decode("n")
            #expect(destroyed == 1)
            #expect(try await Self.clearCount("Needlewoman", in: service) == 0)
        }
    }

    @Test func failuresFromOneIPv6SlashSixtyFourCountTogether() async throws {
        try await SupportHarness.run(settings: ["TETHER_TRUSTED_PROXIES": "127.0.0.0/8", "TETHER_SIGN_IN_FAILURE_LIMIT": "2"]) { service in
            // A guess at another account each time, so only the address limit can refuse.
            func attempt(_ index: Int, from address: String) async throws -> Int {
                try await service.signIn(service.password("nobody\(index)@example.com", "not the password"), headers: ["X-Forwarded-For": address]).status
            }
            // Three addresses of one /64 share the limit; an address of the next /64 has its own.
            #expect(try await attempt(1, from: "2001:db8:1:2::1") == 401)
            #expect(try await attempt(2, from: "2001:db8:1:2::ffff") == 401)
            #expect(try await attempt(3, from: "2001:db8:1:2:aaaa::3") == 429)
            #expect(try await attempt(4, from: "2001:db8:1:3::1") == 401)
            let keys: [String] = try await service.owner.query(
                "SELECT DISTINCT scope_key FROM sign_in_attempts WHERE scope_key LIKE 'ip:%' ORDER BY 1").map { try $0.decode("scope_key") }
            #expect(keys == ["ip:2001:db8:1:2::/64", "ip:2001:db8:1:3::/64"], "\(keys)")
        }
    }

    @Test func failuresOfUnknownAccountsAreCountedAndKeepNoAddress() async throws {
        try await SupportHarness.run(settings: ["TETHER_TRUSTED_PROXIES": "127.0.0.1", "TETHER_SIGN_IN_FAILURE_LIMIT": "2"]) { service in
            // A row of the limits from an hour ago, of an address that never came back.
            try await service.owner.query("""
                INSERT INTO sign_in_attempts (id, scope_key, kind, started_at)
                VALUES (\(UUID()), 'ip:198.51.100.9', 'failure', now() - interval '1 hour')
                """)
            let headers: KeyValuePairs<String, String> = ["X-Forwarded-For": "203.0.113.77", "User-Agent": "needle-agent/9"]
            let guess = service.password("nobody.needle@example.com", "not the password")
            let answers = [
                try await service.signIn(guess, headers: headers).status,
                try await service.signIn(guess, headers: headers).status,
                try await service.signIn(guess, headers: headers).status,
                try await service.signIn(guess, headers: headers).status,
            ]
            #expect(answers == [401, 401, 429, 429])
            #expect(try await service.tallied("failed", detail: "invalid_credential") == 2)
            #expect(try await service.tallied("throttled", detail: "account") == 2)

            // The closed minute becomes one event; nothing else about the attempts is in the log.
            try await service.owner.query("UPDATE sign_in_failure_tallies SET minute = minute - interval '1 day'")
            #expect(try await service.service.flushSignInFailureTallies() == 1)
            let types: [String] = try await service.owner.query("SELECT type FROM events ORDER BY position").map { try $0.decode("type") }
            #expect(types == ["SignInFailuresCounted"])
            let counted = try await service.events(inStream: StreamName("sign-in-failures-counted"))
            let payload = try JSONDecoder().decode(JSONValue.self, from: Data(try #require(counted.first).data))
            #expect(payload["total"]?.int == 4)
            #expect(payload["counts"]?.elements.count == 2, "\(payload)")
            // Neither the address, the user agent, the email, nor an unkeyed hash of the email is in the log.
            let unkeyed = Array(DigestAlgorithm.sha256.hash(Array("password:nobody.needle@example.com".utf8)).prefix(16)).hexString
            for needle in ["203.0.113.77", "needle-agent", "nobody.needle", unkeyed] {
                #expect(try await Self.clearCount(needle, in: service) == 0, "\(needle) is in the log in clear")
            }
            // The limits' rows that left the window went, whoever they were about.
            let stale: Int = try await service.owner.query(
                "SELECT count(*)::int AS n FROM sign_in_attempts WHERE scope_key = 'ip:198.51.100.9'")[0].decode("n")
            #expect(stale == 0)
        }
    }

    /// The limits' rows named an email by its unkeyed SHA-256, which anyone with a dump and a list of likely addresses
    /// could confirm; rows about no user (a password reset's send) lasted until a later attempt on the same key.
    @Test func theLimitsRowsNameNoAddressAnyoneCanHashAndGoWithTheirWindow() async throws {
        try await SupportHarness.run(settings: ["TETHER_TRUSTED_PROXIES": "127.0.0.1"]) { service in
            _ = try await service.signUp("dora@example.com")
            #expect(try await service.signIn(service.password("dora@example.com", "not the password"), headers: ["X-Forwarded-For": "203.0.113.5"]).status == 401)
            #expect(try await service.client.post("/v1/password-reset", json: ["email": "dora@example.com"]).status == 202)
            func unkeyed(_ text: String) -> String { DigestAlgorithm.sha256.hash(Array(text.utf8)).hexString }
            let accountKeys: [String] = try await service.owner.query(
                "SELECT scope_key FROM sign_in_attempts WHERE scope_key LIKE 'account:%'").map { try $0.decode("scope_key") }
            #expect(accountKeys.count == 1)
            #expect(!accountKeys.contains("account:" + String(unkeyed("password:dora@example.com").prefix(32))))
            let sendHashes: [String] = try await service.owner.query(
                "SELECT address_hash FROM code_sends WHERE address_hash IS NOT NULL").map { try $0.decode("address_hash") }
            #expect(sendHashes.count == 1)
            #expect(!sendHashes.contains(unkeyed("tether mail address:dora@example.com")))

            // Rows past their windows go with the housekeeping, whoever they were about; the others stay.
            try await service.owner.query("""
                INSERT INTO sign_in_attempts (id, scope_key, kind, started_at)
                VALUES (\(UUID()), 'ip:198.51.100.10', 'failure', now() - interval '2 minutes'),
                       (\(UUID()), 'sign-up:198.51.100.11', 'sign_up', now() - interval '2 minutes')
                """)
            try await service.owner.query("""
                INSERT INTO code_sends (channel, address_hash, user_id, sent_at)
                VALUES ('mail', 'stale-mail', NULL, now() - interval '61 minutes'), ('sms', 'stale-sms', NULL, now() - interval '16 minutes'),
                       ('sms', 'fresh-sms', NULL, now() - interval '14 minutes')
                """)
            #expect(try await service.service.sweepExpiredLimitRows() == 4)
            let attempts: [String] = try await service.owner.query(
                "SELECT scope_key FROM sign_in_attempts WHERE scope_key NOT LIKE 'sign-up:127.%' ORDER BY 1").map { try $0.decode("scope_key") }
            #expect(attempts == accountKeys + ["ip:203.0.113.5"], "the failure's two keys, in their window")
            let sends: [String] = try await service.owner.query(
                "SELECT address_hash FROM code_sends WHERE address_hash IS NOT NULL ORDER BY 1").map { try $0.decode("address_hash") }
            #expect(sends == (sendHashes + ["fresh-sms"]).sorted())
        }
    }
}
