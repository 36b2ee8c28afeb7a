import Foundation
import Testing
import TetherCore
import TetherTesting

/// SEMANTICS §1 on the Parse surface, provider by provider, over real HTTP with dev identity provider tokens.
@Suite("Parse surface: linking rules")
struct ParseLinkingTests {
    /// A Facebook Limited Login token for `sub`.
    private func limitedToken(_ parse: ParseApp, _ sub: String) async throws -> String {
        let response = try await parse.app.idp.post("/dev-idp/facebook/limited-token", json: ["sub": sub])
        guard let token = try response.decodeJSON([String: String].self)["authenticationToken"] else {
            throw HarnessError("no Limited Login token: \(response.bodyText)")
        }
        return token
    }

    @Test func theRequestsOtherIdentitiesAreLinkedImplicitlyAndEveryProviderLogsIn() async throws {
        try await ParseApp.run { parse in
            let created = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-many", "token": try await parse.appleToken("apple-many")]),
                "google": ParseApp.strings(["id": "google-many", "id_token": try await parse.googleToken("google-many")]),
            ])]))
            #expect(created.status == 201, "\(created.text)")
            let objectId = try #require(created.string("objectId"))
            // An owned identity with a new one: the owner logs in and gains the new one.
            let more = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "google": ParseApp.strings(["id": "google-many", "id_token": try await parse.googleToken("google-many")]),
                "facebook": ParseApp.strings(["id": "fb-limited", "token": try await limitedToken(parse, "fb-limited")]),
            ])]))
            #expect(more.status == 200, "\(more.text)")
            #expect(more.string("objectId") == objectId)
            #expect(more.authData == ["apple": ["id": "apple-many"], "google": ["id": "google-many"], "facebook": ["id": "fb-limited"]])
            // Each provider alone now logs in to the same user: Limited Login, classic Facebook is another identity.
            let viaLimited = try await parse.logIn("facebook", ["id": "fb-limited", "token": try await limitedToken(parse, "fb-limited")])
            #expect(viaLimited.status == 200)
            #expect(viaLimited.string("objectId") == objectId)
            let classic = try await parse.logIn("facebook", ["id": "fb-classic", "access_token": try await parse.facebookToken("fb-classic")])
            #expect(classic.status == 201)
            #expect(try await parse.app.eventCount("UserRegistered") == 2)
        }
    }

    @Test func identitiesOfTwoUsersInOneRequestAre208AndNothingIsWritten() async throws {
        try await ParseApp.run { parse in
            _ = try await parse.logIn("apple", ["id": "apple-one", "token": try await parse.appleToken("apple-one")])
            _ = try await parse.logIn("google", ["id": "google-two", "id_token": try await parse.googleToken("google-two")])
            let before = try await parse.accountEvents()
            let both = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-one", "token": try await parse.appleToken("apple-one")]),
                "google": ParseApp.strings(["id": "google-two", "id_token": try await parse.googleToken("google-two")]),
            ])]))
            #expect(both.status == 400)
            #expect(both.text == #"{"code":208,"error":"this auth is already used"}"#)
            // Signed in as one user, presenting the other's identity.
            let session = try #require(try await parse.anonymousLogIn().string("sessionToken"))
            let beforeOther = try await parse.accountEvents()
            let theirs = try await parse.logIn("apple", ["id": "apple-one", "token": try await parse.appleToken("apple-one")], .init(session: session))
            #expect(theirs.code == 208)
            #expect(try await parse.accountEvents() == beforeOther)
            #expect(beforeOther > before)
        }
    }

    @Test func anEmailAnotherAccountHoldsIs203UnderOneAccountPerEmailAndAllowedOtherwise() async throws {
        try await ParseApp.run { parse in
            _ = try await parse.send("POST", "/users", json: .object(["username": "dana@example.com", "password": "dana's password"]))
            // Facebook never vouches for an email: no takeover, the address is taken.
            let facebook = try await parse.logIn("facebook", ["id": "fb-dana", "access_token": try await parse.facebookToken("fb-dana", email: "dana@example.com")])
            #expect(facebook.status == 400)
            #expect(facebook.text == #"{"code":203,"error":"Account already exists for this email address."}"#)
        }
        try await ParseApp.run(settings: ["TETHER_EMAIL_POLICY": "allow-duplicate-emails"]) { parse in
            _ = try await parse.send("POST", "/users", json: .object(["username": "dana@example.com", "password": "dana's password"]))
            let facebook = try await parse.logIn("facebook", ["id": "fb-dana", "access_token": try await parse.facebookToken("fb-dana", email: "dana@example.com")])
            #expect(facebook.status == 201)
        }
    }

    @Test func nullUnlinksAnUnchangedEntryIsANoOpAndAChangedIdReplacesTheIdentity() async throws {
        try await ParseApp.run { parse in
            let user = try await parse.logIn("apple", ["id": "apple-u", "token": try await parse.appleToken("apple-u")])
            let objectId = try #require(user.string("objectId"))
            let session = try #require(user.string("sessionToken"))
            let linked = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-u"]),
                "facebook": ParseApp.strings(["id": "fb-u", "access_token": try await parse.facebookToken("fb-u")]),
            ])]))
            #expect(linked.status == 200)
            let events = try await parse.accountEvents()
            // Echoing what is linked changes nothing (no provider is asked: the stale token is never checked).
            let echo = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-u", "token": "stale"]), "facebook": ParseApp.strings(["id": "fb-u", "access_token": "stale"]),
            ])]))
            #expect(echo.status == 200)
            #expect(try await parse.accountEvents() == events)
            // A changed id is verified, then replaces the linked identity (Parse saves the new entry).
            let forged = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-other", "token": "not-a-jwt"]),
            ])]))
            #expect(forged.code == 101)
            let changed = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-other", "token": try await parse.appleToken("apple-other")]),
            ])]))
            #expect(changed.status == 200, "\(changed.text)")
            #expect(try await parse.send("GET", "/users/me", .init(session: session)).authData["apple"] == ["id": "apple-other"])
            #expect(try await parse.logIn("apple", ["id": "apple-u", "token": try await parse.appleToken("apple-u")]).status == 201,
                    "the replaced identity belongs to nobody now")
            let back = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-u", "token": try await parse.appleToken("apple-u")]),
            ])]))
            #expect(back.code == 208, "it is another user's now")
            let unlinked = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-other"]), "facebook": .null,
            ])]))
            #expect(unlinked.status == 200)
            let me = try await parse.send("GET", "/users/me", .init(session: session))
            #expect(me.authData == ["apple": ["id": "apple-other"]])
            #expect(!me.text.contains("facebook"))
            // The last method stays.
            #expect(try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object(["authData": .object([
                "apple": .null,
            ])])).code == 119)
        }
    }

    /// A password is no authData entry: `"password": null` in a `PUT` removed it (the user could no longer log
    /// in with it, and their username became a random one). It names nothing to remove, and changes nothing.
    @Test func aNullPasswordEntryInAuthDataRemovesNothing() async throws {
        try await ParseApp.run { parse in
            let apple = try await parse.logIn("apple", ["id": "apple-kept", "token": try await parse.appleToken("apple-kept")])
            let objectId = try #require(apple.string("objectId"))
            var session = try #require(apple.string("sessionToken"))
            let password = try await parse.send(
                "PUT", "/users/\(objectId)", .init(session: session), json: .object(["username": "kept@example.com", "password": "a kept password"]))
            #expect(password.status == 200, "\(password.text)")
            session = try #require(password.string("sessionToken"))
            let events = try await parse.accountEvents()
            for body: JSONValue in [.object(["password": .null]), .object(["password": .null, "facebook": .null])] {
                let put = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object(["authData": body]))
                #expect(put.status == 200, "\(put.text)")
            }
            #expect(try await parse.accountEvents() == events)
            #expect(try await parse.send("GET", "/users/me", .init(session: session)).string("username") == "kept@example.com")
            let logIn = try await parse.send("POST", "/login", json: .object(["username": "kept@example.com", "password": "a kept password"]))
            #expect(logIn.status == 200, "\(logIn.text)")
        }
    }

    /// A password on the email of an Apple user (whose username is random) was 202 "username": the email is
    /// taken, 203 (SEMANTICS §3), on a sign-up and on a PUT that adds a password, before anything is written.
    /// The email of another password user is their username: 202.
    @Test func aPasswordOnAnotherAccountsEmailIs203AndOnAnotherUsersUsername202() async throws {
        try await ParseApp.run { parse in
            _ = try await parse.logIn("apple", ["id": "apple-u1", "token": try await parse.appleToken("apple-u1", email: "u1@example.com")])
            _ = try await parse.send("POST", "/users", json: .object(["username": "u2@example.com", "password": "u2's password"]))
            let anonymous = try await parse.anonymousLogIn()
            let objectId = try #require(anonymous.string("objectId"))
            let session = try #require(anonymous.string("sessionToken"))
            let events = try await parse.accountEvents()
            let emailTaken = #"{"code":203,"error":"Account already exists for this email address."}"#
            let usernameTaken = #"{"code":202,"error":"Account already exists for this username."}"#
            for (email, expected) in [("u1@example.com", emailTaken), ("u2@example.com", usernameTaken)] {
                let body: JSONValue = .object(["username": .string(email), "password": "a new password"])
                let signUp = try await parse.send("POST", "/users", json: body)
                #expect(signUp.text == expected)
                let put = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: body)
                #expect(put.text == expected)
            }
            #expect(try await parse.accountEvents() == events)
        }
    }

    /// A first password's username is the user's own email, when they have one: on another address it would hold
    /// that address for a user who does not show it, whose owner could then neither sign up with it nor reset it.
    /// 142, and nothing is written; on the user's own address it is added.
    @Test func aFirstPasswordIsAddedOnlyOnTheUsersOwnEmail() async throws {
        try await ParseApp.run { parse in
            let apple = try await parse.logIn("apple", ["id": "apple-own-email", "token": try await parse.appleToken("apple-own-email", email: "own@example.com")])
            let objectId = try #require(apple.string("objectId")), session = try #require(apple.string("sessionToken"))
            let events = try await parse.accountEvents()
            let squat = try await parse.send(
                "PUT", "/users/\(objectId)", .init(session: session), json: .object(["username": "someone.else@example.com", "password": "a new password"]))
            #expect(squat.status == 400 && squat.code == 142, "\(squat.text)")
            // The same through a log-in with authData and a password, by this user or by a new one: refused before the
            // sign-in, so no session opens and no user is made.
            for sub in ["apple-own-email", "apple-new-with-email"] {
                let email = sub == "apple-own-email" ? "own@example.com" : "new.with@example.com"
                let logIn = try await parse.send("POST", "/users", json: .object([
                    "authData": .object(["apple": ParseApp.strings(["id": sub, "token": try await parse.appleToken(sub, email: email)])]),
                    "username": "someone.else@example.com", "password": "a new password",
                ]))
                #expect(logIn.status == 400 && logIn.code == 142, "\(sub): \(logIn.text)")
            }
            #expect(try await parse.accountEvents() == events)
            let signUp = try await parse.send("POST", "/users", json: .object(["username": "someone.else@example.com", "password": "their password"]))
            #expect(signUp.status == 201, "the address's owner signs up with it: \(signUp.text)")
            let own = try await parse.send(
                "PUT", "/users/\(objectId)", .init(session: session), json: .object(["username": "Own@example.com", "password": "a new password"]))
            #expect(own.status == 200, "\(own.text)")
            let logIn = try await parse.send("POST", "/login", json: .object(["username": "own@example.com", "password": "a new password"]))
            #expect(logIn.string("objectId") == objectId, "\(logIn.text)")
        }
    }

    /// A first password added by a log-in with `authData` left the user's other sessions live, where the same password
    /// added by a `PUT` signs them out so that the owner notices. Both sign them out now; the log-in answers a live token.
    @Test func aFirstPasswordAddedByALogInSignsOtherSessionsOut() async throws {
        try await ParseApp.run { parse in
            let token = { (sub: String) async throws -> String in try await parse.appleToken(sub, email: "kept@example.com") }
            let earlier = try await parse.logIn("apple", ["id": "apple-first-pw", "token": try await token("apple-first-pw")])
            let earlierSession = try #require(earlier.string("sessionToken"))
            let withPassword = try await parse.send("POST", "/users", json: .object([
                "authData": .object(["apple": ParseApp.strings(["id": "apple-first-pw", "token": try await token("apple-first-pw")])]),
                "username": "kept@example.com", "password": "a first password",
            ]))
            #expect(withPassword.status == 200 && withPassword.string("objectId") == earlier.string("objectId"), "\(withPassword.text)")
            let answered = try #require(withPassword.string("sessionToken"))
            #expect(try await parse.send("GET", "/users/me", .init(session: earlierSession)).code == 209, "the other session ended")
            #expect(try await parse.send("GET", "/users/me", .init(session: answered)).status == 200, "the answer's token is live")
            let logIn = try await parse.send("POST", "/login", json: .object(["username": "kept@example.com", "password": "a first password"]))
            #expect(logIn.status == 200, "\(logIn.text)")
        }
    }

    /// A `PUT` that links providers and a password, or unlinks several, and a log-in that links the request's
    /// other identities and a password, each write their changes as one command: all of them, or none.
    @Test func aPutsChangesAndALogInsLinksAreOneCommandEach() async throws {
        try await ParseApp.run { parse in
            let user = try await parse.logIn("apple", ["id": "apple-one", "token": try await parse.appleToken("apple-one", email: "one@example.com")])
            let objectId = try #require(user.string("objectId"))
            let session = try #require(user.string("sessionToken"))
            let beforeLinks = try await parse.app.lastEventPosition()
            let linked = try await parse.send("PUT", "/users/\(objectId)", .init(session: session), json: .object([
                "authData": .object([
                    "google": ParseApp.strings(["id": "google-one", "id_token": try await parse.googleToken("google-one")]),
                    "facebook": ParseApp.strings(["id": "fb-one", "access_token": try await parse.facebookToken("fb-one")]),
                ]),
                "username": "one@example.com", "password": "one's password",
            ]))
            #expect(linked.status == 200, "\(linked.text)")
            #expect(try await parse.app.transactions(after: beforeLinks) == 1)
            // A first password ends every session and answers a new token, as Parse Server does for any password a PUT sets.
            #expect(try await parse.send("GET", "/users/me", .init(session: session)).code == 209)
            let renewed = try #require(linked.string("sessionToken"))
            #expect(try await parse.send("GET", "/users/me", .init(session: renewed)).authData.keys.sorted() == ["apple", "facebook", "google"])
            #expect(try await parse.send("GET", "/login?username=one@example.com&password=one%27s%20password").status == 200)

            let beforeUnlinks = try await parse.app.lastEventPosition()
            let unlinked = try await parse.send("PUT", "/users/\(objectId)", .init(session: renewed), json: .object([
                "authData": .object(["google": .null, "facebook": .null]),
            ]))
            #expect(unlinked.status == 200, "\(unlinked.text)")
            #expect(try await parse.app.transactions(after: beforeUnlinks) == 1)
            #expect(try await parse.send("GET", "/users/me", .init(session: renewed)).authData.keys.sorted() == ["apple"])

            // A log-in with the owned Apple ID and two new identities: the sign-in, then one command of links.
            let beforeLogIn = try await parse.app.lastEventPosition()
            let more = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "apple": ParseApp.strings(["id": "apple-one", "token": try await parse.appleToken("apple-one")]),
                "google": ParseApp.strings(["id": "google-two", "id_token": try await parse.googleToken("google-two")]),
                "facebook": ParseApp.strings(["id": "fb-two", "access_token": try await parse.facebookToken("fb-two")]),
            ])]))
            #expect(more.status == 200, "\(more.text)")
            #expect(more.string("objectId") == objectId)
            #expect(more.authData.keys.sorted() == ["apple", "facebook", "google"])
            #expect(try await parse.app.transactions(after: beforeLogIn) == 2)

            // A log-in through the user's Google with an Apple ID the user does not have: Parse Server saves the
            // changed entry, and so does Tether (it was verified, then ignored); the old Apple ID is nobody's now.
            let changed = try await parse.send("POST", "/users", json: .object(["authData": .object([
                "google": ParseApp.strings(["id": "google-two", "id_token": try await parse.googleToken("google-two")]),
                "apple": ParseApp.strings(["id": "apple-new", "token": try await parse.appleToken("apple-new")]),
            ])]))
            #expect(changed.status == 200, "\(changed.text)")
            #expect(changed.string("objectId") == objectId)
            #expect(changed.authData["apple"] == ["id": "apple-new"])
            #expect(try await parse.logIn("apple", ["id": "apple-new", "token": try await parse.appleToken("apple-new")]).string("objectId") == objectId)
            #expect(try await parse.logIn("apple", ["id": "apple-one", "token": try await parse.appleToken("apple-one")]).status == 201)
        }
    }
}
