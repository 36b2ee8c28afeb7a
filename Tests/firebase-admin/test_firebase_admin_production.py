"""firebase-admin signing a custom token with a service account from `tether firebase service-account create`,
outside emulator mode, sent to a Tether service in production mode (no `Bearer owner`, no unsigned tokens).

Run by Tests/TetherAPITests/Firebase/FirebaseAdminSDKTests.swift with:
  TETHER_URL                  http://host:port of the service
  TETHER_SERVICE_ACCOUNT      path of the JSON the command printed
"""
import base64
import json
import os
import unittest
import urllib.error
import urllib.request

import firebase_admin
from firebase_admin import auth, credentials

assert "FIREBASE_AUTH_EMULATOR_HOST" not in os.environ, "this suite runs outside emulator mode"
URL = os.environ["TETHER_URL"]
APP = firebase_admin.initialize_app(credentials.Certificate(os.environ["TETHER_SERVICE_ACCOUNT"]))


def sign_in_with_custom_token(token):
    request = urllib.request.Request(
        f"{URL}/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken?key=k",
        data=json.dumps({"token": token, "returnSecureToken": True}).encode(),
        headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def b64(document):
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


class CustomTokensInProduction(unittest.TestCase):
    def test_a_token_signed_with_the_service_account_signs_in(self):
        token = auth.create_custom_token("prod-user-1", {"role": "editor"})
        header = json.loads(base64.urlsafe_b64decode(token.split(b".")[0] + b"=="))
        self.assertEqual(header["alg"], "RS256")
        status, body = sign_in_with_custom_token(token.decode())
        self.assertEqual(status, 200, body)
        self.assertTrue(body["isNewUser"])
        payload = json.loads(base64.urlsafe_b64decode(body["idToken"].split(".")[1] + "=="))
        self.assertEqual(payload["sub"], "prod-user-1")
        self.assertEqual(payload["role"], "editor")

    def test_an_unsigned_or_tampered_token_is_refused(self):
        token = auth.create_custom_token("prod-user-2").decode()
        header, payload, _ = token.split(".")
        unsigned = b64({"alg": "none", "typ": "JWT"}) + "." + payload + "."
        status, body = sign_in_with_custom_token(unsigned)
        self.assertEqual(status, 400)
        self.assertTrue(body["error"]["message"].startswith("INVALID_CUSTOM_TOKEN"), body)
        claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
        claims["uid"] = "someone-else"
        status, body = sign_in_with_custom_token(header + "." + b64(claims) + "." + token.split(".")[2])
        self.assertEqual(status, 400)
        self.assertTrue(body["error"]["message"].startswith("INVALID_CUSTOM_TOKEN"), body)


if __name__ == "__main__":
    unittest.main(verbosity=2)
