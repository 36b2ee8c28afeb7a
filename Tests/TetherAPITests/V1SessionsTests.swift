import Foundation
import Testing
import TetherAPI
@testable import TetherCore
import TetherCrypto
import TetherHTTP
import TetherJOSE
import TetherPostgres
import TetherTesting

/// Sessions, device binding, idempotent retries and abuse limits of `/v1`, over real HTTP.
@Suite("/v1 sessions, DPoP, idempotency and limits over HTTP")
struct V1SessionsTests {
    @Test func refreshRotatesAndAReusedTokenEndsTheSession() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-rotate"))
            let first = try await app.refresh(user.session.refreshToken)
            #expect(first.status == 200)
            let rotated = try first.decodeJSON(SignedIn.self)
            #expect(rotated.session.refreshToken != user.session.refreshToken)
            #expect(rotated.session.id == user.session.id)
            #expect(try await app.me(rotated.session.accessToken).status == 200)

            let reused = try await app.refresh(user.session.refreshToken)
            #expect(reused.status == 401)
            #expect(try reused.decodeJSON(ProblemBody.self).code == "refresh_token_reused")
            #expect(try await app.refresh(rotated.session.refreshToken).status == 401, "the whole session ended")
            #expect(try await app.me(rotated.session.accessToken).status == 401)
        }
    }

    /// A retried refresh (same Idempotency-Key) gets its first answer while that answer's token is still the
    /// session's; once the client refreshed past it, the same request is a reused token and ends the session,
    /// whatever key comes with it: a captured request must not yield working tokens again.
    @Test func aRetriedRefreshIsReplayedOnlyUntilTheSessionMovesOn() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-retried-refresh"))
            let key = UUID().uuidString
            let first = try await app.refresh(user.session.refreshToken, headers: ["Idempotency-Key": key])
            #expect(first.status == 200)
            let retried = try await app.refresh(user.session.refreshToken, headers: ["Idempotency-Key": key])
            #expect(retried.bodyText == first.bodyText && retried.headers.values(for: "Idempotent-Replayed") == ["true"])
            let second = try first.decodeJSON(SignedIn.self)
            let third = try await app.refresh(second.session.refreshToken)
            #expect(third.status == 200)

            let captured = try await app.refresh(user.session.refreshToken, headers: ["Idempotency-Key": key])
            #expect(captured.status == 401, "\(captured.bodyText)")
            #expect(try captured.decodeJSON(ProblemBody.self).code == "refresh_token_reused")
            // That answer is kept in place of the first: the next retry gets it back.
            let again = try await app.refresh(user.session.refreshToken, headers: ["Idempotency-Key": key])
            #expect(again.status == 401 && again.headers.values(for: "Idempotent-Replayed") == ["true"])
            #expect(try await app.refresh(try third.decodeJSON(SignedIn.self).session.refreshToken).status == 401, "the session ended")
            #expect(try await app.me(second.session.accessToken).status == 401)
        }
    }

    /// A retried sign-out or revocation (same Idempotency-Key) gets its first answer although that first request
    /// ended the session the retry comes with; without the key, or with another one, the ended session is refused.
    @Test func aRetriedSignOutGetsItsAnswerFromTheSessionItEnded() async throws {
        try await DevService.run { app in
            for path in ["/v1/sign-out", "/v1/users/me/sessions/revoke"] {
                let user = try await app.signedIn(try await app.apple("apple-retried-\(path.count)"))
                let auth = "Bearer \(user.session.accessToken)"
                // A change that did not end the session: its kept answer (a TOTP secret) is not given once it has ended.
                let enrol = try await app.client.post("/v1/users/me/mfa/totp", headers: ["Authorization": auth, "Idempotency-Key": "enrol-1"], body: [])
                #expect(enrol.status == 200 || enrol.status == 201, "\(enrol.bodyText)")
                let first = try await app.client.post(path, headers: ["Authorization": auth, "Idempotency-Key": "out-1"], body: [])
                #expect(first.status == 204, "\(path): \(first.bodyText)")
                let events = try await app.totalEvents()
                let retried = try await app.client.post(path, headers: ["Authorization": auth, "Idempotency-Key": "out-1"], body: [])
                #expect(retried.status == 204 && retried.headers.values(for: "Idempotent-Replayed") == ["true"], "\(path): \(retried.bodyText)")
                #expect(try await app.totalEvents() == events, "\(path): the retry wrote nothing")
                let other = try await app.client.post(path, headers: ["Authorization": auth, "Idempotency-Key": "out-2"], body: [])
                #expect(other.status == 401, "\(path): a new request of an ended session")
                #expect(try await app.client.post(path, headers: ["Authorization": auth], body: []).status == 401)
                let enrolAgain = try await app.client.post(
                    "/v1/users/me/mfa/totp", headers: ["Authorization": auth, "Idempotency-Key": "enrol-1"], body: [])
                #expect(enrolAgain.status == 401 && !enrolAgain.bodyText.contains("secret"), "\(path): \(enrolAgain.bodyText)")
                #expect(try await app.me(user.session.accessToken).status == 401)
            }
        }
    }

    /// `DELETE /v1/users/me`: a user erases themselves, with a sign-in of the last five minutes (erasure cannot be
    /// undone, so a stolen or refreshed token must not do it), once: a retry with its key gets the kept 204.
    /// A user sees where they are signed in, on every surface, and ends one of those sessions (a lost phone's)
    /// from another: that session's tokens stop working, the others go on. Another user's session, an ended
    /// one or a malformed id is 404 and ends nothing.
    /// A proof is made for one request: a sign-in refused for its proof (`invalid_dpop_proof`, "make a new proof")
    /// was kept under its `Idempotency-Key`, so the retry with a new, good proof got the refusal again.
    @Test func aRetryWithANewProofRunsAgainAfterAProofWasRefused() async throws {
        try await DevService.run { app in
            let device = DeviceKey()
            let credential = try await app.apple("apple-new-proof")
            let wrongURL = try await app.signIn(
                credential, headers: ["Idempotency-Key": "new-proof", "DPoP": try device.proof("POST", app.url("/v1/sign-out"))])
            let code = try wrongURL.json["code"]?.string
            #expect(wrongURL.status == 401 && code == "invalid_dpop_proof", "\(wrongURL.bodyText)")
            let retried = try await app.signIn(
                credential, headers: ["Idempotency-Key": "new-proof", "DPoP": try device.proof("POST", app.url("/v1/sign-in"))])
            #expect(retried.status == 201 && retried.headers.values(for: "Idempotent-Replayed").isEmpty, "\(retried.bodyText)")
            #expect(try retried.decodeJSON(SignedIn.self).session.tokenType == "DPoP")
        }
    }

    @Test func aUserListsTheirSessionsAndEndsOne() async throws {
        try await DevService.run(settings: ["TETHER_PARSE_APP_ID": ParseApp.appID]) { app in
            let phone = try await app.signedIn(try await app.apple("apple-devices"))
            let laptop = try await app.signedIn(try await app.apple("apple-devices"))
            let parse = ParseApp(app: app)
            let viaParse = try await parse.logIn("apple", ["id": "apple-devices", "token": try await parse.appleToken("apple-devices")])
            let parseToken = try #require(viaParse.string("sessionToken"), "\(viaParse.text)")
            let stranger = try await app.signedIn(try await app.apple("apple-devices-stranger"))
            let onPhone: KeyValuePairs<String, String> = ["Authorization": "Bearer \(phone.session.accessToken)"]

            let listed = try await app.client.get("/v1/users/me/sessions", headers: onPhone)
            #expect(listed.status == 200, "\(listed.bodyText)")
            let sessions = try listed.json["sessions"]?.elements ?? []
            let v1 = sessions.filter { $0["surface"]?.string == "v1" }
            #expect(v1.compactMap { $0["id"]?.string } == [laptop.session.id, phone.session.id], "newest first: \(listed.bodyText)")
            #expect(v1.map { $0["current"] } == [.bool(false), .bool(true)])
            #expect(sessions.count == 3 && sessions.filter { $0["surface"]?.string == "parse" }.count == 1, "\(listed.bodyText)")
            #expect(!listed.bodyText.contains(phone.session.refreshToken) && !listed.bodyText.contains(parseToken), "no secret is shown")

            let events = try await app.totalEvents()
            for id in [stranger.session.id, UUID().uuidString, "not-a-session"] {
                let refused = try await app.client.delete("/v1/users/me/sessions/\(id)", headers: onPhone)
                let code = try refused.json["code"]?.string
                #expect(refused.status == 404 && code == "not_found", "\(id): \(refused.bodyText)")
                #expect(refused.headers.values(for: "WWW-Authenticate").isEmpty, "the caller's own session is fine")
            }
            #expect(try await app.totalEvents() == events, "a refused end writes nothing")
            #expect(try await app.me(stranger.session.accessToken).status == 200)

            // The laptop's session ends from the phone, once for a retry with the same key.
            let retry: KeyValuePairs<String, String> = ["Authorization": "Bearer \(phone.session.accessToken)", "Idempotency-Key": "end-laptop"]
            let ended = try await app.client.delete("/v1/users/me/sessions/\(laptop.session.id)", headers: retry)
            #expect(ended.status == 204, "\(ended.bodyText)")
            let replayed = try await app.client.delete("/v1/users/me/sessions/\(laptop.session.id)", headers: retry)
            #expect(replayed.status == 204 && replayed.headers.values(for: "Idempotent-Replayed") == ["true"])
            #expect(try await app.eventCount("SessionEnded", userId: phone.user.id) == 1)
            #expect(try await app.me(laptop.session.accessToken).status == 401)
            #expect(try await app.refresh(laptop.session.refreshToken).status == 401)
            #expect(try await app.me(phone.session.accessToken).status == 200)
            let again = try await app.client.delete("/v1/users/me/sessions/\(laptop.session.id)", headers: onPhone)
            #expect(again.status == 404, "an ended session: \(again.bodyText)")

            // The Parse app's session ends from /v1 too, and then the phone's own (a sign-out).
            let parseId = try #require(sessions.first { $0["surface"]?.string == "parse" }?["id"]?.string)
            #expect(try await app.client.delete("/v1/users/me/sessions/\(parseId)", headers: onPhone).status == 204)
            #expect(try await parse.send("GET", "/users/me", .init(session: parseToken)).code == 209)
            let remaining = try await app.client.get("/v1/users/me/sessions", headers: onPhone)
            #expect(try remaining.json["sessions"]?.elements.compactMap { $0["id"]?.string } == [phone.session.id])
            #expect(try await app.client.delete("/v1/users/me/sessions/\(phone.session.id)", headers: onPhone).status == 204)
            #expect(try await app.me(phone.session.accessToken).status == 401)
            #expect(try await app.client.get("/v1/users/me/sessions", headers: onPhone).status == 401)
        }
    }

    @Test func aUserErasesThemselvesWithARecentSignInOnce() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-self-erase", email: "self.erase@example.com"))
            let bystander = try await app.signedIn(try await app.apple("apple-self-erase-bystander"))
            let stale = try await app.accessToken(user.session.accessToken, signedInSecondsAgo: 600)
            let events = try await app.totalEvents()
            let refused = try await app.client.delete("/v1/users/me", headers: ["Authorization": "Bearer \(stale)"])
            #expect(refused.status == 401 && refused.bodyText.contains("recent_login_required"), "\(refused.bodyText)")
            #expect(try await app.client.delete("/v1/users/me").status == 401)
            #expect(try await app.totalEvents() == events, "a refused erasure writes nothing")

            // A session that ended after its token was checked erases nothing (the command's own check, under the lock).
            let userId = try #require(UUID(uuidString: user.user.id))
            await #expect(throws: AccountError.invalidToken) {
                try await app.service.accounts.eraseByOwner(
                    userId: userId, sessionId: UUID(), authTime: Date(), reason: "test", context: CommandContext(metadata: EventMetadata(actor: .user(userId), surface: "v1")))
            }
            #expect(try await app.totalEvents() == events)

            let auth = "Bearer \(user.session.accessToken)"
            let erased = try await app.client.delete("/v1/users/me", headers: ["Authorization": auth, "Idempotency-Key": "erase-1"])
            #expect(erased.status == 204, "\(erased.bodyText)")
            #expect(try await app.eventCount("UserErased", userId: user.user.id) == 1)
            let retried = try await app.client.delete("/v1/users/me", headers: ["Authorization": auth, "Idempotency-Key": "erase-1"])
            #expect(retried.status == 204 && retried.headers.values(for: "Idempotent-Replayed") == ["true"], "\(retried.bodyText)")
            #expect(try await app.client.delete("/v1/users/me", headers: ["Authorization": auth]).status == 401)
            #expect(try await app.me(user.session.accessToken).status == 401)
            #expect(try await app.refresh(user.session.refreshToken).status == 401)
            // A second erasure racing the first (another session's, an admin's) finds the user gone: its token is void.
            await #expect(throws: AccountError.invalidToken) {
                try await app.service.accounts.eraseByOwner(
                    userId: userId, sessionId: try #require(UUID(uuidString: user.session.id)), authTime: Date(), reason: "test", context: CommandContext(metadata: EventMetadata(actor: .user(userId), surface: "v1")))
            }
            #expect(try await app.eventCount("UserErased") == 1)
            #expect(try await app.me(bystander.session.accessToken).status == 200)

            // An anonymous user cannot sign in again, so its erasure needs no recent sign-in.
            let anonymous = try await app.signedIn(Credential(provider: "anonymous", credential: .null))
            let staleAnonymous = try await app.accessToken(anonymous.session.accessToken, signedInSecondsAgo: 600)
            let gone = try await app.client.delete("/v1/users/me", headers: ["Authorization": "Bearer \(staleAnonymous)"])
            #expect(gone.status == 204, "\(gone.bodyText)")
            #expect(try await app.eventCount("UserErased") == 2)
        }
    }

    /// The copy of an answer kept for retries is written after the request's command committed: when it cannot be
    /// kept, the client still gets the answer (not a 5xx for a change that was made), and a retry at once gets 409
    /// rather than running the request a second time.
    @Test func anAnswerThatCannotBeKeptForRetriesIsStillGiven() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-unkept-answer"))
            try await app.admin.refuse("UPDATE", on: "idempotent_responses")
            let key = UUID().uuidString
            let first = try await app.refresh(user.session.refreshToken, headers: ["Idempotency-Key": key])
            #expect(first.status == 200, "\(first.bodyText)")
            let next = try first.decodeJSON(SignedIn.self).session.refreshToken
            let retried = try await app.refresh(user.session.refreshToken, headers: ["Idempotency-Key": key])
            #expect(retried.status == 409, "\(retried.bodyText)")
            #expect(try await app.refresh(next).status == 200, "the answer's token is the session's")
        }
    }

    @Test func aTokenReusedAtAnotherInstanceEndsTheSessionThere() async throws {
        try await DevService.run { app in try await app.withTwoInstances { ports in
            // Each instance keeps users' states between commands: the rotation made at the first must be
            // seen by the second, which has the user's older state in its cache.
            let user = try await app.signedIn(try await app.apple("apple-two-rotate"))
            let warmed = try await app.withNewClient(port: ports[1]) { try await app.refresh(user.session.refreshToken, on: $0) }
            #expect(warmed.status == 200)
            let second = try warmed.decodeJSON(SignedIn.self).session
            let third = try await app.withNewClient(port: ports[0]) { try await app.refresh(second.refreshToken, on: $0) }
            #expect(third.status == 200)
            let reused = try await app.withNewClient(port: ports[1]) { try await app.refresh(second.refreshToken, on: $0) }
            #expect(reused.status == 401)
            #expect(try reused.decodeJSON(ProblemBody.self).code == "refresh_token_reused")
            let latest = try third.decodeJSON(SignedIn.self).session.refreshToken
            for port in ports {
                #expect(try await app.withNewClient(port: port) { try await app.refresh(latest, on: $0) }.status == 401, "ended at both")
            }
        } }
    }

    @Test func revokingAllSessionsVoidsEveryEarlierToken() async throws {
        try await DevService.run { app in
            let phone = try await app.signedIn(try await app.apple("apple-revoke"))
            let laptop = try await app.signedIn(try await app.apple("apple-revoke"))
            let revoke = try await app.client.post(
                "/v1/users/me/sessions/revoke", headers: ["Authorization": "Bearer \(phone.session.accessToken)"], body: [])
            #expect(revoke.status == 204)
            for session in [phone.session, laptop.session] {
                #expect(try await app.me(session.accessToken).status == 401)
                #expect(try await app.refresh(session.refreshToken).status == 401)
            }
            #expect(try await app.me(try await app.signedIn(try await app.apple("apple-revoke")).session.accessToken).status == 200)
        }
    }

    @Test func expiredAndForeignAccessTokensAreRefused() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-expiry"))
            // Re-sign the user's own claims with the service's key, but expired a minute ago.
            let row = try await app.admin.query("SELECT kid, private_key_pem FROM signing_keys ORDER BY created_at DESC LIMIT 1")[0]
            let key = try PrivateKey(pem: try row.decode("private_key_pem", as: String.self))
            let parts = user.session.accessToken.split(separator: ".")
            var claims = try JOSEObject(parsing: Base64URL.decode(String(parts[1])))
            let past = Date().timeIntervalSince1970.rounded(.down) - 60
            claims["exp"] = .number(past)
            claims["iat"] = .number(past - 900)
            let expired = try JWTSigner(privateKey: key, algorithm: .es256, keyID: try row.decode("kid", as: String.self))
                .sign(claims: claims, type: "at+jwt")
            let response = try await app.me(expired)
            #expect(response.status == 401)
            #expect(try response.decodeJSON(ProblemBody.self).code == "invalid_token")

            claims["exp"] = .number(past + 3600)
            let foreign = try JWTSigner(privateKey: try PrivateKey.generate(.ecP256), algorithm: .es256, keyID: try row.decode("kid", as: String.self))
                .sign(claims: claims, type: "at+jwt")
            #expect(try await app.me(foreign).status == 401)
            #expect(try await app.me(user.session.accessToken).status == 200)
        }
    }

    @Test func aSessionSignedInWithADPoPProofIsBoundToThatKey() async throws {
        try await DevService.run { app in
            let device = DeviceKey()
            let signIn = try await app.signIn(
                try await app.apple("apple-dpop"), headers: ["DPoP": try device.proof("POST", app.url("/v1/sign-in"))])
            #expect(signIn.status == 201)
            let bound = try signIn.decodeJSON(SignedIn.self)
            #expect(bound.session.tokenType == "DPoP")

            // A bound access token needs the DPoP scheme and a proof by the key over this request.
            #expect(try await app.me(bound.session.accessToken).status == 401)
            let me = try await app.client.get("/v1/users/me", headers: [
                "Authorization": "DPoP \(bound.session.accessToken)",
                "DPoP": try device.proof("GET", app.url("/v1/users/me"), accessToken: bound.session.accessToken),
            ])
            #expect(me.status == 200)

            // Refresh: no proof, another key's proof, and a replayed proof are invalid_dpop_proof, and end nothing.
            let noProof = try await app.refresh(bound.session.refreshToken)
            #expect(noProof.status == 401)
            #expect(try noProof.decodeJSON(ProblemBody.self).code == "invalid_dpop_proof")
            let wrongKey = try await app.refresh(
                bound.session.refreshToken, headers: ["DPoP": try DeviceKey().proof("POST", app.url("/v1/sessions/refresh"))])
            #expect(wrongKey.status == 401)
            #expect(try wrongKey.decodeJSON(ProblemBody.self).code == "invalid_dpop_proof")

            let proof = try device.proof("POST", app.url("/v1/sessions/refresh"))
            let right = try await app.refresh(bound.session.refreshToken, headers: ["DPoP": proof])
            #expect(right.status == 200)
            let rotated = try right.decodeJSON(SignedIn.self)
            #expect(rotated.session.tokenType == "DPoP")

            let replayed = try await app.refresh(rotated.session.refreshToken, headers: ["DPoP": proof])
            #expect(replayed.status == 401)
            #expect(try replayed.decodeJSON(ProblemBody.self).code == "invalid_dpop_proof")
            let again = try await app.refresh(
                rotated.session.refreshToken, headers: ["DPoP": try device.proof("POST", app.url("/v1/sessions/refresh"))])
            #expect(again.status == 200, "failed proofs never end the session")

            // An unbound session's token is refused under the DPoP scheme, and challenged in it (RFC 9449 §7.1);
            // under Bearer, in Bearer's.
            let plain = try await app.signedIn(try await app.apple("apple-plain"))
            let mismatched = try await app.client.get("/v1/users/me", headers: [
                "Authorization": "DPoP \(plain.session.accessToken)",
                "DPoP": try device.proof("GET", app.url("/v1/users/me"), accessToken: plain.session.accessToken),
            ])
            #expect(mismatched.status == 401)
            #expect(mismatched.headers["WWW-Authenticate"]?.hasPrefix(#"DPoP error="invalid_token", algs=""#) == true, "\(mismatched.headers)")
            #expect(try await app.me(rotated.session.accessToken).headers["WWW-Authenticate"] == #"Bearer error="invalid_token""#)
            // A signed-in route of a session ended since, in the DPoP scheme.
            let signOut = try await app.client.post("/v1/sign-out", headers: [
                "Authorization": "DPoP \(rotated.session.accessToken)",
                "DPoP": try device.proof("POST", app.url("/v1/sign-out"), accessToken: rotated.session.accessToken),
            ], body: [])
            #expect(signOut.status == 204, "\(signOut.bodyText)")
            let ended = try await app.client.post("/v1/users/me/sessions/revoke", headers: [
                "Authorization": "DPoP \(rotated.session.accessToken)",
                "DPoP": try device.proof("POST", app.url("/v1/users/me/sessions/revoke"), accessToken: rotated.session.accessToken),
            ], body: [])
            #expect(ended.status == 401 && ended.headers["WWW-Authenticate"]?.hasPrefix("DPoP error=\"invalid_token\"") == true, "\(ended.headers)")
        }
    }

    /// A retried sign-in or refresh of a session bound to a key gets its kept tokens only with a fresh proof by that
    /// key, as the request itself needed (RFC 9449 §5): without one, or with another key's, it is invalid_dpop_proof,
    /// and is not run again (its refresh token is spent: running it would end the session as reuse).
    @Test func aBoundSessionsKeptAnswerIsGivenAgainOnlyToItsKey() async throws {
        try await DevService.run { app in
            let device = DeviceKey(), stranger = DeviceKey()
            let credential = try await app.apple("apple-dpop-retry")
            let signIn = { (headers: KeyValuePairs<String, String>) in try await app.signIn(credential, headers: headers) }
            let first = try await signIn(["Idempotency-Key": "bound-1", "DPoP": try device.proof("POST", app.url("/v1/sign-in"))])
            #expect(first.status == 201, "\(first.bodyText)")
            let bound = try first.decodeJSON(SignedIn.self)
            for (how, headers) in [
                ("no proof", ["Idempotency-Key": "bound-1"] as KeyValuePairs<String, String>),
                ("another key's proof", ["Idempotency-Key": "bound-1", "DPoP": try stranger.proof("POST", app.url("/v1/sign-in"))]),
            ] {
                let retried = try await signIn(headers)
                #expect(retried.status == 401 && !retried.bodyText.contains(bound.session.refreshToken), "sign-in, \(how): \(retried.bodyText)")
                #expect(try retried.decodeJSON(ProblemBody.self).code == "invalid_dpop_proof", "sign-in, \(how)")
            }
            let own = try await signIn(["Idempotency-Key": "bound-1", "DPoP": try device.proof("POST", app.url("/v1/sign-in"))])
            #expect(own.status == 201 && own.headers.values(for: "Idempotent-Replayed") == ["true"], "\(own.bodyText)")

            let refreshProof = try device.proof("POST", app.url("/v1/sessions/refresh"))
            let refreshed = try await app.refresh(bound.session.refreshToken, headers: ["Idempotency-Key": "bound-2", "DPoP": refreshProof])
            #expect(refreshed.status == 200, "\(refreshed.bodyText)")
            let rotated = try refreshed.decodeJSON(SignedIn.self)
            let events = try await app.totalEvents()
            for (how, headers) in [
                ("no proof", ["Idempotency-Key": "bound-2"] as KeyValuePairs<String, String>),
                ("another key's proof", ["Idempotency-Key": "bound-2", "DPoP": try stranger.proof("POST", app.url("/v1/sessions/refresh"))]),
            ] {
                let retried = try await app.refresh(bound.session.refreshToken, headers: headers)
                #expect(retried.status == 401 && !retried.bodyText.contains(rotated.session.refreshToken), "refresh, \(how): \(retried.bodyText)")
            }
            #expect(try await app.totalEvents() == events, "the refused retries ended nothing")
            let own2 = try await app.refresh(
                bound.session.refreshToken,
                headers: ["Idempotency-Key": "bound-2", "DPoP": try device.proof("POST", app.url("/v1/sessions/refresh"))])
            #expect(own2.status == 200 && own2.headers.values(for: "Idempotent-Replayed") == ["true"], "\(own2.bodyText)")
            let next = try await app.refresh(
                rotated.session.refreshToken, headers: ["DPoP": try device.proof("POST", app.url("/v1/sessions/refresh"))])
            #expect(next.status == 200, "the session lives on: \(next.bodyText)")
        }
    }

    /// Behind a proxy that forwards its own `Host`, clients sign the public URL: with `TETHER_PUBLIC_URL` set, a
    /// proof may name that URL, or the one of the `Host` the request carries (a server answering under more
    /// names than its links'), and no other.
    @Test func aDPoPProofNamesThePublicURLWhenOneIsConfigured() async throws {
        try await DevService.run(settings: ["TETHER_PUBLIC_URL": "https://id.example.com/"]) { app in
            let device = DeviceKey()
            let signIn = try await app.signIn(
                try await app.apple("apple-dpop-public"), headers: ["DPoP": try device.proof("POST", "https://id.example.com/v1/sign-in")])
            #expect(signIn.status == 201, "\(signIn.bodyText)")
            let bound = try signIn.decodeJSON(SignedIn.self)
            #expect(bound.session.tokenType == "DPoP")
            let refreshed = try await app.refresh(
                bound.session.refreshToken, headers: ["DPoP": try device.proof("POST", "https://id.example.com/v1/sessions/refresh")])
            #expect(refreshed.status == 200, "\(refreshed.bodyText)")
            let rotated = try refreshed.decodeJSON(SignedIn.self)
            // A proof of a URL neither the public one nor the request's Host is refused.
            for url in ["https://other.example/v1/sessions/refresh", "https://id.example.com/v1/sign-in"] {
                let refused = try await app.refresh(rotated.session.refreshToken, headers: ["DPoP": try device.proof("POST", url)])
                #expect(refused.status == 401, "\(url)")
                #expect(try refused.decodeJSON(ProblemBody.self).code == "invalid_dpop_proof")
            }
            // The name the request reached still works (the proxy passed the public Host, or the client called it).
            let direct = try await app.refresh(rotated.session.refreshToken, headers: ["DPoP": try device.proof("POST", app.url("/v1/sessions/refresh"))])
            #expect(direct.status == 200, "\(direct.bodyText)")
            let latest = try direct.decodeJSON(SignedIn.self)
            let me = try await app.client.get("/v1/users/me", headers: [
                "Authorization": "DPoP \(latest.session.accessToken)",
                "DPoP": try device.proof("GET", "https://id.example.com/v1/users/me", accessToken: latest.session.accessToken),
            ])
            #expect(me.status == 200)
        }
    }

    @Test func aRetryWithTheSameIdempotencyKeyGetsTheFirstAnswerAndWritesNothing() async throws {
        try await DevService.run { app in
            let credential = try await app.apple("apple-idem")
            let key = UUID().uuidString
            let first = try await app.signIn(credential, headers: ["Idempotency-Key": key])
            #expect(first.status == 201)
            let events = try await app.totalEvents()
            let retry = try await app.signIn(credential, headers: ["Idempotency-Key": key])
            #expect(retry.status == 201)
            #expect(retry.bodyText == first.bodyText, "the very same tokens come back")
            #expect(retry.headers.values(for: "Idempotent-Replayed") == ["true"])
            #expect(try await app.totalEvents() == events)
            // The same request with its members in another order and other spacing is the same request.
            let members = try JSONDecoder().decode([String: JSONValue].self, from: JSONEncoder().encode(credential))
            var reordered = Array("{ ".utf8)
            for (index, name) in members.keys.sorted(by: >).enumerated() {
                if index > 0 { reordered += Array(" ,\n".utf8) }
                reordered += try JSONValue.string(name).jsonBytes() + Array(" : ".utf8) + members[name]!.jsonBytes()
            }
            reordered += Array(" }".utf8)
            #expect(members.count >= 2)
            let reorderedRetry = try await app.client.post(
                "/v1/sign-in", headers: ["Idempotency-Key": key, "Content-Type": "application/json"], body: reordered)
            #expect(reorderedRetry.bodyText == first.bodyText, "\(String(decoding: reordered, as: UTF8.self))")
            #expect(try await app.totalEvents() == events)
            let user = try first.decodeJSON(SignedIn.self)
            #expect(try await app.me(user.session.accessToken).status == 200)

            // The stored answer is sealed: no token in the table.
            let stored = try await app.admin.query("SELECT body FROM idempotent_responses")
            let sealed: [UInt8] = try stored[0].decode("body")
            #expect(!String(decoding: sealed, as: UTF8.self).contains(user.session.refreshToken))

            let other = try await app.signIn(try await app.apple("apple-idem-2"), headers: ["Idempotency-Key": key])
            #expect(other.status == 422)
            #expect(try other.decodeJSON(ProblemBody.self).code == "idempotency_key_reused")

            // A client mistake is kept too: the retry gets the same 409 without running again.
            let linkKey = UUID().uuidString
            let second = try await app.signedIn(try await app.google("google-idem"))
            let taken = try await app.apple("apple-idem")
            let headers: KeyValuePairs<String, String> = ["Authorization": "Bearer \(second.session.accessToken)", "Idempotency-Key": linkKey]
            let conflict = try await app.client.post("/v1/users/me/identities", headers: headers, json: taken)
            let conflictAgain = try await app.client.post("/v1/users/me/identities", headers: headers, json: taken)
            #expect(conflict.status == 409)
            #expect(conflictAgain.status == 409)
            #expect(conflictAgain.bodyText == conflict.bodyText)
            #expect(conflictAgain.headers.values(for: "Idempotent-Replayed") == ["true"])

            // A replayed refusal keeps the headers that matter to the client.
            let refusalKey = UUID().uuidString
            let unknown = RefreshTokens.generate()
            let refused = try await app.refresh(unknown, headers: ["Idempotency-Key": refusalKey])
            let refusedAgain = try await app.refresh(unknown, headers: ["Idempotency-Key": refusalKey])
            #expect(refused.status == 401 && refusedAgain.status == 401)
            #expect(!refused.headers.values(for: "WWW-Authenticate").isEmpty)
            #expect(refusedAgain.headers.values(for: "WWW-Authenticate") == refused.headers.values(for: "WWW-Authenticate"))
            #expect(refusedAgain.headers.values(for: "Idempotent-Replayed") == ["true"])

            let bad = try await app.signIn(credential, headers: ["Idempotency-Key": String(repeating: "k", count: 300)])
            #expect(bad.status == 400)
        }
    }

    @Test func aKeyReusedAfterItsAnswerExpiredIsANewCommandNeverTheFirstUsers() async throws {
        try await DevService.run { app in
            let victim = try await app.signIn(try await app.apple("victim-sub", email: "victim@privaterelay.appleid.com"),
                                              headers: ["Idempotency-Key": "k-2024-01"])
            #expect(victim.status == 201)
            let victimId = try victim.decodeJSON(SignedIn.self).user.id
            try await app.admin.query("UPDATE idempotent_responses SET created_at = now() - interval '25 hours'")
            let other = try await app.signIn(try await app.google("other-sub"), headers: ["Idempotency-Key": "k-2024-01"])
            #expect(other.status == 201)
            let signedIn = try other.decodeJSON(SignedIn.self)
            #expect(signedIn.user.id != victimId)
            #expect(!other.bodyText.contains("victim"))
            #expect(try await app.me(signedIn.session.accessToken).status == 200, "the session it names exists")
            let users: Int = try await app.admin.query("SELECT count(*)::int AS n FROM users")[0].decode("n")
            #expect(users == 2)
        }
    }

    /// A provider's token may name an `exp` of any size. With a nonce, its used nonce was kept until that `exp`
    /// plus a minute, and an `exp` past Int64's microseconds trapped the whole process.
    @Test func aNonceIsKeptWhileItsTokenCanBeAcceptedWhateverItsExpSays() async throws {
        try await DevService.run { app in
            for (round, exp) in [1e308, 4e12].enumerated() {
                let rawNonce = UUID().uuidString
                let minted = try await app.idp.post("/dev-idp/apple/token", json: ["sub": .string("apple-far-exp-\(round)"), "rawNonce": .string(rawNonce), "exp": .double(exp)] as JSONValue)
                let token = try #require(try minted.decodeJSON([String: String].self)["identityToken"])
                let credential = Credential(provider: "apple", credential: ["identityToken": .string(token), "rawNonce": .string(rawNonce)])
                #expect(try await app.signIn(credential).status == 201)
                #expect(try await app.signIn(credential).status == 401, "the nonce is spent")
            }
            // Apple's tokens are refused ten minutes after their `iat`: so much (and the leeway) is what the nonces need.
            let kept: Double = try await app.admin.query(
                "SELECT extract(epoch FROM max(expires_at) - now())::float8 AS s FROM used_nonces")[0].decode("s")
            #expect(kept <= 11 * 60 && kept > 9 * 60, "kept for \(kept) s")
        }
    }

    /// A captured sign-in with its key is no credential: its answer is replayed to a retry for ten minutes, not a
    /// day, and after that the request runs again, where its spent nonce refuses it.
    @Test func aSignInsAnswerIsReplayedForMinutesNotADay() async throws {
        try await DevService.run { app in
            let credential = try await app.appleWithNonce("apple-captured")
            let first = try await app.signIn(credential, headers: ["Idempotency-Key": "captured"])
            #expect(first.status == 201)
            try await app.admin.query("UPDATE idempotent_responses SET created_at = now() - interval '9 minutes'")
            let retry = try await app.signIn(credential, headers: ["Idempotency-Key": "captured"])
            #expect(retry.bodyText == first.bodyText, "a retry within the window gets the first answer")
            try await app.admin.query("UPDATE idempotent_responses SET created_at = now() - interval '11 minutes'")
            let late = try await app.signIn(credential, headers: ["Idempotency-Key": "captured"])
            #expect(late.status == 401, "\(late.bodyText)")
            #expect(!late.bodyText.contains("refreshToken"))
            #expect(try await app.eventCount("SessionStarted") == 1)
            // An answer that hands out no session (a refusal) is still kept the whole day.
            let refused = try await app.signIn(credential, headers: ["Idempotency-Key": "refused"])
            #expect(refused.status == 401)
            try await app.admin.query("UPDATE idempotent_responses SET created_at = now() - interval '11 minutes'")
            let events = try await app.totalEvents()
            let again = try await app.signIn(credential, headers: ["Idempotency-Key": "refused"])
            #expect(again.headers.values(for: "Idempotent-Replayed") == ["true"])
            #expect(again.bodyText == refused.bodyText)
            #expect(try await app.totalEvents() == events)
        }
    }

    @Test func keptAnswersPastTheirDayAreSweptAndFreshOnesStay() async throws {
        try await DevService.run { app in
            for index in 0..<5 {
                let answer = try await app.signIn(try await app.apple("apple-sweep-\(index)"), headers: ["Idempotency-Key": "sweep-\(index)"])
                #expect(answer.status == 201)
            }
            let kept = { () async throws -> [String] in
                try await app.admin.query("SELECT scope FROM idempotent_responses ORDER BY scope").map { try $0.decode("scope", as: String.self) }
            }
            let all = try await kept()
            #expect(all.count == 5)
            // Three are a day and a minute old; nothing is swept before its day is out.
            #expect(try await app.service.sweepExpiredIdempotentAnswers() == 0)
            try await app.admin.query("""
                UPDATE idempotent_responses SET created_at = now() - interval '24 hours 1 minute'
                WHERE scope IN (SELECT scope FROM idempotent_responses ORDER BY scope LIMIT 3)
                """)
            #expect(try await app.service.sweepExpiredIdempotentAnswers() == 3)
            #expect(try await kept() == Array(all.suffix(2)))
            #expect(try await app.service.sweepExpiredIdempotentAnswers() == 0)
        }
    }

    @Test func aSignInThatFailsOnTheServersSideGivesItsNonceBackForTheRetry() async throws {
        try await DevService.run { app in
            let credential = try await app.appleWithNonce("apple-nonce-retry")
            // The database refuses the write after the token (and its nonce) passed: a failure of the server, not the client.
            try await app.admin.query("REVOKE INSERT ON users FROM tether_service")
            let failed = try await app.signIn(credential)
            #expect(failed.status == 500)
            try await app.admin.query("GRANT INSERT ON users TO tether_service")
            let retried = try await app.signIn(credential)
            #expect(retried.status == 201, "the retry with the same token is not taken for a replay: \(retried.bodyText)")
            let replayed = try await app.signIn(credential)
            #expect(replayed.status == 401, "once the sign-in happened, the nonce is spent for good")
        }
    }

    @Test func repeatedFailedSignInsAreLimitedAndRecorded() async throws {
        try await DevService.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "3"]) { app in
            let created = try await app.client.post("/v1/sign-up", json: ["email": "zoe@example.com", "password": "the right one"])
            #expect(created.status == 201)
            let userId = try created.decodeJSON(SignedIn.self).user.id
            for _ in 0..<3 {
                #expect(try await app.signIn(app.password("zoe@example.com", "a wrong one")).status == 401)
            }
            let limited = try await app.signIn(app.password("Zoe@Example.com", "the right one"))
            #expect(limited.status == 429)
            #expect(try limited.decodeJSON(ProblemBody.self).code == "rate_limited")
            let retryAfter = Int(limited.headers.values(for: "Retry-After").first ?? "") ?? 0
            #expect((1...60).contains(retryAfter))
            _ = try await app.signIn(app.password("zoe@example.com", "the right one"))

            #expect(try await app.eventCount("SignInFailed", userId: userId) == 3, "failures show in the user's history")
            #expect(try await app.tallied("throttled", detail: "account") == 2, "throttled attempts are counted, not logged one by one")

            // The client address is limited too: other accounts from it are refused as well.
            let stranger = try await app.signIn(try await app.apple("apple-after-limit"))
            #expect(stranger.status == 429)
        }
    }

    /// Each refused sign-in stored the whole `User-Agent`: a header of tens of kilobytes was stored that many
    /// times, at every failure the limit allows.
    @Test func aFailedSignInKeepsTheFirstHalfKilobyteOfAHugeUserAgent() async throws {
        try await DevService.run { app in
            let created = try await app.client.post("/v1/sign-up", json: ["email": "ua@example.com", "password": "the right one"])
            let userId = try created.decodeJSON(SignedIn.self).user.id
            let huge = "Agent/1 " + String(repeating: "é", count: 12_000)
            let refused = try await app.client.post(
                "/v1/sign-in", headers: ["User-Agent": huge],
                json: ["provider": "password", "credential": ["email": "ua@example.com", "password": "a wrong one"]] as JSONValue)
            #expect(refused.status == 401)
            let failures = try await app.service.accounts.store.readUser(try #require(UUID(uuidString: userId)))
                .filter { $0.type == "SignInFailed" }
            let kept = try #require(failures.first?.metadata.userAgent)
            #expect(failures.count == 1)
            #expect(kept.utf8.count <= EventMetadata.maxUserAgentBytes && kept.utf8.count >= EventMetadata.maxUserAgentBytes - 1)
            #expect(huge.hasPrefix(kept), "cut on a character's boundary, not in the middle of one")
            let stored: Int = try await app.admin.query(
                "SELECT max(octet_length(data::text) + octet_length(metadata::text))::int AS n FROM events WHERE type = 'SignInFailed'")[0].decode("n")
            #expect(stored < 3_000, "the event holds \(stored) bytes")
        }
    }

    @Test func aUserHoldsAtMostAHundredLiveSessionsAndTheOldestEndsFirst() async throws {
        try await DevService.run { app in
            var sessions: [SignedIn.Session] = []
            for _ in 0...UserAccount.maxLiveSessions {
                sessions.append(try await app.signedIn(try await app.apple("apple-many-devices")).session)
            }
            let userId = try await app.signedIn(try await app.apple("apple-many-devices")).user.id
            // 102 sign-ins: the two oldest sessions ended, in order, as the 101st and 102nd began.
            let ended = try await app.admin.query("""
                SELECT id::text AS id FROM sessions WHERE user_id = \(userId)::uuid AND end_reason = 'session_limit' ORDER BY started_at, id
                """).map { try $0.decode("id", as: String.self) }
            #expect(ended == [sessions[0].id, sessions[1].id])
            let live: Int = try await app.admin.query(
                "SELECT count(*)::int AS n FROM sessions WHERE user_id = \(userId)::uuid AND ended_at IS NULL")[0].decode("n")
            #expect(live == UserAccount.maxLiveSessions)
            #expect(try await app.refresh(sessions[0].refreshToken).status == 401, "the oldest session's refresh token is refused")
            #expect(try await app.refresh(sessions[2].refreshToken).status == 200, "the next oldest goes on")
        }
    }

    @Test func aFailedSignInOfAnUnknownAccountKeepsNoEmail() async throws {
        try await DevService.run { app in
            #expect(try await app.signIn(app.password("nobody-here@example.com", "a guess")).status == 401)
            #expect(try await app.totalEvents() == 0, "a refusal about no one is counted, not logged")
            #expect(try await app.tallied("failed", detail: "invalid_credential") == 1)
            #expect(try await app.service.flushSignInFailureTallies() == 0, "the minute is still open")
            // Once its minute has closed, the count becomes one event, which names no one either.
            try await app.admin.query("UPDATE sign_in_failure_tallies SET minute = minute - interval '1 day'")
            #expect(try await app.service.flushSignInFailureTallies() == 1)
            let rows = try await app.admin.query("SELECT data::text AS data, stream, user_id FROM events")
            #expect(rows.count == 1)
            #expect(try !rows[0].decode("data", as: String.self).contains("nobody-here"))
            #expect(try rows[0].decode("stream", as: String.self) == "sign-in-failures-counted")
            #expect(try rows[0].decode("user_id", as: UUID?.self) == nil)
            #expect(try await app.tallied("failed", detail: "invalid_credential") == 1, "counted once, in the event")
            #expect(try await app.admin.query("SELECT 1 FROM sign_in_failure_tallies").isEmpty)
        }
    }

    @Test func signUpsFromOneAddressAreLimited() async throws {
        try await DevService.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "3"]) { app in
            var statuses: [Int] = []
            for index in 0..<4 {
                statuses.append(try await app.client.post(
                    "/v1/sign-up", json: ["email": "many\(index)@example.com", "password": "a long password"]).status)
            }
            #expect(statuses == [201, 201, 201, 429])
            let long = try await app.client.post(
                "/v1/sign-up", json: ["email": "x@example.com", "password": "a long password", "displayName": String(repeating: "n", count: 101)])
            #expect(long.status == 400, "checked before the limit and before any hashing")
        }
    }

    /// Every 401 carried `WWW-Authenticate: Bearer error="invalid_token"`, which tells a client following RFC 6750
    /// that its session is gone: a wrong code or a refused credential sent with a good token made it throw that away.
    @Test func onlyARefusedTokenIsChallenged() async throws {
        try await DevService.run { app in
            let signedIn = try await app.signedIn(try await app.apple("apple-challenged"))
            let wrongCode = try await app.client.post(
                "/v1/email-verification/confirm", headers: ["Authorization": "Bearer \(signedIn.session.accessToken)"],
                json: ["code": EmailCodeFormat.make(for: UUID()).code])
            let forged = try await app.signIn(try await app.apple("apple-forged", extra: ["forge": "bad-signature"]))
            for refused in [wrongCode, forged] {
                #expect(refused.status == 401)
                #expect(refused.headers.values(for: "WWW-Authenticate").isEmpty, "\(refused.bodyText)")
            }
            #expect(try await app.me(signedIn.session.accessToken).status == 200, "the token was fine all along")
            let badToken = try await app.me(signedIn.session.accessToken + "x")
            #expect(badToken.status == 401 && badToken.headers.values(for: "WWW-Authenticate") == [#"Bearer error="invalid_token""#])
            let unknownRefresh = try await app.refresh(RefreshTokens.generate())
            #expect(unknownRefresh.headers.values(for: "WWW-Authenticate") == [#"Bearer error="invalid_token""#])
            // No token, or one in a scheme Tether does not take: a challenge without an error code (RFC 6750 §3.1).
            for headers: KeyValuePairs<String, String> in [[:], ["Authorization": "Basic YWRhOnNlY3JldA=="]] {
                let none = try await app.client.get("/v1/users/me", headers: headers)
                let code = try none.json["code"]?.string
                #expect(none.status == 401 && code == "invalid_token", "\(none.bodyText)")
                let challenges = none.headers.values(for: "WWW-Authenticate")
                #expect(challenges.count == 1 && challenges[0].hasPrefix(#"Bearer, DPoP algs=""#) && challenges[0].contains("ES256"), "\(challenges)")
                #expect(!challenges.contains { $0.contains("error") }, "\(challenges)")
            }
        }
    }

    /// A throttled address's provider sign-ins were still verified before the limits refused them: a Facebook
    /// token's two Graph API calls each, so a throttled client could spend the app's quota. Once refused, the
    /// address's next attempts are answered 429 before verification, links included. (The Graph API here is
    /// unreachable: a verification would answer 503.)
    @Test func aThrottledAddressIsRefusedBeforeItsCredentialIsVerified() async throws {
        try await DevService.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "3", "TETHER_FACEBOOK_GRAPH_URL": "http://127.0.0.1:1/graph"]) { app in
            let linker = try await app.signedIn(try await app.apple("apple-linker"))
            let facebook = try await app.facebook("fb-throttled")
            #expect(try await app.signIn(facebook).status == 503, "the Graph API cannot be reached")
            var statuses: [Int] = []
            for _ in 0..<4 {
                statuses.append(try await app.signIn(try await app.apple("apple-forged", extra: ["forge": "bad-signature"])).status)
            }
            #expect(statuses == [401, 401, 401, 429])
            let throttled = try await app.signIn(facebook)
            #expect(throttled.status == 429, "\(throttled.bodyText)")
            let retryAfter = Int(throttled.headers.values(for: "Retry-After").first ?? "") ?? 0
            #expect((1...60).contains(retryAfter))
            let link = try await app.link(facebook, to: linker.session.accessToken)
            #expect(link.status == 429, "a link's credential is verified under the same limits: \(link.bodyText)")
        }
    }

    /// A password link hashed the password (scrypt) before the command found its address taken: an anonymous
    /// user, one sign-up's place, bought unlimited hashing. Each link now takes a place of the address's sign-ups.
    @Test func passwordLinksTakeTheAddressesSignUpPlaces() async throws {
        try await DevService.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "5", "TETHER_FIREBASE_PROJECT_ID": "demo-project"]) { app in
            // Three places: a sign-up, and an anonymous user on /v1 and on Firebase (each a sign-up).
            #expect(try await app.client.post("/v1/sign-up", json: ["email": "holder@example.com", "password": "a long password"]).status == 201)
            let anonymous = try await app.client.post("/v1/sign-in", json: ["provider": "anonymous"]).decodeJSON(SignedIn.self)
            let path = "\(FirebaseApp.v1)/accounts:signUp?key=any"
            let guest = try await app.client.post(path, json: [String: String]()).decodeJSON([String: JSONValue].self)
            let before = try await app.passwordHashes()
            var statuses: [Int] = []
            for _ in 0..<3 {
                statuses.append(try await app.link(
                    Credential(provider: "password", credential: ["email": "holder@example.com", "password": "another password"]),
                    to: anonymous.session.accessToken).status)
            }
            #expect(statuses == [409, 409, 429])
            #expect(try await app.passwordHashes() - before == 2, "the refused link hashed nothing")
            // Firebase's upgrade of an anonymous user to a password is the same link.
            let upgrade = try await app.client.post(
                path, json: ["idToken": try #require(guest["idToken"]), "email": "holder@example.com", "password": "another password"] as JSONValue)
            #expect(upgrade.status == 400 && upgrade.bodyText.contains("TOO_MANY_ATTEMPTS_TRY_LATER"), "\(upgrade.bodyText)")
            #expect(try await app.passwordHashes() - before == 2)
        }
    }

    @Test func parallelGuessesCannotAllPassTheLimitBeforeTheyFail() async throws {
        try await DevService.run(settings: ["TETHER_SIGN_IN_FAILURE_LIMIT": "5"]) { app in
            #expect(try await app.client.post("/v1/sign-up", json: ["email": "par@example.com", "password": "the right one"]).status == 201)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<30 {
                    group.addTask {
                        try await app.withNewClient { try await app.signIn(app.password("par@example.com", "guess \(index)"), on: $0) }.status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 401 }.count <= 5, "only as many guesses as the limit are checked: \(statuses.sorted())")
            #expect(statuses.allSatisfy { $0 == 401 || $0 == 429 }, "\(statuses.sorted())")
            let failures = try await app.eventCount("SignInFailed")
            #expect(failures == statuses.filter { $0 == 401 }.count, "every checked guess is recorded")
        }
    }

    @Test func fiftyParallelSignInsOfOneNewAppleIdentityMakeOneUser() async throws {
        try await DevService.run { app in try await app.withTwoInstances { ports in
            // Fifty devices, each with its own token for the same Apple identity (a token is accepted once).
            var credentials: [Credential] = []
            for _ in 0..<50 {
                credentials.append(try await app.apple("apple-crowd", email: "crowd@privaterelay.appleid.com"))
            }
            // Half the requests go to each of two Tether instances on the one database.
            let answers = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for (index, credential) in credentials.enumerated() {
                    group.addTask {
                        // No retry: a 503 here is a failure of the server (the pool once lost its waiters).
                        let response = try await app.withNewClient(port: ports[index % 2]) { try await app.signIn(credential, on: $0) }
                        guard let user = try? response.decodeJSON(SignedIn.self).user.id else {
                            return (response.status, response.bodyText)
                        }
                        return (response.status, user)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(answers.map(\.1)).count == 1, "all fifty answers name the same user: \(Set(answers.map(\.1)))")
            #expect(answers.filter { $0.0 == 201 }.count == 1, "exactly one answer says new user")
            #expect(answers.allSatisfy { $0.0 == 200 || $0.0 == 201 })
            let users: Int = try await app.admin.query("SELECT count(*)::int AS n FROM users")[0].decode("n")
            #expect(users == 1)
        } }
    }

    @Test func fiftyParallelLinksOfOneIdentitySucceedOnce() async throws {
        try await DevService.run { app in try await app.withTwoInstances { ports in
            var tokens: [String] = []
            for index in 0..<50 {
                tokens.append(try await app.signedIn(try await app.apple("apple-linker-\(index)")).session.accessToken)
            }
            let credential = try await app.google("google-contested")
            let statuses = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                for (index, token) in tokens.enumerated() {
                    group.addTask {
                        let response = try await app.withNewClient(port: ports[index % 2]) { try await app.link(credential, to: token, on: $0) }
                        return (response.status, response.status == 200 ? nil : try response.decodeJSON(ProblemBody.self).code)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0.0 == 200 }.count == 1)
            #expect(statuses.filter { $0.1 == "credential_already_in_use" }.count == 49)
        } }
    }

    @Test func racingLinksAndUnlinksOfOneProviderKeepBothUniqueRules() async throws {
        try await DevService.run { app in try await app.withTwoInstances { ports in
            let user = try await app.signedIn(try await app.apple("apple-racer"))
            let auth: KeyValuePairs<String, String> = ["Authorization": "Bearer \(user.session.accessToken)"]
            var credentials: [Credential] = []
            for index in 0..<10 { credentials.append(try await app.google("google-racer-\(index)")) }
            try await withThrowingTaskGroup(of: Int.self) { group in
                for credential in credentials {
                    group.addTask {
                        try await app.withNewClient(port: ports[0]) { try await app.link(credential, to: user.session.accessToken, on: $0) }.status
                    }
                    group.addTask {
                        try await app.withNewClient(port: ports[1]) { try await $0.delete("/v1/users/me/identities/google", headers: auth) }.status
                    }
                }
                for try await status in group {
                    #expect([200, 404, 409].contains(status))
                }
            }
            let perProvider: Int = try await app.admin.query("""
                SELECT coalesce(max(n), 0)::int AS n FROM (SELECT count(*) AS n FROM identities GROUP BY user_id, provider) t
                """)[0].decode("n")
            #expect(perProvider == 1)
            let me = try await app.me(user.session.accessToken).decodeJSON(UserEnvelope.self).user
            #expect(me.identities.filter { $0.provider == "google" }.count <= 1)
            try await expectProjectionsMatchTheLog(app)
        } }
    }

    @Test func signOutRacingRefreshNeverLeavesALiveSession() async throws {
        try await DevService.run { app in try await app.withTwoInstances { ports in
            for round in 0..<10 {
                let user = try await app.signedIn(try await app.apple("apple-race-\(round)"))
                async let signOut = app.withNewClient(port: ports[round % 2]) {
                    try await $0.post("/v1/sign-out", headers: ["Authorization": "Bearer \(user.session.accessToken)"], body: [])
                }
                async let refresh = app.withNewClient(port: ports[(round + 1) % 2]) { try await app.refresh(user.session.refreshToken, on: $0) }
                let (out, refreshed) = try await (signOut, refresh)
                #expect([204, 401].contains(out.status))
                if refreshed.status == 200 {
                    let rotated = try refreshed.decodeJSON(SignedIn.self)
                    if out.status == 204 {
                        #expect(try await app.me(rotated.session.accessToken).status == 401)
                        #expect(try await app.refresh(rotated.session.refreshToken).status == 401)
                    }
                }
                let live: Int = try await app.admin.query("""
                    SELECT count(*)::int AS n FROM sessions WHERE id = \(UUID(uuidString: user.session.id)!) AND ended_at IS NULL
                    """)[0].decode("n")
                #expect(out.status != 204 || live == 0, "a session that was signed out stays ended")
            }
        } }
    }

    @Test func theProjectionsOfAFullScenarioAreExplainedByTheLog() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-full", email: "full@privaterelay.appleid.com"))
            _ = try await app.link(try await app.facebook("fb-full", email: "full@example.com"), to: user.session.accessToken)
            _ = try await app.link(try await app.google("google-full"), to: user.session.accessToken)
            _ = try await app.client.delete("/v1/users/me/identities/google", headers: ["Authorization": "Bearer \(user.session.accessToken)"])
            let rotated = try await app.refresh(user.session.refreshToken).decodeJSON(SignedIn.self)
            _ = try await app.refresh(user.session.refreshToken)
            _ = try await app.client.post("/v1/sign-up", json: ["email": "p@gmail.com", "password": "password one"])
            _ = try await app.signIn(try await app.google("google-p", email: "p@gmail.com"))
            _ = try await app.client.post("/v1/sign-out", headers: ["Authorization": "Bearer \(rotated.session.accessToken)"], body: [])
            try await expectProjectionsMatchTheLog(app)
        }
    }

    /// Sessions and refresh tokens have no foreign keys (schema 029: their checks were a third of a sign-in's
    /// write): a row no event accounts for, such as one for a user or session that does not exist, is drift
    /// that `--verify` reports twice (extra, and dangling: its reference names no row) and a replay removes.
    @Test func aSessionOrRefreshTokenNoEventAccountsForIsDrift() async throws {
        try await DevService.run { app in
            let user = try await app.signedIn(try await app.apple("apple-orphans"))
            let nobody = UUID(), noSession = UUID()
            try await app.admin.query("""
                INSERT INTO sessions (id, user_id, refresh_token_hash, auth_time, started_at)
                VALUES (\(UUID()), \(nobody), 'orphan-hash', now(), now())
                """)
            try await app.admin.query("INSERT INTO refresh_tokens (token_hash, session_id, generation) VALUES ('orphan-token', \(noSession), 0)")
            let replay = ProjectionReplay(projection: .accounts, database: app.admin)
            let drift = try await replay.run(.verify).drift
            #expect(drift.count == 4, "\(drift)")
            #expect(drift.contains { $0.table == "sessions" && $0.kind == .extra && $0.description.contains(nobody.uuidString.lowercased()) })
            #expect(drift.contains { $0.table == "refresh_tokens" && $0.kind == .extra && $0.description.contains("orphan-token") })
            let noUser = nobody.uuidString.lowercased(), noSessionId = noSession.uuidString.lowercased()
            #expect(drift.contains(RowDrift(table: "sessions", kind: .dangling, key: "user_id=\(noUser)", detail: "users (id=\(noUser))")))
            #expect(drift.contains(RowDrift(
                table: "refresh_tokens", kind: .dangling, key: "session_id=\(noSessionId)", detail: "sessions (id=\(noSessionId))")))
            #expect(drift.first { $0.kind == .dangling }?.description
                == "sessions (user_id=\(noUser)) refers to users (id=\(noUser)), which is not in the live table")

            _ = try await replay.run(.replace)
            #expect(try await replay.run(.verify).drift.isEmpty)
            let left = try await app.admin.query("SELECT count(*)::int AS n FROM sessions WHERE user_id = \(nobody)")
            #expect(try left[0].decode("n", as: Int.self) == 0)
            // The user's own session is the log's, and still refreshes.
            #expect(try await app.refresh(user.session.refreshToken).status == 200)
        }
    }

    /// A dangling row the log itself makes (here a session started in the stream of a user who was never
    /// registered: no command writes that, a projection bug could) is in the live tables and the rebuilt ones
    /// alike, so only the reference check reports it; the foreign key refused it before 029.
    @Test func aSessionTheLogStartsForNoUserIsReportedAsDangling() async throws {
        try await DevService.run { app in
            _ = try await app.signedIn(try await app.apple("apple-dangling"))
            let nobody = UUID()
            let started = AccountEvent.sessionStarted(.init(
                sessionId: UUID(), refreshTokenHash: "dangling-hash", authTime: Date(), amr: ["apple"], jkt: nil,
                secretKind: .accessAndRefreshTokens, installationId: nil, expiresAt: nil, personal: nil))
            try await PostgresEventStore(client: app.admin).append(
                [try AccountEventCodec.encode(started, userId: nobody, id: UUID())], to: .user(nobody), expected: .noStream,
                metadata: EventMetadata())
            let replay = ProjectionReplay(projection: .accounts, database: app.admin)
            _ = try await replay.run(.replace)
            let sessions = try await app.admin.query("SELECT count(*)::int AS n FROM sessions WHERE user_id = \(nobody)")
            #expect(try sessions[0].decode("n", as: Int.self) == 1, "the replay made the row the log asks for")
            let noUser = nobody.uuidString.lowercased()
            #expect(try await replay.run(.verify).drift
                == [RowDrift(table: "sessions", kind: .dangling, key: "user_id=\(noUser)", detail: "users (id=\(noUser))")])
        }
    }

    /// Verifies the account tables against the log, then rebuilds them (`tether replay`'s engine) and compares.
    private func expectProjectionsMatchTheLog(_ app: DevService) async throws {
        func snapshot() async throws -> [String] {
            var lines: [String] = []
            for table in ["users", "identities", "sessions", "refresh_tokens", "mfa_factors", "mfa_recovery_codes", "mfa_challenges"] {
                let rows = try await app.admin.query("SELECT t::text AS row FROM \(unsafeSQL: table) t ORDER BY t::text")
                lines += try rows.map { table + " " + (try $0.decode("row", as: String.self)) }
            }
            return lines
        }
        let live = try await snapshot()
        let replay = ProjectionReplay(projection: .accounts, database: app.admin)
        #expect(try await replay.run(.verify).drift == [])
        _ = try await replay.run(.replace)
        let rebuilt = try await snapshot()
        #expect(live == rebuilt)
        #expect(!live.isEmpty)
    }
}

@Suite("/v1 when the database is unreachable")
struct V1DatabaseUnavailableTests {
    @Test func anUnreachableDatabaseIsA503WithRetryAfterNeverASignOut() async throws {
        // A port nothing listens on: every query fails to connect.
        let probe = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, log: .discarding), router: Router())
        try probe.start()
        let port = probe.boundPort
        await probe.shutdown()
        let service = try TetherService(
            configuration: try TetherConfiguration(values: ["TETHER_LISTEN": "127.0.0.1:0"]),
            databaseURL: "postgresql://tether@127.0.0.1:\(port)/tether?connect_timeout=2", logger: Logger(sink: .discarding))
        try service.start()
        let client = HTTPTestClient(port: service.server.boundPort, timeout: .seconds(30))
        let refresh = try await client.post("/v1/sessions/refresh", json: ["refreshToken": RefreshTokens.generate()])
        #expect(refresh.status == 503)
        #expect(!refresh.headers.values(for: "Retry-After").isEmpty)
        #expect(!refresh.bodyText.contains("invalid_token"), "a client must not sign its user out over this")
        let signUp = try await client.post("/v1/sign-up", json: ["email": "x@example.com", "password": "a long password"])
        #expect(signUp.status == 503)
        #expect(try await client.get("/readyz").status == 503)
        await client.close()
        await service.stop()
    }
}
