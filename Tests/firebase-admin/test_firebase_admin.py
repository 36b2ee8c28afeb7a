"""The real firebase-admin (Python) against Tether's Firebase surface in emulator mode.

Run by Tests/TetherAPITests/Firebase/FirebaseAdminSDKTests.swift, which starts a Tether service
(development mode, a fresh database) and sets:
  FIREBASE_AUTH_EMULATOR_HOST  host:port of that service
  TETHER_FIREBASE_PROJECT_ID   the project it serves
Every call goes through the SDK's own request building and response parsing.
"""
import base64
import datetime
import json
import os
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import firebase_admin
from firebase_admin import auth, exceptions

HOST = os.environ["FIREBASE_AUTH_EMULATOR_HOST"]
PROJECT = os.environ["TETHER_FIREBASE_PROJECT_ID"]
APP = firebase_admin.initialize_app(options={"projectId": PROJECT})


def client_call(method, body):
    """A client SDK's call (no admin credential), as the JS and iOS SDKs make it in emulator mode."""
    request = urllib.request.Request(
        f"http://{HOST}/identitytoolkit.googleapis.com/v1/accounts:{method}?key=fake-api-key",
        data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


class UserManagement(unittest.TestCase):
    def test_create_get_update_and_delete(self):
        user = auth.create_user(uid="fa-user-1", email="ada@example.com", password="ada's password",
                                display_name="Ada", photo_url="https://example.com/ada.png", email_verified=True)
        self.assertEqual(user.uid, "fa-user-1")
        self.assertEqual(user.email, "ada@example.com")
        self.assertEqual(user.display_name, "Ada")
        self.assertTrue(user.email_verified)
        self.assertFalse(user.disabled)
        self.assertEqual([p.provider_id for p in user.provider_data], ["password"])
        self.assertGreater(user.user_metadata.creation_timestamp, 0)

        self.assertEqual(auth.get_user_by_email("ada@example.com").uid, "fa-user-1")
        with self.assertRaises(auth.EmailAlreadyExistsError):
            auth.create_user(email="ada@example.com")
        with self.assertRaises(auth.UidAlreadyExistsError):
            auth.create_user(uid="fa-user-1")

        updated = auth.update_user("fa-user-1", display_name="Ada L.", disabled=True, email_verified=False)
        self.assertEqual(updated.display_name, "Ada L.")
        self.assertTrue(updated.disabled)
        self.assertFalse(updated.email_verified)
        cleared = auth.update_user("fa-user-1", display_name=auth.DELETE_ATTRIBUTE, photo_url=auth.DELETE_ATTRIBUTE,
                                   disabled=False)
        self.assertIsNone(cleared.display_name)
        self.assertIsNone(cleared.photo_url)
        self.assertFalse(cleared.disabled)

        moved = auth.update_user("fa-user-1", email="ada.l@example.com")
        self.assertEqual(moved.email, "ada.l@example.com")
        self.assertEqual(client_call("signInWithPassword", {"email": "ada.l@example.com", "password": "ada's password"})["localId"],
                         "fa-user-1")
        auth.create_user(uid="fa-user-2", email="grace@example.com")
        with self.assertRaises(auth.EmailAlreadyExistsError):
            auth.update_user("fa-user-1", email="grace@example.com")
        auth.delete_user("fa-user-2")

        auth.set_custom_user_claims("fa-user-1", {"admin": True, "level": 3})
        self.assertEqual(auth.get_user("fa-user-1").custom_claims, {"admin": True, "level": 3})
        auth.set_custom_user_claims("fa-user-1", None)
        self.assertIsNone(auth.get_user("fa-user-1").custom_claims)
        with self.assertRaises(ValueError):
            auth.set_custom_user_claims("fa-user-1", {"sub": "not allowed"})

        auth.delete_user("fa-user-1")
        with self.assertRaises(auth.UserNotFoundError):
            auth.get_user("fa-user-1")
        with self.assertRaises(auth.UserNotFoundError):
            auth.delete_user("fa-user-1")

    def test_providers_to_delete_unlinks(self):
        signed_in = client_call("signUp", {"email": "bob@example.com", "password": "bob's password",
                                           "returnSecureToken": True})
        uid = signed_in["localId"]
        user = auth.get_user(uid)
        self.assertEqual([p.provider_id for p in user.provider_data], ["password"])
        after = auth.update_user(uid, providers_to_delete=["password"])
        self.assertEqual(after.provider_data, [])

    def test_get_users_with_each_identifier_and_list_users_to_the_end(self):
        made = [auth.create_user(uid=f"list-{n}", email=f"list{n}@example.com") for n in range(5)]
        found = auth.get_users([
            auth.UidIdentifier("list-0"), auth.EmailIdentifier("list1@example.com"),
            auth.ProviderIdentifier("password", "nobody@example.com"), auth.PhoneIdentifier("+15555550100"),
            auth.UidIdentifier("nobody"),
        ])
        self.assertEqual(sorted(u.uid for u in found.users), ["list-0", "list-1"])
        self.assertEqual(len(found.not_found), 3)

        seen = []
        page = auth.list_users(max_results=2)
        while page:
            seen += [u.uid for u in page.users]
            page = page.get_next_page()
        for user in made:
            self.assertIn(user.uid, seen)
        self.assertEqual(len(seen), len(set(seen)))
        result = auth.delete_users([u.uid for u in made] + ["nobody"])
        self.assertEqual(result.success_count, 6)
        self.assertEqual(result.failure_count, 0)
        with self.assertRaises(auth.UserNotFoundError):
            auth.get_user("list-3")


class Imports(unittest.TestCase):
    # The example of Firebase's own scrypt utility (firebase/scrypt): project parameters, a user's salt and hash.
    SIGNER_KEY = "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA=="
    SALT = "42xEC+ixf3L2lw=="
    HASH = "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ=="

    def test_import_users_with_scrypt_and_bcrypt_hashes_then_sign_in(self):
        scrypt = auth.UserImportHash.scrypt(key=base64.b64decode(self.SIGNER_KEY), rounds=8, memory_cost=14,
                                            salt_separator=base64.b64decode("Bw=="))
        result = auth.import_users([
            auth.ImportUserRecord(uid="imported-scrypt", email="imp1@example.com", display_name="Imp One",
                                  password_hash=base64.b64decode(self.HASH), password_salt=base64.b64decode(self.SALT),
                                  provider_data=[auth.UserProvider(uid="g-imp-1", provider_id="google.com")]),
        ], hash_alg=scrypt)
        self.assertEqual((result.success_count, result.failure_count), (1, 0), [e.reason for e in result.errors])
        signed_in = client_call("signInWithPassword", {"email": "imp1@example.com", "password": "user1password"})
        self.assertEqual(signed_in["localId"], "imported-scrypt")
        imported = auth.get_user("imported-scrypt")
        self.assertEqual(sorted(p.provider_id for p in imported.provider_data), ["google.com", "password"])

        # From the crypt_blowfish test vectors (Solar Designer).
        bcrypt = auth.import_users([
            auth.ImportUserRecord(uid="imported-bcrypt", email="imp2@example.com",
                                  password_hash=b"$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"),
            auth.ImportUserRecord(uid="imported-scrypt", email="imp3@example.com"),
        ], hash_alg=auth.UserImportHash.bcrypt())
        self.assertEqual((bcrypt.success_count, bcrypt.failure_count), (1, 1))
        self.assertEqual(bcrypt.errors[0].index, 1)
        self.assertEqual(client_call("signInWithPassword", {"email": "imp2@example.com", "password": "U*U"})["localId"],
                         "imported-bcrypt")
        request = urllib.request.Request(
            f"http://{HOST}/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword?key=k",
            data=json.dumps({"email": "imp2@example.com", "password": "U*V"}).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        with self.assertRaises(urllib.error.HTTPError):
            urllib.request.urlopen(request)


class Tokens(unittest.TestCase):
    def test_create_custom_token_signs_the_uid_in_with_its_claims(self):
        token = auth.create_custom_token("custom-fa-1", {"premium": True, "tier": "gold"})
        signed_in = client_call("signInWithCustomToken", {"token": token.decode(), "returnSecureToken": True})
        self.assertTrue(signed_in["isNewUser"])
        claims = auth.verify_id_token(signed_in["idToken"], check_revoked=True)
        self.assertEqual(claims["uid"], "custom-fa-1")
        self.assertTrue(claims["premium"])
        self.assertEqual(claims["firebase"]["sign_in_provider"], "custom")
        self.assertEqual(auth.get_user("custom-fa-1").uid, "custom-fa-1")
        again = client_call("signInWithCustomToken", {"token": auth.create_custom_token("custom-fa-1").decode()})
        self.assertFalse(again["isNewUser"])
        with self.assertRaises(ValueError):
            auth.create_custom_token("custom-fa-1", {"iss": "reserved"})

    def test_revoke_refresh_tokens_then_verify_id_token_checks_revocation(self):
        signed_in = client_call("signUp", {"email": "cy@example.com", "password": "cy's password",
                                           "returnSecureToken": True})
        claims = auth.verify_id_token(signed_in["idToken"], check_revoked=True)
        self.assertEqual(claims["uid"], signed_in["localId"])
        self.assertEqual(claims["firebase"]["sign_in_provider"], "password")
        time.sleep(1.1)  # validSince is whole seconds: revoke in a later second than the token's iat
        auth.revoke_refresh_tokens(signed_in["localId"])
        self.assertGreater(auth.get_user(signed_in["localId"]).tokens_valid_after_timestamp, 0)
        with self.assertRaises(auth.RevokedIdTokenError):
            auth.verify_id_token(signed_in["idToken"], check_revoked=True)
        # Tether keeps the production rule the emulator skips: the refresh token is dead too.
        request = urllib.request.Request(
            f"http://{HOST}/securetoken.googleapis.com/v1/token?key=k",
            data=json.dumps({"grant_type": "refresh_token", "refresh_token": signed_in["refreshToken"]}).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request)
        self.assertEqual(json.loads(refused.exception.read())["error"]["message"], "TOKEN_EXPIRED")

    def test_a_disabled_users_token_is_refused(self):
        signed_in = client_call("signUp", {})
        auth.update_user(signed_in["localId"], disabled=True)
        with self.assertRaises(auth.UserDisabledError):
            auth.verify_id_token(signed_in["idToken"], check_revoked=True)


class SessionCookies(unittest.TestCase):
    def test_a_session_cookie_verifies_until_its_user_is_revoked(self):
        signed_in = client_call("signUp", {"email": "biscuit@example.com", "password": "biscuit's password",
                                           "returnSecureToken": True})
        cookie = auth.create_session_cookie(signed_in["idToken"], expires_in=datetime.timedelta(days=5))
        claims = auth.verify_session_cookie(cookie, check_revoked=True)
        self.assertEqual(claims["uid"], signed_in["localId"])
        self.assertEqual(claims["iss"], f"https://session.firebase.google.com/{PROJECT}")
        self.assertEqual(claims["exp"] - claims["iat"], 5 * 86400)
        self.assertEqual(claims["email"], "biscuit@example.com")
        with self.assertRaises(ValueError):
            auth.create_session_cookie(signed_in["idToken"], expires_in=60)  # the SDK's own bound
        with self.assertRaises(auth.InvalidIdTokenError):
            auth.create_session_cookie(signed_in["idToken"][:-4] + "AAAA", expires_in=3600)
        time.sleep(1.1)  # validSince is whole seconds: revoke in a later second than the cookie's iat
        auth.revoke_refresh_tokens(signed_in["localId"])
        with self.assertRaises(auth.RevokedSessionCookieError):
            auth.verify_session_cookie(cookie, check_revoked=True)
        # The ID token it was made from is revoked too: no new cookie from it.
        with self.assertRaises(exceptions.FirebaseError) as refused:
            auth.create_session_cookie(signed_in["idToken"], expires_in=3600)
        self.assertIn("TOKEN_EXPIRED", str(refused.exception))

    def test_a_disabled_users_cookie_is_refused(self):
        signed_in = client_call("signUp", {})
        cookie = auth.create_session_cookie(signed_in["idToken"], expires_in=3600)
        self.assertEqual(auth.verify_session_cookie(cookie, check_revoked=True)["uid"], signed_in["localId"])
        auth.update_user(signed_in["localId"], disabled=True)
        with self.assertRaises(auth.UserDisabledError):
            auth.verify_session_cookie(cookie, check_revoked=True)


class EmailActions(unittest.TestCase):
    @staticmethod
    def code_of(link):
        return urllib.parse.parse_qs(urllib.parse.urlparse(link).query)["oobCode"][0]

    def test_generate_password_reset_link_then_reset_with_its_code(self):
        signed_in = client_call("signUp", {"email": "dee@example.com", "password": "dee's password",
                                           "returnSecureToken": True})
        link = auth.generate_password_reset_link("dee@example.com")
        self.assertIn("/actions/reset-password?", link)
        code = self.code_of(link)
        checked = client_call("resetPassword", {"oobCode": code})
        self.assertEqual(checked["requestType"], "PASSWORD_RESET")
        self.assertEqual(checked["email"], "dee@example.com")
        reset = client_call("resetPassword", {"oobCode": code, "newPassword": "dee's new password"})
        self.assertEqual(reset["email"], "dee@example.com")
        user = auth.get_user(signed_in["localId"])
        self.assertTrue(user.email_verified)
        self.assertGreater(user.tokens_valid_after_timestamp, 0)
        client_call("signInWithPassword", {"email": "dee@example.com", "password": "dee's new password"})
        with self.assertRaises(urllib.error.HTTPError) as refused:
            client_call("resetPassword", {"oobCode": code, "newPassword": "a third password"})
        self.assertEqual(json.loads(refused.exception.read())["error"]["message"], "INVALID_OOB_CODE")

    def test_generate_email_verification_link_then_apply_its_code(self):
        signed_in = client_call("signUp", {"email": "eli@example.com", "password": "eli's password"})
        link = auth.generate_email_verification_link("eli@example.com")
        applied = client_call("update", {"oobCode": self.code_of(link)})
        self.assertTrue(applied["emailVerified"])
        self.assertTrue(auth.get_user(signed_in["localId"]).email_verified)

    def test_a_link_for_an_unknown_address_is_email_not_found(self):
        with self.assertRaises(auth.EmailNotFoundError):
            auth.generate_password_reset_link("nobody@example.com")

    def test_a_verification_link_for_an_unknown_address_is_user_not_found(self):
        # WIRE-FACTS §3a: VERIFY_EMAIL's admin form answers USER_NOT_FOUND, PASSWORD_RESET's EMAIL_NOT_FOUND.
        with self.assertRaises(auth.UserNotFoundError):
            auth.generate_email_verification_link("nobody@example.com")


if __name__ == "__main__":
    unittest.main(verbosity=2)
